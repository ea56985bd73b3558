"""The API's release routes: plans refused before anything runs, releases through review to
download, the budget and the audit trail, each through the pages' services."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest
from rest_framework.test import APIClient

from anonweb.accounts.models import ApiToken
from anonweb.audit.models import AuditEvent
from anonweb.jobs.models import Job, JobKind
from anonweb.releases.models import Release
from tests.web.api.test_api import run_queued

pytestmark = pytest.mark.django_db


def api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {ApiToken.issue(user)[1]}")
    return client


PLAN = {
    "version": 1,
    "quasi_identifiers": ["age", "sex"],
    "sensitive": ["disease"],
    "hierarchies": {
        "age": {"builder": "interval", "width": 10},
        "sex": {"rows": [["F", "*"], ["M", "*"]]},
    },
    "steps": [
        {"kind": "drop", "params": {"columns": ["name", "zip"]}},
        {"kind": "optimal_generalization", "params": {"k": 3, "suppression": 0.0}},
    ],
}


def launch(client, dataset, plan=PLAN, **extra):
    body = {"title": "k=3", "purpose": "statistics", "recipient": "research unit", "plan": plan}
    return client.post(f"/api/v1/datasets/{dataset.pk}/releases/", {**body, **extra}, format="json")


def released(officer, dataset) -> int:
    response = launch(api(officer), dataset)
    assert response.status_code == 202, response.content
    job_id = response.json()["job"]
    run_queued()
    job = api(officer).get(f"/api/v1/jobs/{job_id}/").json()
    assert job["status"] == "succeeded", job
    assert job["release"] is not None
    return job["release"]


def test_a_refused_plan_lists_every_problem_and_queues_nothing(officer, dataset):
    bad = {
        **PLAN,
        "steps": [
            {"kind": "drop", "params": {"columns": ["nope"]}},
            {"kind": "optimal_generalization", "params": {"k": 0}},
        ],
    }
    response = launch(api(officer), dataset, plan=bad)
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert len(errors) >= 2
    assert any("nope" in e for e in errors)
    assert any("k" in e for e in errors)
    assert not Job.objects.filter(kind=JobKind.ANONYMIZE).exists()
    response = launch(api(officer), dataset, plan=["not", "a", "plan"])
    assert response.status_code == 400
    response = api(officer).post(
        f"/api/v1/datasets/{dataset.pk}/releases/", {"plan": PLAN}, format="json"
    )
    assert response.status_code == 400
    assert any(e.startswith("title:") for e in response.json()["errors"])


def test_release_review_and_download(officer, steward, analyst, dataset):
    release_id = released(officer, dataset)
    detail = api(officer).get(f"/api/v1/releases/{release_id}/").json()
    assert detail["status"] == "awaiting_review"
    assert detail["dataset"] == dataset.pk
    assert detail["version"] == 1
    assert isinstance(detail["findings"], list)
    assert isinstance(detail["conflicts"], list)
    assert detail["report"]
    listed = api(steward).get(f"/api/v1/releases/?dataset={dataset.pk}&status=awaiting_review")
    assert [r["id"] for r in listed.json()] == [release_id]
    assert api(steward).get("/api/v1/releases/?status=approved").json() == []
    assert api(steward).get("/api/v1/releases/?status=bogus").status_code == 400
    # Analysts see approved releases only.
    assert api(analyst).get(f"/api/v1/releases/{release_id}/").status_code == 404
    assert api(analyst).get("/api/v1/releases/").json() == []

    review = f"/api/v1/releases/{release_id}/review/"
    response = api(officer).post(review, {"decision": "approve"}, format="json")
    assert response.status_code == 403
    response = api(analyst).post(review, {"decision": "approve"}, format="json")
    assert response.status_code == 404  # an analyst cannot see a release awaiting review
    stored = Release.objects.get(pk=release_id)
    assert detail["findings"] == stored.findings
    assert detail["purpose"] == "statistics" and detail["recipient"] == "research unit"
    response = api(steward).post(review, {"decision": "maybe"}, format="json")
    assert response.status_code == 400
    response = api(steward).post(review, {"decision": "approve", "note": "ok"}, format="json")
    assert response.status_code == 409  # the release gate's blocking findings stand
    assert response.json()["findings"]
    override = "Reviewed: the recipient holds the data under contract."
    response = api(steward).post(
        review, {"decision": "approve", "note": "ok", "override": override}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["status"] == "approved"
    response = api(steward).post(review, {"decision": "reject"}, format="json")
    assert response.status_code == 409
    assert "already" in response.json()["error"]
    assert AuditEvent.objects.filter(action="release.approved").count() == 1

    # Analysts read the published report, without the gate's findings or the recipient.
    seen = api(analyst).get(f"/api/v1/releases/{release_id}/").json()
    assert seen["report"] == stored.published_report
    assert seen["report"] != detail["report"]
    assert seen["findings"] == [] and seen["conflicts"] == []
    assert seen["recipient"] is None and seen["purpose"] == "statistics"

    client = api(analyst)
    url = f"/api/v1/releases/{release_id}/download/"
    csv = client.get(url)
    assert csv.status_code == 200
    assert csv["Content-Type"] == "text/csv"
    frame = pd.read_csv(io.BytesIO(b"".join(csv.streaming_content)))
    assert len(frame) == 6
    assert set(frame.columns) == {"age", "sex", "disease"}
    parquet = client.get(url + "?format=parquet")
    assert parquet.status_code == 200
    assert pd.read_parquet(io.BytesIO(b"".join(parquet.streaming_content))).shape == (6, 3)
    xlsx = client.get(url + "?format=xlsx")
    assert xlsx.status_code == 200
    assert pd.read_excel(io.BytesIO(xlsx.content)).shape == (6, 3)
    assert client.get(url + "?format=pdf").status_code == 400
    assert AuditEvent.objects.filter(action="release.downloaded").count() == 3


def test_xlsx_download_neutralises_formulas(officer, steward, team, dataset):
    from anonweb.jobs.models import JobStatus
    from anonweb.jobs.publication import release_create
    from anonweb.releases.services import release_approve

    job = Job.objects.create(
        team=team,
        dataset=dataset,
        kind=JobKind.ANONYMIZE,
        status=JobStatus.RUNNING,
        created_by=officer,
    )
    frame = pd.DataFrame({"note": ['=HYPERLINK("http://x")', "fine"], "n": [1, 2]})
    release = release_create(job=job, frame=frame, plan={}, report={}, title="r")
    release_approve(user=steward, release=release)
    response = api(officer).get(f"/api/v1/releases/{release.pk}/download/?format=xlsx")
    cells = pd.read_excel(io.BytesIO(response.content))
    assert cells["note"].tolist() == ['\'=HYPERLINK("http://x")', "fine"]
    assert cells["n"].tolist() == [1, 2]


def test_rejected_releases_cannot_be_downloaded(officer, steward, dataset):
    release_id = released(officer, dataset)
    api(steward).post(
        f"/api/v1/releases/{release_id}/review/", {"decision": "reject"}, format="json"
    )
    response = api(officer).get(f"/api/v1/releases/{release_id}/download/")
    assert response.status_code == 403
    assert Release.objects.get(pk=release_id).status == "rejected"


def test_budget_get_and_put(officer, steward, dataset):
    url = f"/api/v1/datasets/{dataset.pk}/budget/"
    ledger = api(officer).get(url).json()
    assert ledger["epsilon"] is None
    assert ledger["spent"]["epsilon"] == 0
    response = api(officer).put(url, {"epsilon": 2.0, "delta": 1e-6}, format="json")
    assert response.status_code == 403
    response = api(steward).put(url, {"epsilon": 2.0, "delta": 1e-6}, format="json")
    assert response.status_code == 200
    assert response.json()["epsilon"] == 2.0
    assert response.json()["delta"] == 1e-6
    assert api(officer).get(url).json()["remaining"]["epsilon"] == 2.0
    response = api(steward).put(url, {"epsilon": -1}, format="json")
    assert response.status_code == 400
    (message,) = response.json()["errors"]
    assert "ε" in message
    response = api(steward).put(url, {"epsilon": "lots"}, format="json")
    assert response.status_code == 400


def test_audit_lists_the_events_of_a_dataset(officer, analyst, outsider, dataset):
    client = api(officer)
    client.post(f"/api/v1/datasets/{dataset.pk}/assessments/")
    events = client.get(f"/api/v1/audit/?dataset={dataset.pk}").json()
    actions = [e["action"] for e in events]
    assert "dataset.uploaded" in actions
    assert "dataset.tagged" in actions
    assert "job.created" in actions  # about the dataset through its details
    assert all(set(e) >= {"id", "at", "actor", "action", "target", "details"} for e in events)
    assert api(outsider).get(f"/api/v1/audit/?dataset={dataset.pk}").json() == []
    # an analyst sees nothing about raw datasets: only events of releases they can download
    assert api(analyst).get("/api/v1/audit/?limit=2").json() == []
    assert api(officer).get("/api/v1/audit/?dataset=x").status_code == 400
    assert json.dumps(events)  # plain JSON
