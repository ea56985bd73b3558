"""A DP synthetic release made by MST, through the job: its charge, its quality chart (the
source-side comparison for staff, the DP part for analysts) and the gate's baseline check."""

import json
import re

import numpy as np
import pandas as pd
import pytest
from django.urls import reverse

from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import JobStatus
from anonweb.jobs.services import anonymize_launch
from anonweb.releases.budget import budget_set
from tests.web.conftest import csv_upload

pytestmark = pytest.mark.django_db

PARAMS = {
    "columns": ["age", "sex", "disease"],
    "epsilon": 1.0,
    "delta": 1e-9,
    "categories": {"sex": ["F", "M"], "disease": ["flu", "cancer"]},
    "bounds": {"age": [0, 100]},
    "bins": 10,
}


def _people(n: int = 3000) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    age = rng.integers(18, 90, n)
    sex = rng.choice(["F", "M"], n)
    return pd.DataFrame(
        {
            "age": age,
            "sex": sex,
            "disease": np.where((age > 60) & (sex == "M"), "cancer", "flu"),
        }
    )


def _figures(page: str) -> dict:
    return {
        m.group(1): json.loads(m.group(2))
        for m in re.finditer(
            r'<script id="(chart-dp-step-\d+)-data" type="application/json">(.*?)</script>',
            page,
            re.S,
        )
    }


def test_an_mst_release_is_charged_charted_and_gated(client, officer, steward, team):
    from anonweb.datasets.services import dataset_create, dataset_set_tags
    from anonweb.releases.services import release_approve
    from tests.web.factories import Role, member

    dataset = dataset_create(user=officer, team=team, upload=csv_upload(_people()), name="p")
    dataset = dataset_set_tags(
        user=officer,
        dataset=dataset,
        tags={"age": "quasi_identifier", "sex": "quasi_identifier", "disease": "sensitive"},
    )
    budget_set(user=steward, dataset=dataset, epsilon=2.0, delta=1e-6)
    plan = {"version": 1, "steps": [{"kind": "dp_synthetic", "params": PARAMS}]}
    job = anonymize_launch(
        user=officer, dataset=dataset, plan=plan, title="mst", purpose="t", recipient="t"
    )
    job_execute(job_id=job.pk, worker="t")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    release = job.release
    (step,) = release.report["steps"]
    assert step["method"] == "mst" and 0.999 < step["epsilon_spent"] <= 1.0
    assert step["quality_vs_source"]["beats_baseline"] is True
    codes = [f["code"] for f in release.gate["findings"]]
    assert "synthetic_below_baseline" not in codes and "dp_exact_figures" not in codes
    assert "quality_vs_source" not in release.published_report["steps"][0]

    client.force_login(steward)
    staff = _figures(client.get(reverse("releases:detail", args=[release.pk])).content.decode())
    names = [t["name"] for t in staff["chart-dp-step-1"]["data"]]
    assert names == ["synthetic", "independent baseline"]

    release_approve(user=steward, release=release, note="ok")
    client.force_login(member(dataset.team, Role.ANALYST))
    page = client.get(reverse("releases:detail", args=[release.pk])).content.decode()
    (bars,) = _figures(page)["chart-dp-step-1"]["data"]
    assert bars["name"] == "to the noisy measurement" and len(bars["x"]) == 2
    assert "independent baseline" not in page
