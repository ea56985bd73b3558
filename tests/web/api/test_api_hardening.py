"""Hostile requests to the API and the pages' JSON endpoints get a clear 4xx in JSON, never a
500 or an HTML page: nesting past the depth limit, bodies over ANONWEB_MAX_FORM_BYTES, unsafe
methods on unknown routes, and 400s in the shape the schema documents."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from tests.web.api.test_api import api

pytestmark = pytest.mark.django_db

DEEP = "[" * 1000 + "]" * 1000


def post_json(client, url: str, body: str, method: str = "POST"):
    return client.generic(method, url, body, content_type="application/json")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "what-if/"),
        ("POST", "releases/"),
        ("PATCH", ""),
        ("PUT", "hierarchies/age/"),
        ("PUT", "budget/"),
    ],
)
def test_json_nested_past_the_limit_is_a_400_naming_the_limit(officer, dataset, method, path):
    response = post_json(api(officer), f"/api/v1/datasets/{dataset.pk}/{path}", DEEP, method)
    assert response.status_code == 400, response.content
    assert response.json() == {"errors": ["the request body is nested more than 64 levels deep"]}


def test_json_nested_within_the_limit_is_read(officer, dataset):
    body = {"levels": {}, "padding": [[[[[[[[[[1]]]]]]]]]]}
    response = post_json(api(officer), f"/api/v1/datasets/{dataset.pk}/what-if/", json.dumps(body))
    assert response.json() == {"errors": ["unknown field(s): padding"]}


def test_a_json_body_over_the_form_limit_is_413_json(officer, dataset, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    body = json.dumps({"levels": {}, "note": "x" * 20_000})
    response = post_json(api(officer), f"/api/v1/datasets/{dataset.pk}/what-if/", body)
    assert response.status_code == 413
    assert "10,000 bytes" in response.json()["error"]
    assert "ANONWEB_MAX_FORM_BYTES" in response.json()["error"]


def test_every_400_lists_its_problems_as_the_schema_says(officer, dataset):
    """A body that is not JSON, a bad builder and a service's own refusal are all 400s with
    ``{"errors": [...]}`` (the schema's ErrorsOut), not ``{"error": ...}``."""
    client = api(officer)
    answers = [
        post_json(client, f"/api/v1/datasets/{dataset.pk}/what-if/", "{not json"),
        post_json(
            client,
            f"/api/v1/datasets/{dataset.pk}/hierarchies/age/",
            json.dumps({"builder": "interval", "width": 1e-9}),
            "PUT",
        ),
        client.get("/api/v1/jobs/?limit=ten"),
    ]
    for response in answers:
        assert response.status_code == 400, response.content
        body = response.json()
        assert set(body) == {"errors"}, body
        assert body["errors"] and all(isinstance(e, str) and e for e in body["errors"])


def test_a_tiny_interval_width_is_refused_before_anything_is_built(officer, dataset):
    response = post_json(
        api(officer),
        f"/api/v1/datasets/{dataset.pk}/hierarchies/age/",
        json.dumps({"builder": "interval", "width": 1e-9}),
        "PUT",
    )
    assert response.status_code == 400
    (message,) = response.json()["errors"]
    assert "at most 1,000,000 are allowed" in message and "width of at least" in message


@pytest.mark.parametrize("method", ["POST", "PUT", "PATCH", "DELETE"])
def test_unsafe_methods_on_unknown_routes_answer_json_not_the_csrf_page(officer, method, client):
    """A session (as from the browser or Swagger UI) without a CSRF token, posting to a route
    with its trailing slash missing: the answer is the API's JSON 404."""
    client.force_login(officer)
    csrf_client = client.__class__(enforce_csrf_checks=True)
    csrf_client.force_login(officer)
    response = csrf_client.generic(
        method, "/api/v1/datasets", "{}", content_type="application/json"
    )
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json"
    assert response.json() == {"error": "no such API route: /api/v1/datasets"}


def test_anonymous_unsafe_methods_on_unknown_routes_are_401_json():
    response = APIClient(enforce_csrf_checks=True).post("/api/v1/nope", {}, format="json")
    assert response.status_code == 401
    assert response.json() == {"error": "authentication required"}


# ---- the pages' JSON endpoints --------------------------------------------------------------


def test_the_plan_check_refuses_deep_nesting_with_a_sentence(client, officer, dataset):
    client.force_login(officer)
    url = reverse("jobs:plan_check", args=[dataset.pk])
    response = client.post(url, '{"steps": ' + DEEP + "}", content_type="application/json")
    assert response.status_code == 200
    assert response.json()["errors"] == ["the plan is nested more than 64 levels deep"]


def test_the_hierarchy_preview_refuses_deep_nesting(client, officer, dataset):
    client.force_login(officer)
    url = reverse("datasets:hierarchy-preview", args=[dataset.pk, "age"])
    response = client.post(url, DEEP, content_type="application/json")
    assert response.status_code == 400
    assert response.json() == {"errors": ["the request body is nested more than 64 levels deep"]}


def test_the_what_if_page_endpoint_refuses_deep_nesting(client, officer, dataset):
    client.force_login(officer)
    url = reverse("datasets:whatif", args=[dataset.pk])
    response = client.post(url, DEEP, content_type="application/json")
    assert response.status_code == 400
    assert "nested more than 64 levels" in response.json()["error"]


# ---- downloads ------------------------------------------------------------------------------


def test_xlsx_download_of_cells_a_workbook_cannot_hold(officer, steward, team, dataset):
    """A vertical tab or a form feed in a cell made openpyxl refuse the whole download (500):
    they become spaces, and the other control characters a workbook cannot hold are dropped."""
    import io

    import pandas as pd

    from anonweb.jobs.models import Job, JobKind, JobStatus
    from anonweb.jobs.publication import release_create
    from anonweb.releases.services import release_approve

    job = Job.objects.create(
        team=team,
        dataset=dataset,
        kind=JobKind.ANONYMIZE,
        status=JobStatus.RUNNING,
        created_by=officer,
    )
    frame = pd.DataFrame(
        {"note\x0c": ["a\x0bb", "c\x0cd", "bell\x07", "=1+1\x01", "tab\tkept"], "n": range(5)}
    )
    release = release_create(job=job, frame=frame, plan={}, report={}, title="r")
    release_approve(user=steward, release=release)
    response = api(officer).get(f"/api/v1/releases/{release.pk}/download/?format=xlsx")
    assert response.status_code == 200, response.content[:300]
    cells = pd.read_excel(io.BytesIO(response.content))
    assert list(cells.columns) == ["note ", "n"]
    assert cells["note "].tolist() == ["a b", "c d", "bell", "'=1+1", "tab\tkept"]


# ---- whole numbers: bounded in the schema and by the API ----------------------------------

HUGE = "99999999999999999999"  # past a 64-bit integer


@pytest.mark.parametrize(
    "path",
    [
        f"/api/v1/datasets/{HUGE}/",
        f"/api/v1/jobs/{HUGE}/",
        f"/api/v1/releases/{HUGE}/",
        f"/api/v1/releases/{HUGE}/download/",
    ],
)
def test_an_id_past_a_64_bit_integer_is_a_json_404(officer, path):
    response = api(officer).get(path)
    assert response.status_code == 404
    assert response.json() == {"error": f"no such API route: {path}"}


def test_the_largest_id_is_an_ordinary_404(officer):
    response = api(officer).get(f"/api/v1/datasets/{2**63 - 1}/")
    assert response.status_code == 404
    assert response.json()["error"] != f"no such API route: /api/v1/datasets/{2**63 - 1}/"


@pytest.mark.parametrize(
    ("query", "error"),
    [
        ("/api/v1/jobs/?limit=1001", "limit: at most 1,000, got 1001"),
        ("/api/v1/audit/?offset=1000000001", "offset: at most 1,000,000,000, got 1000000001"),
        (
            f"/api/v1/jobs/?dataset={HUGE}",
            f"dataset: at most 9,223,372,036,854,775,807, got {HUGE}",
        ),
        (
            f"/api/v1/releases/compare/?a={HUGE}&b=1",
            f"a: at most 9,223,372,036,854,775,807, got {HUGE}",
        ),
        ("/api/v1/jobs/?limit=１２", "limit: expected a whole number, got '１２'"),
    ],
)
def test_query_numbers_past_their_maximum_are_a_400(officer, query, error):
    response = api(officer).get(query)
    assert response.status_code == 400
    assert response.json() == {"errors": [error]}


def test_the_schema_states_every_maximum_it_enforces(officer):
    schema = api(officer).get("/api/schema/?format=json").json()
    unbounded = [
        (path, method, parameter["name"])
        for path, item in schema["paths"].items()
        for method, operation in item.items()
        if isinstance(operation, dict)
        for parameter in operation.get("parameters", [])
        if parameter["schema"].get("type") == "integer" and "maximum" not in parameter["schema"]
    ]
    assert unbounded == []
    jobs = {p["name"]: p["schema"] for p in schema["paths"]["/api/v1/jobs/"]["get"]["parameters"]}
    assert jobs["limit"]["maximum"] == 1000 and jobs["offset"]["maximum"] == 10**9
    assert jobs["dataset"] == {"type": "integer", "minimum": 0, "maximum": 2**63 - 1}
    (job_id,) = schema["paths"]["/api/v1/jobs/{job_id}/"]["get"]["parameters"]
    assert job_id["in"] == "path" and job_id["schema"]["maximum"] == 2**63 - 1


def test_a_plan_with_a_tiny_interval_width_fails_its_job_at_once_with_the_limit(officer, dataset):
    """1e-6 in a plan took the worker to 2.5 GB for 4 minutes; the builder now counts its
    intervals first and the job fails with the reason."""
    from tests.web.api.test_api import run_queued
    from tests.web.api.test_api_releases import PLAN

    plan = json.loads(json.dumps(PLAN))
    plan["hierarchies"]["age"] = {"builder": "interval", "width": 1e-6}
    body = {"title": "t", "purpose": "p", "recipient": "r", "plan": plan}
    response = api(officer).post(f"/api/v1/datasets/{dataset.pk}/releases/", body, format="json")
    assert response.status_code == 202
    (job,) = run_queued()
    assert job.status == "failed"
    assert job.error_detail.startswith(
        "interval hierarchy for 'age': a width of 1e-06 makes 30,000,001"
    )


@pytest.mark.parametrize(
    "path", ["/api/v1/audit/?action=%00", "/api/v1/jobs/?status=a%00b", "/api/v1/datasets/?x%00=1"]
)
def test_a_nul_in_the_query_string_is_a_400_json(officer, path):
    """PostgreSQL refuses a NUL inside a query parameter: it is refused before any view reads
    it, on either database, with the API's error shape."""
    response = api(officer).get(path)
    assert response.status_code == 400
    assert "NUL character" in response.json()["errors"][0]


def test_a_nul_in_a_page_query_string_is_a_400(client, officer):
    client.force_login(officer)
    response = client.get("/audit/?action=%00")
    assert response.status_code == 400 and b"NUL character" in response.content


def test_an_unknown_route_with_a_line_break_in_it_answers_json(officer):
    """The catch-all matches every character, line breaks included."""
    response = api(officer).put("/api/v1/datasets/10000000000000000000000000/hierarchies/%0A/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
