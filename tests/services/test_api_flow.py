"""The whole workflow over the API on a real worker (Redis broker, PostgreSQL in CI), with three
tokens: the officer uploads, tags, sets a hierarchy, assesses and releases at k=5; the steward
approves; the analyst downloads, and the file is checked to be 5-anonymous (by pandas and by
pycanon, an independent implementation)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from rest_framework.test import APIClient

from anonweb.accounts.models import ApiToken, Role
from anonweb.audit.models import AuditEvent
from tests.services.conftest import wait_for
from tests.web.factories import TeamFactory, member

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.services]

QIS = ["age", "sex", "zip"]


def token_client(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {ApiToken.issue(user)[1]}")
    return client


def table(n: int = 400, seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "name": [f"Person {i}" for i in range(n)],
            "age": rng.integers(18, 90, n),
            "sex": rng.choice(["F", "M"], n),
            "zip": rng.choice(["47677", "47602", "47678", "47905", "47909", "47906"], n),
            "disease": rng.choice(["flu", "cancer", "gastritis", "asthma"], n),
        }
    )


def finished_job(client, job_id: int, timeout: float = 120) -> dict:
    def done():
        body = client.get(f"/api/v1/jobs/{job_id}/").json()
        return body if body["status"] in ("succeeded", "failed", "cancelled") else None

    body = wait_for(done, timeout=timeout, interval=0.3)
    assert body["status"] == "succeeded", body
    return body


def test_the_whole_flow_with_three_tokens(broker, start_worker, redis_url, settings):
    from pycanon import anonymity

    team = TeamFactory(name="Registry", slug="registry")
    officer = token_client(member(team, Role.PRIVACY_OFFICER, username="flow-officer"))
    steward = token_client(member(team, Role.DATA_STEWARD, username="flow-steward"))
    analyst = token_client(member(team, Role.ANALYST, username="flow-analyst"))
    start_worker(broker(redis_url, {"socket_connect_timeout": 3}))

    source = table()
    upload = io.BytesIO(source.to_csv(index=False).encode())
    upload.name = "registry.csv"
    response = officer.post(
        "/api/v1/datasets/", {"file": upload, "name": "registry"}, format="multipart"
    )
    assert response.status_code == 202, response.content
    dataset_id, parse_job = response.json()["id"], response.json()["job"]
    finished_job(officer, parse_job)
    dataset = officer.get(f"/api/v1/datasets/{dataset_id}/").json()
    assert dataset["status"] == "ready" and dataset["rows"] == len(source)

    roles = {"name": "identifier", "disease": "sensitive", **dict.fromkeys(QIS, "quasi_identifier")}
    response = officer.patch(f"/api/v1/datasets/{dataset_id}/", {"roles": roles}, format="json")
    assert response.status_code == 200
    assert {c["name"]: c["role"] for c in response.json()["columns"]} == roles
    response = officer.put(
        f"/api/v1/datasets/{dataset_id}/hierarchies/age/",
        {"builder": "interval", "width": 5},
        format="json",
    )
    assert response.status_code == 200, response.content
    age_hierarchy = response.json()["sha256"]

    response = officer.post(f"/api/v1/datasets/{dataset_id}/assessments/")
    assert response.status_code == 202
    finished_job(officer, response.json()["job"])
    risk = officer.get(f"/api/v1/datasets/{dataset_id}/risk/").json()
    assert risk["k"] == anonymity.k_anonymity(source, QIS)

    plan = {
        "version": 1,
        "quasi_identifiers": QIS,
        "sensitive": ["disease"],
        "hierarchies": {
            "age": {"uploaded": age_hierarchy},
            "sex": {"rows": [["F", "*"], ["M", "*"]]},
            "zip": {"builder": "mask"},
        },
        "steps": [
            {"kind": "drop", "params": {"columns": ["name"]}},
            {"kind": "optimal_generalization", "params": {"k": 5, "suppression": 0.0}},
        ],
    }
    response = officer.post(
        f"/api/v1/datasets/{dataset_id}/releases/",
        {"title": "k=5", "purpose": "registry statistics", "recipient": "analysts", "plan": plan},
        format="json",
    )
    assert response.status_code == 202, response.content
    release_id = finished_job(officer, response.json()["job"])["release"]
    assert release_id is not None

    assert analyst.get(f"/api/v1/releases/{release_id}/").status_code == 404
    release = steward.get(f"/api/v1/releases/{release_id}/").json()
    assert release["status"] == "awaiting_review"
    assert release["findings"] == []  # the release gate finds nothing to block or warn about
    response = steward.post(
        f"/api/v1/releases/{release_id}/review/",
        {"decision": "approve", "note": "k=5 with no suppression"},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["status"] == "approved"

    response = analyst.get(f"/api/v1/releases/{release_id}/download/?format=csv")
    assert response.status_code == 200
    published = pd.read_csv(io.BytesIO(b"".join(response.streaming_content)), dtype=str)
    assert len(published) == len(source)
    assert "name" not in published.columns
    assert published.groupby(QIS).size().min() >= 5
    assert anonymity.k_anonymity(published, QIS) >= 5

    actions = set(AuditEvent.objects.filter(team_id=team.pk).values_list("action", flat=True))
    assert {
        "dataset.uploaded",
        "dataset.parsed",
        "dataset.tagged",
        "dataset.hierarchy_set",
        "release.created",
        "release.approved",
        "release.downloaded",
    } <= actions
