"""The API's paged lists: the jobs of the caller's teams and the audit trail, each a JSON array
with ``?limit=&offset=`` and the total and the neighbouring pages in the headers."""

from __future__ import annotations

import datetime as dt
import re

import pandas as pd
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from anonweb.accounts.models import ApiToken, Membership, Role
from anonweb.audit.services import audit_record
from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.jobs.publication import release_create
from tests.web.conftest import csv_upload
from tests.web.factories import member

pytestmark = pytest.mark.django_db

T0 = timezone.make_aware(dt.datetime(2026, 3, 1, 9, 0))


def api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {ApiToken.issue(user)[1]}")
    return client


def add_job(team, dataset, user, *, minutes: int, status=JobStatus.SUCCEEDED, kind=None) -> Job:
    job = Job.objects.create(
        team=team,
        dataset=dataset,
        created_by=user,
        kind=kind or JobKind.PROFILE,
        status=status,
    )
    Job.objects.filter(pk=job.pk).update(created_at=T0 + dt.timedelta(minutes=minutes))
    return job


def links(response) -> dict[str, str]:
    """rel -> URL of the Link header."""
    found = re.findall(r'<([^>]+)>; rel="(\w+)"', response.get("Link", ""))
    return {rel: url for url, rel in found}


def ids(response) -> list[int]:
    assert response.status_code == 200, response.content
    return [item["id"] for item in response.json()]


def second_dataset(officer, team, name="visits"):
    from anonweb.datasets.services import dataset_create

    return dataset_create(user=officer, team=team, upload=csv_upload(), name=name)


# ---- the job list -----------------------------------------------------------------------------


def test_jobs_newest_first_each_as_its_detail(officer, team, dataset):
    # created out of time order, two at the same minute: the later id comes first between them
    b = add_job(team, dataset, officer, minutes=20, status=JobStatus.FAILED)
    c = add_job(team, dataset, officer, minutes=5, status=JobStatus.QUEUED)
    a = add_job(team, None, officer, minutes=30, kind=JobKind.DEMO_SLEEP)
    d = add_job(
        team, dataset, officer, minutes=20, status=JobStatus.RUNNING, kind=JobKind.ANONYMIZE
    )
    release = release_create(
        job=d, frame=pd.DataFrame({"age": ["20-29"]}), plan={}, report={}, title="r"
    )
    client = api(officer)
    response = client.get("/api/v1/jobs/")
    assert ids(response) == [a.pk, d.pk, b.pk, c.pk]
    listed = response.json()
    for item in listed:
        assert item == client.get(f"/api/v1/jobs/{item['id']}/").json()
    assert listed[1] == {
        "id": d.pk,
        "kind": "anonymize",
        "status": "succeeded",
        "progress": 100,
        "message": "done",
        "error": "",
        "dataset": dataset.pk,
        "release": release.pk,
    }
    assert listed[0]["dataset"] is None and listed[0]["release"] is None
    assert response["X-Total-Count"] == "4"
    assert "Link" not in response  # one page


def test_jobs_filtered_by_dataset_and_status(officer, team, dataset):
    visits = second_dataset(officer, team)
    j1 = add_job(team, dataset, officer, minutes=1, status=JobStatus.SUCCEEDED)
    j2 = add_job(team, visits, officer, minutes=2, status=JobStatus.FAILED)
    j3 = add_job(team, dataset, officer, minutes=3, status=JobStatus.FAILED)
    j4 = add_job(team, visits, officer, minutes=4, status=JobStatus.RUNNING)
    client = api(officer)
    # the two datasets' upload (parse) jobs exist too: count them out by kind in the checks
    parse = list(Job.objects.filter(kind=JobKind.PARSE).values_list("pk", flat=True))
    assert all(p not in (j1.pk, j2.pk, j3.pk, j4.pk) for p in parse)

    def listed(query: str) -> list[int]:
        return [i for i in ids(client.get(f"/api/v1/jobs/?{query}")) if i not in parse]

    assert listed(f"dataset={dataset.pk}") == [j3.pk, j1.pk]
    assert listed(f"dataset={visits.pk}") == [j4.pk, j2.pk]
    assert listed("status=failed") == [j3.pk, j2.pk]
    assert listed(f"status=failed&dataset={visits.pk}") == [j2.pk]
    assert listed("status=running") == [j4.pk]
    assert listed("status=cancelled") == []
    response = client.get(f"/api/v1/jobs/?status=failed&dataset={visits.pk}")
    assert response["X-Total-Count"] == "1"
    assert listed(f"dataset={visits.pk + 1000}") == []


