"""Hostile requests to the API and the pages' JSON endpoints get a clear 4xx in JSON, never a
500 or an HTML page: nesting past the depth limit, bodies over ANONWEB_MAX_FORM_BYTES, unsafe
methods on unknown routes, and 400s in the shape the schema documents."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from tests.web.test_api import api

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
