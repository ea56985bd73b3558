"""Raw source values are for the team's privacy officers only, on every page and API answer.

A steward reads the same dataset, jobs and release as the officer: the risk profile (whose
disclosing classes are whole source records), the utility of a release whose identifier
column was tokenized (the source's names beside the tokens, with the same counts in the same
order) and a failed job whose message quotes cells. Every answer a steward can reach is
searched for those values; the officer's answers still show them."""

from __future__ import annotations

import pytest
from django.urls import reverse

from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.jobs.services import job_create
from tests.web.api.test_api import api
from tests.web.conftest import small_table

pytestmark = pytest.mark.django_db

NAMES = list(small_table()["name"])
# ZIP codes of the source: they appear in the disclosing classes and in the failed job's message
ZIPS = [z for z in small_table()["zip"] if z != "47677"]
RAW = NAMES + ZIPS

TOKENIZED = {
    "version": 1,
    "quasi_identifiers": ["age", "sex"],
    "sensitive": ["disease"],
    "hierarchies": {
        "age": {"builder": "interval", "width": 10},
        "sex": {"rows": [["F", "*"], ["M", "*"]]},
    },
    "steps": [
        {"kind": "tokenize", "params": {"columns": ["name"], "key": "release-key"}},
        {"kind": "drop", "params": {"columns": ["zip"]}},
        {"kind": "optimal_generalization", "params": {"k": 2, "suppression": 0.0}},
    ],
}
# A hierarchy that covers one ZIP code: the job fails naming the others, values and all.
UNCOVERED = {
    "version": 1,
    "quasi_identifiers": ["age", "zip"],
    "sensitive": ["disease"],
    "hierarchies": {
        "zip": {"rows": [["47677", "4767*", "*"]]},
        "age": {"builder": "interval", "width": 10},
    },
    "steps": [
        {"kind": "drop", "params": {"columns": ["name"]}},
        {"kind": "generalize", "params": {"levels": {"zip": 1, "age": 1}}},
    ],
}


def _run(officer, dataset, kind, params=None) -> Job:
    job = job_create(
        user=officer, team=dataset.team, kind=kind, dataset=dataset, params=params or {}
    )
    job_execute(job_id=job.pk, worker="test")
    return Job.objects.get(pk=job.pk)


@pytest.fixture
def scene(officer, steward, dataset):
    profile = _run(officer, dataset, JobKind.PROFILE)
    assert profile.status == JobStatus.SUCCEEDED, profile.error_detail
    launch = {"title": "t", "purpose": "statistics", "recipient": "research unit"}
    released = _run(officer, dataset, JobKind.ANONYMIZE, {"plan": TOKENIZED, **launch})
    assert released.status == JobStatus.SUCCEEDED, released.error_detail
    failed = _run(officer, dataset, JobKind.ANONYMIZE, {"plan": UNCOVERED, **launch})
    assert failed.status == JobStatus.FAILED
    return {"dataset": dataset, "release": released.release, "jobs": [profile, released, failed]}


def _answers(user, scene, client) -> dict[str, str]:
    """Every page and API answer about the scene's objects that ``user`` can reach."""
    dataset, release, jobs = scene["dataset"], scene["release"], scene["jobs"]
    client.force_login(user)
    pages = [
        reverse("datasets:list"),
        reverse("datasets:detail", args=[dataset.pk]),
        reverse("datasets:whatif", args=[dataset.pk]),
        reverse("jobs:list"),
        reverse("releases:list"),
        reverse("releases:detail", args=[release.pk]),
        reverse("audit:list"),
    ]
    for job in jobs:
        pages += [reverse("jobs:detail", args=[job.pk]), reverse("jobs:status", args=[job.pk])]
    out = {}
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        out[url] = response.content.decode()
    rest = api(user)
    base = "/api/v1"
    calls = [
        f"{base}/datasets/",
        f"{base}/datasets/{dataset.pk}/",
        f"{base}/datasets/{dataset.pk}/risk/",
        f"{base}/jobs/",
        f"{base}/releases/",
        f"{base}/releases/{release.pk}/",
        f"{base}/releases/{release.pk}/utility/",
        f"{base}/releases/{release.pk}/signoff/",
        f"{base}/audit/",
        *[f"{base}/jobs/{job.pk}/" for job in jobs],
    ]
    for url in calls:
        response = rest.get(url)
        assert response.status_code == 200, url
        out[url] = response.content.decode()
    whatif = rest.post(
        f"{base}/datasets/{dataset.pk}/what-if/", {"levels": {}, "suppression": 0.0}, format="json"
    )
    assert whatif.status_code == 200
    out["what-if"] = whatif.content.decode()
    return out