@pytest.mark.parametrize(
    "query,message",
    [
        ("status=done", "status: one of queued, running, succeeded, failed, cancelled"),
        ("status=FAILED", "status: one of queued"),
        ("dataset=patients", "dataset: expected a whole number, got 'patients'"),
        ("limit=ten", "limit: expected a whole number, got 'ten'"),
        ("offset=-2", "offset: expected a whole number, got '-2'"),
    ],
)
def test_a_bad_filter_or_page_is_a_400_naming_it(officer, dataset, query, message):
    response = api(officer).get(f"/api/v1/jobs/?{query}")
    assert response.status_code == 400
    (error,) = response.json()["errors"]
    assert error.startswith(message), error


def test_another_teams_jobs_never_appear(officer, outsider, team, other_team, dataset):
    theirs = second_dataset(outsider, other_team, name="elsewhere-data")
    mine = add_job(team, dataset, officer, minutes=1)
    other = add_job(other_team, theirs, outsider, minutes=2)
    our_ids = set(Job.objects.filter(team=team).values_list("pk", flat=True))
    their_ids = set(Job.objects.filter(team=other_team).values_list("pk", flat=True))
    assert mine.pk in our_ids and other.pk in their_ids
    assert set(ids(api(officer).get("/api/v1/jobs/"))) == our_ids
    assert set(ids(api(outsider).get("/api/v1/jobs/"))) == their_ids
    # naming the other team's dataset, or state, shows nothing of it
    assert ids(api(officer).get(f"/api/v1/jobs/?dataset={theirs.pk}")) == []
    assert set(ids(api(officer).get("/api/v1/jobs/?status=succeeded"))) <= our_ids
    assert api(officer).get(f"/api/v1/jobs/{other.pk}/").status_code == 404


def test_roles_officers_and_stewards_see_jobs_analysts_none(
    officer, steward, analyst, team, other_team, dataset
):
    add_job(team, dataset, officer, minutes=1)
    ours = set(Job.objects.filter(team=team).values_list("pk", flat=True))
    assert set(ids(api(steward).get("/api/v1/jobs/"))) == ours
    response = api(analyst).get("/api/v1/jobs/")
    assert ids(response) == [] and response["X-Total-Count"] == "0"
    # a steward elsewhere and an analyst here: the other team's jobs only
    Membership.objects.create(user=analyst, team=other_team, role=Role.DATA_STEWARD)
    theirs = add_job(other_team, None, analyst, minutes=2, kind=JobKind.DEMO_SLEEP)
    assert ids(api(analyst).get("/api/v1/jobs/")) == [theirs.pk]


def test_job_pages_follow_the_links_through_the_list(officer, team):
    made = [add_job(team, None, officer, minutes=m, kind=JobKind.DEMO_SLEEP) for m in range(5)]
    newest_first = [j.pk for j in reversed(made)]
    client = api(officer)

    first = client.get("/api/v1/jobs/?limit=2")
    assert ids(first) == newest_first[:2]
    assert first["X-Total-Count"] == "5"
    assert set(links(first)) == {"next"}
    assert links(first)["next"] == "http://testserver/api/v1/jobs/?limit=2&offset=2"

    second = client.get(links(first)["next"])
    assert ids(second) == newest_first[2:4]
    assert links(second) == {
        "next": "http://testserver/api/v1/jobs/?limit=2&offset=4",
        "prev": "http://testserver/api/v1/jobs/?limit=2",
    }
    last = client.get(links(second)["next"])
    assert ids(last) == newest_first[4:]
    assert set(links(last)) == {"prev"} and last["X-Total-Count"] == "5"
    assert ids(client.get("/api/v1/jobs/?limit=2&offset=9")) == []


