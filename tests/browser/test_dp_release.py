"""A DP release in a real browser: each released statistic is drawn as a plotly chart with its
95% interval as error bars, under the site's Content-Security-Policy."""

import numpy as np
import pandas as pd
import pytest

from anonweb.accounts.models import Role
from tests.browser.conftest import login
from tests.web.conftest import csv_upload
from tests.web.factories import TeamFactory, member

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_dp_statistics_are_drawn_with_their_intervals(page, live_server, settings, tmp_path):
    from anonweb.datasets.services import dataset_create
    from anonweb.jobs.execution import job_execute
    from anonweb.jobs.models import JobStatus
    from anonweb.jobs.services import anonymize_launch
    from anonweb.releases.budget import budget_set

    settings.MEDIA_ROOT = tmp_path / "media"
    team = TeamFactory(name="DP team")
    officer = member(team, Role.PRIVACY_OFFICER, username="dp_officer")
    steward = member(team, Role.DATA_STEWARD, username="dp_steward")
    rng = np.random.default_rng(1)
    table = pd.DataFrame(
        {
            "age": rng.integers(18, 90, 400),
            "disease": rng.choice(["flu", "gastritis", "cancer"], 400),
        }
    )
    dataset = dataset_create(user=officer, team=team, upload=csv_upload(table), name="patients")
    budget_set(user=steward, dataset=dataset, epsilon=2.0)
    steps = [
        {
            "kind": "histogram",
            "epsilon": 1.0,
            "columns": ["disease"],
            "categories": {"disease": ["flu", "gastritis", "cancer"]},
        },
        {"kind": "range", "epsilon": 1.0, "columns": ["age"], "bounds": [0, 100], "bins": 10},
    ]
    plan = {"version": 1, "steps": [{"kind": "dp_release", "params": p} for p in steps]}
    job = anonymize_launch(
        user=officer, dataset=dataset, plan=plan, title="dp", purpose="study", recipient="lab"
    )
    job_execute(job_id=job.pk, worker="browser-test")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error

    problems = []
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    login(page, live_server, "dp_steward")
    page.goto(f"{live_server.url}/releases/{job.release.pk}/")
    for i in (1, 2):
        page.wait_for_selector(f"#chart-dp-step-{i} .main-svg", timeout=15000)
        # plotly draws one error bar per released value
        bars = page.locator(f"#chart-dp-step-{i} .errorbar")
        assert bars.count() == (4 if i == 1 else 10)  # three diseases and (missing); ten bins
    title = page.locator("#chart-dp-step-1 .gtitle").text_content()
    assert "95% interval" in title
    assert problems == [], problems