def _quoting(answers: dict[str, str]) -> dict[str, list[str]]:
    return {
        url: found
        for url, text in answers.items()
        if (found := [value for value in RAW if value in text])
    }


def test_no_page_or_api_answer_gives_a_steward_a_raw_value(client, officer, steward, scene):
    assert _quoting(_answers(steward, scene, client)) == {}


def test_the_officer_still_reads_them(client, officer, scene):
    quoting = _quoting(_answers(officer, scene, client))
    release, failed = scene["release"], scene["jobs"][2]
    # the disclosing classes are whole source records
    assert set(quoting[f"/api/v1/datasets/{scene['dataset'].pk}/risk/"]) >= set(ZIPS)
    # the source's names beside the tokens
    assert set(quoting[f"/api/v1/releases/{release.pk}/utility/"]) == set(NAMES)
    # the failed job's message as written
    assert set(quoting[f"/api/v1/jobs/{failed.pk}/"]) == set(ZIPS)
    assert set(quoting[reverse("jobs:detail", args=[failed.pk])]) == set(ZIPS)


def test_the_steward_reads_the_figures_and_what_failed(client, steward, scene):
    dataset, release, failed = scene["dataset"], scene["release"], scene["jobs"][2]
    rest = api(steward)
    risk = rest.get(f"/api/v1/datasets/{dataset.pk}/risk/").json()
    disease = risk["sensitive"]["disease"]
    assert disease["disclosing_classes_count"] >= 1 and "disclosing_classes" not in disease
    utility = rest.get(f"/api/v1/releases/{release.pk}/utility/").json()
    name = next(c for c in utility["columns"] if c["column"] == "name")
    assert name["original"]["counts"] and name["original"]["labels"][0].startswith("source value")
    job = rest.get(f"/api/v1/jobs/{failed.pk}/").json()
    assert "does not fit its column" in job["error"] and "zip" in job["error"]


def test_a_purge_removes_the_failed_job_s_message(client, officer, scene):
    from anonweb.jobs.retention import dataset_purge

    dataset_purge(user=officer, dataset=scene["dataset"], reason="test")
    failed = Job.objects.get(pk=scene["jobs"][2].pk)
    assert failed.error_detail == "" and "zip" in failed.error
    job = api(officer).get(f"/api/v1/jobs/{failed.pk}/").json()
    assert not [value for value in RAW if value in job["error"]]


def test_a_failed_upload_s_reason_is_the_officer_s(client, officer, steward, team):
    """The reason names the file's lines and may quote its cells: stewards read that it could
    not be read."""
    from tests.web.api.test_api import run_queued, upload

    header_only = small_table().iloc[:0]
    response = upload(api(officer), df=header_only)
    assert response.status_code == 202
    run_queued()
    dataset_id = response.json()["id"]
    url = f"/api/v1/datasets/{dataset_id}/"
    assert "no data rows" in api(officer).get(url).json()["error"]
    seen = api(steward).get(url).json()["error"]
    assert "could not be read" in seen and "no data rows" not in seen
    client.force_login(steward)
    page = client.get(reverse("datasets:detail", args=[dataset_id])).content.decode()
    assert "could not be read as a table" in page and "no data rows" not in page