def test_the_filters_stay_in_the_page_links(officer, team, dataset):
    for m in range(3):
        add_job(team, dataset, officer, minutes=m, status=JobStatus.FAILED)
    add_job(team, dataset, officer, minutes=9)
    response = api(officer).get(f"/api/v1/jobs/?status=failed&dataset={dataset.pk}&limit=2")
    assert response["X-Total-Count"] == "3"
    following = api(officer).get(links(response)["next"])
    assert "status=failed" in links(response)["next"]
    assert [j["status"] for j in following.json()] == ["failed"]


def test_job_list_default_page_is_200(officer, team):
    Job.objects.bulk_create(
        Job(team=team, created_by=officer, kind=JobKind.DEMO_SLEEP) for _ in range(201)
    )
    client = api(officer)
    response = client.get("/api/v1/jobs/")
    assert len(response.json()) == 200
    assert response["X-Total-Count"] == "201"
    assert links(response)["next"] == "http://testserver/api/v1/jobs/?limit=200&offset=200"
    assert len(client.get("/api/v1/jobs/?limit=1000").json()) == 201
    assert client.get("/api/v1/jobs/?limit=1001").json() == {
        "errors": ["limit: at most 1,000, got 1001"]
    }
    assert len(client.get("/api/v1/jobs/?limit=0").json()) == 200  # 0 or none: the default


def test_the_job_list_costs_the_same_queries_for_one_job_or_eleven(officer, team, dataset):
    def queries() -> int:
        with CaptureQueriesContext(connection) as ctx:
            response = client.get("/api/v1/jobs/")
        assert response.status_code == 200
        return len(ctx)

    client, run = api(officer), JobStatus.RUNNING
    job = add_job(team, dataset, officer, minutes=0, status=run, kind=JobKind.ANONYMIZE)
    release_create(job=job, frame=pd.DataFrame({"a": [1]}), plan={}, report={}, title="r")
    queries()
    before = queries()
    for m in range(10):
        job = add_job(team, dataset, officer, minutes=m + 1, status=run, kind=JobKind.ANONYMIZE)
        release_create(job=job, frame=pd.DataFrame({"a": [m]}), plan={}, report={}, title="r")
    assert queries() == before
    listed = client.get("/api/v1/jobs/").json()
    assert len([j for j in listed if j["kind"] == "anonymize" and j["release"]]) == 11


# ---- the audit trail in pages -----------------------------------------------------------------


def test_audit_is_still_a_list_now_in_pages(officer, team, dataset):
    for i in range(5):
        audit_record(actor=officer, team=team, action="test.event", details={"i": i})
    client = api(officer)
    everything = client.get("/api/v1/audit/")
    assert isinstance(everything.json(), list)
    total = len(everything.json())
    assert total >= 7  # the upload and tagging of the dataset, and the five above
    assert everything["X-Total-Count"] == str(total)
    newest = [e["id"] for e in everything.json()]
    assert newest == sorted(newest, reverse=True)

    first = client.get("/api/v1/audit/?action=test.event&limit=2")
    assert [e["details"]["i"] for e in first.json()] == [4, 3]
    assert first["X-Total-Count"] == "5"
    walked, response = [], first
    while True:
        walked += [e["details"]["i"] for e in response.json()]
        if "next" not in links(response):
            break
        assert "action=test.event" in links(response)["next"]
        response = client.get(links(response)["next"])
    assert walked == [4, 3, 2, 1, 0]
    assert set(links(response)) == {"prev"}
    # the limit alone answers as it always did: the newest events, at most that many
    assert [e["id"] for e in client.get("/api/v1/audit/?limit=3").json()] == newest[:3]
    assert client.get("/api/v1/audit/?limit=x").status_code == 400


def test_audit_pages_show_an_analyst_nothing_of_the_dataset(analyst, officer, team, dataset):
    response = api(analyst).get(f"/api/v1/audit/?dataset={dataset.pk}")
    assert response.json() == [] and response["X-Total-Count"] == "0"
    assert "Link" not in response
    other = member(team, Role.PRIVACY_OFFICER, username="otto")
    assert api(other).get(f"/api/v1/audit/?dataset={dataset.pk}")["X-Total-Count"] != "0"


