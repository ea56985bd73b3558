"""An AIM synthetic release asked for through the API: the plan's method and workload reach the
job, the ledger is charged, staff read the source-side quality and analysts only the DP part."""

from __future__ import annotations

import pytest

from anonweb.datasets.services import dataset_create, dataset_set_tags
from anonweb.releases.budget import budget_set
from anonweb.releases.models import Release
from tests.web.api.test_api import run_queued
from tests.web.api.test_api_releases import api, launch
from tests.web.conftest import csv_upload
from tests.web.factories import Role, member
from tests.web.releases.test_dp_synthetic_page import PARAMS, _people

pytestmark = pytest.mark.django_db

AIM = {**PARAMS, "method": "aim", "workload": 3}


def test_an_aim_release_through_the_api(officer, steward, team):
    dataset = dataset_create(user=officer, team=team, upload=csv_upload(_people()), name="p")
    dataset = dataset_set_tags(
        user=officer,
        dataset=dataset,
        tags={"age": "quasi_identifier", "sex": "quasi_identifier", "disease": "sensitive"},
    )
    budget_set(user=steward, dataset=dataset, epsilon=2.0, delta=1e-6)
    bad = {"version": 1, "steps": [{"kind": "dp_synthetic", "params": {**AIM, "workload": 5}}]}
    response = launch(api(officer), dataset, plan=bad)
    assert response.status_code == 400 and any("workload" in e for e in response.json()["errors"])

    plan = {"version": 1, "steps": [{"kind": "dp_synthetic", "params": AIM}]}
    response = launch(api(officer), dataset, plan=plan, title="aim")
    assert response.status_code == 202, response.content
    run_queued()
    job = api(officer).get(f"/api/v1/jobs/{response.json()['job']}/").json()
    assert job["status"] == "succeeded", job
    release_id = job["release"]

    staff = api(steward).get(f"/api/v1/releases/{release_id}/").json()
    (step,) = staff["report"]["steps"]
    assert step["method"] == "aim" and step["workload"] == 3
    assert len(step["measured_marginals"]) >= 1 and 0.999 < step["epsilon_spent"] <= 1.0
    quality = step["quality_vs_source"]
    assert quality["three_way_tvd"] is not None and quality["baseline_three_way_tvd"] is not None
    budget = api(steward).get(f"/api/v1/datasets/{dataset.pk}/budget/").json()
    assert budget["spent"]["epsilon"] == pytest.approx(step["epsilon_spent"], rel=1e-9)

    release = Release.objects.get(pk=release_id)
    review = f"/api/v1/releases/{release_id}/review/"
    body = {"decision": "approve", "note": "ok"}
    if any(f.get("blocking") for f in release.gate.get("findings", [])):
        body["override"] = "Reviewed: the synthetic table is released under contract."
    response = api(steward).post(review, body, format="json")
    assert response.status_code == 200, response.content

    analyst = member(team, Role.ANALYST)
    seen = api(analyst).get(f"/api/v1/releases/{release_id}/").json()
    (public,) = seen["report"]["steps"]
    assert public["method"] == "aim" and public["workload"] == 3
    assert public["measured_marginals"] == step["measured_marginals"]
    assert "quality_vs_source" not in public and "quality" in public
