"""The automation API: token authentication, JSON errors, and each route through the same
services as the pages (roles, team scoping, audit)."""

from __future__ import annotations

import hashlib
import io
import json
import re

import pytest
from django.core.management import call_command
from django.test import TestCase
from rest_framework.test import APIClient

from anonweb.accounts.models import ApiToken
from anonweb.audit.models import AuditEvent
from anonweb.datasets.models import Dataset
from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import Job, JobStatus
from tests.web.conftest import csv_upload, small_table

pytestmark = pytest.mark.django_db


def api(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Token {ApiToken.issue(user)[1]}")
    return client


def run_queued(kind=None) -> list[Job]:
    """Run the queued jobs as the worker would."""
    jobs = Job.objects.filter(status=JobStatus.QUEUED)
    if kind:
        jobs = jobs.filter(kind=kind)
    done = []
    for job in list(jobs):
        with TestCase.captureOnCommitCallbacks(execute=False):
            job_execute(job_id=job.pk, worker="test")
        job.refresh_from_db()
        done.append(job)
    return done


def upload(client, name="patients", df=None, filename="patients.csv", **extra):
    return client.post(
        "/api/v1/datasets/",
        {"file": csv_upload(df, name=filename), "name": name, **extra},
        format="multipart",
    )


# ---- authentication -------------------------------------------------------------------------


def test_anonymous_is_401_json_everywhere_even_on_unknown_routes(dataset):
    for url in ("/api/v1/datasets/", f"/api/v1/datasets/{dataset.pk}/", "/api/v1/nope/"):
        response = APIClient().get(url)
        assert response.status_code == 401, url
        assert response["Content-Type"] == "application/json"
        assert set(response.json()) == {"error"}
        assert response["WWW-Authenticate"].startswith("Token")


def test_a_wrong_token_is_401():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token " + "0" * 40)
    response = client.get("/api/v1/datasets/")
    assert response.status_code == 401
    assert "error" in response.json()


def test_drf_create_token_prints_a_working_key_once_and_stores_its_hash(officer, dataset):
    out = io.StringIO()
    call_command("drf_create_token", officer.username, stdout=out)
    key = re.search(r"Generated token (\w+) for user", out.getvalue()).group(1)
    assert ApiToken.objects.get(user=officer).digest == hashlib.sha256(key.encode()).hexdigest()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert [d["name"] for d in client.get("/api/v1/datasets/").json()] == ["patients"]


def test_the_browser_session_works_too(client, officer, dataset):
    client.force_login(officer)
    response = client.get(f"/api/v1/datasets/{dataset.pk}/")
    assert response.status_code == 200
    assert response.json()["name"] == "patients"


def test_session_writes_need_the_csrf_token(officer, dataset):
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(officer)
    response = browser.patch(
        f"/api/v1/datasets/{dataset.pk}/",
        data=json.dumps({"roles": {"age": "other"}}),
        content_type="application/json",
    )
    assert response.status_code == 403
    assert "CSRF" in response.json()["error"]


def test_profile_page_creates_and_revokes_the_token(client, officer, dataset):
    client.force_login(officer)
    page = client.get("/accounts/profile/")
    assert page.status_code == 200
    assert b"no API token" in page.content
    created = client.post("/accounts/profile/", {"action": "create"})
    key = created.context["new_key"]
    assert ApiToken.objects.get(user=officer).digest == hashlib.sha256(key.encode()).hexdigest()
    assert key.encode() in created.content
    assert api_with(key).get("/api/v1/datasets/").status_code == 200
    # Replacing it stops the old key at once.
    replaced = client.post("/accounts/profile/", {"action": "create"}).context["new_key"]
    assert replaced != key
    assert api_with(key).get("/api/v1/datasets/").status_code == 401
    client.post("/accounts/profile/", {"action": "revoke"})
    assert not ApiToken.objects.filter(user=officer).exists()
    assert api_with(replaced).get("/api/v1/datasets/").status_code == 401
    actions = list(
        AuditEvent.objects.filter(action__startswith="account.").values_list("action", flat=True)
    )
    assert sorted(actions) == [
        "account.token_created",
        "account.token_created",
        "account.token_revoked",
    ]
    assert not any(key in e.details_text for e in AuditEvent.objects.all())


def api_with(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


# ---- datasets -------------------------------------------------------------------------------


def test_upload_returns_202_and_a_job_reads_the_file(officer, team):
    client = api(officer)
    response = upload(client)
    assert response.status_code == 202
    body = response.json()
    assert set(body) == {"id", "job"}
    detail = client.get(f"/api/v1/datasets/{body['id']}/").json()
    assert detail["status"] == "parsing"
    assert detail["columns"] == []
    # Nothing runs on a table still being read: 409, the dataset is not in that state yet.
    response = client.post(f"/api/v1/datasets/{body['id']}/assessments/")
    assert response.status_code == 409
    assert "still being read" in response.json()["error"]
    job = client.get(f"/api/v1/jobs/{body['job']}/").json()
    assert job["kind"] == "parse" and job["status"] == "queued"
    run_queued()
    job = client.get(f"/api/v1/jobs/{body['job']}/").json()
    assert job["status"] == "succeeded" and job["progress"] == 100
    detail = client.get(f"/api/v1/datasets/{body['id']}/").json()
    assert detail["status"] == "ready"
    assert detail["rows"] == 6
    assert detail["error"] == ""
    assert detail["columns"] == [
        {"name": "name", "type": "text", "role": "identifier"},
        {"name": "zip", "type": "integer", "role": "untagged"},
        {"name": "age", "type": "integer", "role": "untagged"},
        {"name": "sex", "type": "text", "role": "untagged"},
        {"name": "disease", "type": "text", "role": "untagged"},
    ]


def test_a_malformed_upload_fails_with_the_reason(officer, team):
    client = api(officer)
    bad = io.BytesIO(b"a,b\n1,2\n3,4,5,6\n")
    bad.name = "bad.csv"
    body = client.post("/api/v1/datasets/", {"file": bad, "name": "bad"}, format="multipart").json()
    run_queued()
    detail = client.get(f"/api/v1/datasets/{body['id']}/").json()
    assert detail["status"] == "failed"
    assert "row 3" in detail["error"]
    assert client.get(f"/api/v1/jobs/{body['job']}/").json()["status"] == "failed"


def test_upload_errors_are_json_with_their_status(officer, steward, team, settings):
    client = api(officer)
    odd = io.BytesIO(b"hello")
    odd.name = "notes.docx"
    response = client.post("/api/v1/datasets/", {"file": odd, "name": "x"}, format="multipart")
    assert response.status_code == 415
    assert "unsupported file type" in response.json()["error"]
    response = client.post("/api/v1/datasets/", {"name": "x"}, format="json")
    assert response.status_code == 415
    response = client.post("/api/v1/datasets/", {"name": "x"}, format="multipart")
    assert response.status_code == 400
    assert any(e.startswith("file:") for e in response.json()["errors"])
    settings.ANONWEB_MAX_UPLOAD_BYTES = 10
    response = upload(client, name="big")
    assert response.status_code == 413
    assert "over the limit" in response.json()["error"]
    assert not Dataset.objects.exists()
    assert api(steward).post("/api/v1/datasets/", {}, format="multipart").status_code == 403


def test_a_declared_size_over_the_limit_is_refused_before_the_body_is_read(officer, settings):
    settings.ANONWEB_MAX_UPLOAD_BYTES = 1000
    response = api(officer).generic(
        "POST",
        "/api/v1/datasets/",
        data=b"x" * 10,
        content_type="multipart/form-data; boundary=zzz",
        CONTENT_LENGTH=str(5 * 1024 * 1024),
    )
    assert response.status_code == 413
    assert response.json() == {
        "error": "the upload is 5.0 MB, over the limit of 1,000 bytes (ANONWEB_MAX_UPLOAD_BYTES)"
    }


def test_upload_needs_a_team_when_the_officer_has_several(officer, team, other_team):
    from anonweb.accounts.models import Membership, Role

    Membership.objects.create(user=officer, team=other_team, role=Role.PRIVACY_OFFICER)
    client = api(officer)
    response = upload(client)
    assert response.status_code == 400
    assert "team" in response.json()["errors"][0]
    response = upload(client, team=other_team.slug)
    assert response.status_code == 202
    assert Dataset.objects.get(pk=response.json()["id"]).team == other_team


def test_patch_roles_tags_columns(officer, steward, dataset):
    client = api(officer)
    url = f"/api/v1/datasets/{dataset.pk}/"
    response = client.patch(url, {"roles": {"zip": "other", "age": "sensitive"}}, format="json")
    assert response.status_code == 200
    roles = {c["name"]: c["role"] for c in response.json()["columns"]}
    assert roles["zip"] == "other" and roles["age"] == "sensitive"
    assert roles["sex"] == "quasi_identifier"
    assert AuditEvent.objects.filter(action="dataset.tagged").count() == 2
    response = client.patch(url, {"roles": {"zip": "secret"}}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0].startswith("roles.zip:")
    response = client.patch(url, {"roles": {"nope": "other"}}, format="json")
    assert response.status_code == 400
    (message,) = response.json()["errors"]
    assert "nope" in message
    response = api(steward).patch(url, {"roles": {"zip": "other"}}, format="json")
    assert response.status_code == 403
    assert "privacy officer" in response.json()["error"]


def test_untagged_is_its_own_role_and_survives_a_round_trip(officer, dataset):
    """A column never tagged reads "untagged", not "other"; sending the roles back as read
    leaves it untagged, so the release gate still blocks it."""
    from anonweb.core.release.policy import evaluate_plan

    client = api(officer)
    url = f"/api/v1/datasets/{dataset.pk}/"
    response = client.patch(url, {"roles": {"disease": "untagged"}}, format="json")
    assert response.status_code == 200
    roles = {c["name"]: c["role"] for c in response.json()["columns"]}
    assert roles["disease"] == "untagged"
    assert roles["zip"] == "quasi_identifier"
    assert AuditEvent.objects.filter(action="dataset.tagged").order_by("seq").last().details == {
        "changed": {"disease": ""}
    }

    read = client.get(url).json()
    response = client.patch(
        url, {"roles": {c["name"]: c["role"] for c in read["columns"]}}, format="json"
    )
    assert response.status_code == 200
    assert {c["name"]: c["role"] for c in response.json()["columns"]} == roles
    dataset.refresh_from_db()
    assert "disease" not in dataset.tags
    plan = {
        "version": 1,
        "quasi_identifiers": ["zip"],
        "steps": [{"kind": "drop", "params": {"columns": ["name"]}}],
    }
    gate = evaluate_plan(plan, tags=dataset.tags, columns=dataset.column_names, rows=dataset.rows)
    assert [(f.code, f.columns) for f in gate.findings] == [("column_untagged", ("disease",))]

    # "other" is a decision, and the gate lets the column through
    response = client.patch(url, {"roles": {"disease": "other"}}, format="json")
    assert {c["name"]: c["role"] for c in response.json()["columns"]}["disease"] == "other"


def test_put_hierarchy_names_uncovered_values(officer, dataset):
    client = api(officer)
    url = f"/api/v1/datasets/{dataset.pk}/hierarchies/sex/"
    response = client.put(url, {"rows": [["F", "*"]]}, format="json")
    assert response.status_code == 400
    (message,) = response.json()["errors"]
    assert "does not cover 1 value(s): 'M'" in message
    response = client.put(url, {"rows": [["F", "*"], ["M", "*"]]}, format="json")
    assert response.status_code == 200
    assert response.json()["levels"] == 2
    response = client.put(
        f"/api/v1/datasets/{dataset.pk}/hierarchies/age/",
        {"builder": "interval", "width": 10},
        format="json",
    )
    assert response.status_code == 200
    hierarchies = client.get(f"/api/v1/datasets/{dataset.pk}/").json()["hierarchies"]
    assert hierarchies["age"]["kind"] == "interval"
    assert hierarchies["sex"]["kind"] == "uploaded"
    response = client.put(
        f"/api/v1/datasets/{dataset.pk}/hierarchies/age/", {"builder": "teleport"}, format="json"
    )
    assert response.status_code == 400
    assert "teleport" in response.json()["errors"][0]
    response = client.put(f"/api/v1/datasets/{dataset.pk}/hierarchies/age/", [1, 2], format="json")
    assert response.status_code == 400


def test_assessment_and_risk_is_the_assess_command_json(officer, dataset, tmp_path):
    client = api(officer)
    assert client.get(f"/api/v1/datasets/{dataset.pk}/risk/").status_code == 404
    response = client.post(f"/api/v1/datasets/{dataset.pk}/assessments/")
    assert response.status_code == 202
    job_id = response.json()["job"]
    run_queued()
    assert client.get(f"/api/v1/jobs/{job_id}/").json()["status"] == "succeeded"
    risk = client.get(f"/api/v1/datasets/{dataset.pk}/risk/").json()
    path = tmp_path / "patients.csv"
    small_table().to_csv(path, index=False)
    out = io.StringIO()
    call_command(
        "assess",
        str(path),
        qi="zip,age,sex",
        sensitive="disease",
        format="json",
        stdout=out,
    )
    expected = json.loads(out.getvalue())
    # the process's peak memory is the command's own figure, not the profile's
    assert set(risk) == set(expected) - {"peak_memory_bytes"}
    for key in set(expected) - {"peak_memory_bytes"}:
        if key != "file":
            assert risk[key] == expected[key], key
    assert risk["k"] == 1


def test_jobs_cancel(officer, steward, dataset):
    client = api(officer)
    job_id = client.post(f"/api/v1/datasets/{dataset.pk}/assessments/").json()["job"]
    assert api(steward).post(f"/api/v1/jobs/{job_id}/cancel/").status_code == 403
    response = client.post(f"/api/v1/jobs/{job_id}/cancel/")
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"
    assert response.json()["release"] is None
    assert api(steward).get(f"/api/v1/jobs/{job_id}/").json()["status"] == "cancelled"


def test_other_teams_objects_are_404(outsider, dataset):
    client = api(outsider)
    for url in (
        f"/api/v1/datasets/{dataset.pk}/",
        f"/api/v1/datasets/{dataset.pk}/risk/",
        f"/api/v1/datasets/{dataset.pk}/budget/",
    ):
        response = client.get(url)
        assert response.status_code == 404, url
        assert set(response.json()) == {"error"}
    assert client.get("/api/v1/datasets/").json() == []
    assert client.get("/api/v1/datasets/abc/").status_code == 404


# ---- schema and docs ------------------------------------------------------------------------


def test_schema_is_valid_openapi(officer):
    from openapi_spec_validator import validate

    response = api(officer).get("/api/schema/?format=json")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("application/vnd.oai.openapi+json")
    schema = json.loads(response.content)
    validate(schema)
    assert schema["openapi"].startswith("3.")
    assert "/api/v1/datasets/{dataset_id}/hierarchies/{column}/" in schema["paths"]
    assert APIClient().get("/api/schema/").status_code == 401


def test_docs_page_uses_only_the_apps_static_files(client, officer):
    import re

    client.force_login(officer)
    page = client.get("/api/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    assert "swagger-ui" in html
    sources = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert sources
    for src in sources:
        assert src.startswith("/static/") or src.startswith("/api/"), src
        if src.startswith("/static/"):
            asset = client.get(src)
            assert asset.status_code == 200, src
            b"".join(asset.streaming_content) if asset.streaming else asset.content
    assert "cdn" not in html.lower()