# ---- the schema -------------------------------------------------------------------------------


def test_the_schema_describes_the_lists_and_their_pages(officer):
    schema = api(officer).get("/api/schema/?format=json").json()
    jobs = schema["paths"]["/api/v1/jobs/"]["get"]
    params = {p["name"]: p for p in jobs["parameters"]}
    assert set(params) == {"dataset", "status", "limit", "offset"}
    assert sorted(params["status"]["schema"]["enum"]) == sorted(JobStatus.values)
    assert jobs["x-roles"] == [Role.PRIVACY_OFFICER.value, Role.DATA_STEWARD.value]
    ok = jobs["responses"]["200"]
    assert set(ok["headers"]) == {"X-Total-Count", "Link"}
    body = ok["content"]["application/json"]["schema"]
    assert body == {"type": "array", "items": {"$ref": "#/components/schemas/JobOut"}}
    audit = schema["paths"]["/api/v1/audit/"]["get"]
    assert {p["name"] for p in audit["parameters"]} == {"dataset", "action", "limit", "offset"}
    body = audit["responses"]["200"]["content"]["application/json"]["schema"]
    assert body == {"type": "array", "items": {"$ref": "#/components/schemas/AuditEventOut"}}


def test_every_paged_list_documents_its_paging(officer):
    from anonweb.api.views import PagedView
    from tests.web.api.test_api_access import api_routes, openapi_path

    schema = api(officer).get("/api/schema/?format=json").json()
    paged = [
        r for _n, r, cls in api_routes() if isinstance(cls, type) and issubclass(cls, PagedView)
    ]
    assert {openapi_path(r) for r in paged} == {
        "/api/v1/jobs/",
        "/api/v1/audit/",
        "/api/v1/releases/",
    }
    for route in paged:
        get = schema["paths"][openapi_path(route)]["get"]
        params = {p["name"]: p for p in get["parameters"] if p["in"] == "query"}
        assert {"limit", "offset"} <= set(params), route
        assert set(get["responses"]["200"]["headers"]) == {"X-Total-Count", "Link"}, route
        assert get["responses"]["200"]["content"]["application/json"]["schema"]["type"] == "array"
    releases = schema["paths"]["/api/v1/releases/"]["get"]
    limit = next(p for p in releases["parameters"] if p["name"] == "limit")
    assert "default 500" in limit["description"]


# ---- the releases in pages --------------------------------------------------------------------


def test_releases_stay_a_list_now_in_pages(officer, steward, analyst, team, dataset):
    from anonweb.releases.services import release_approve

    made = []
    for m in range(3):
        job = add_job(team, dataset, officer, minutes=m, status=JobStatus.RUNNING)
        made.append(
            release_create(
                job=job, frame=pd.DataFrame({"a": [m]}), plan={}, report={}, title=f"r{m}"
            )
        )
    release_approve(user=steward, release=made[0], note="fine")
    release_approve(user=steward, release=made[2], note="fine")
    client = api(officer)
    everything = client.get("/api/v1/releases/")
    assert ids(everything) == [r.pk for r in reversed(made)]
    assert everything["X-Total-Count"] == "3" and "Link" not in everything
    first = client.get("/api/v1/releases/?limit=2")
    assert ids(first) == [made[2].pk, made[1].pk]
    assert links(first) == {"next": "http://testserver/api/v1/releases/?limit=2&offset=2"}
    assert ids(client.get(links(first)["next"])) == [made[0].pk]
    # the filters and the analyst's view count as before
    response = client.get("/api/v1/releases/?status=approved&limit=1")
    assert ids(response) == [made[2].pk] and response["X-Total-Count"] == "2"
    response = api(analyst).get("/api/v1/releases/")
    assert ids(response) == [made[2].pk, made[0].pk] and response["X-Total-Count"] == "2"
    assert api(officer).get("/api/v1/releases/?offset=x").status_code == 400
