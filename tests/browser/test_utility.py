"""The release page's utility section in a real browser: after a k-anonymity search, each column's
source distribution is drawn beside the released one with the loss per quasi-identifier; after a
DP release, each statistic is listed with its 95% interval. Analysts never get the section."""

import os
import re
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from anonweb.accounts.models import Role
from tests.browser.conftest import login
from tests.web.conftest import csv_upload
from tests.web.factories import TeamFactory, member

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
SHOTS = Path(os.environ.get("ANONWEB_SCREENSHOTS", "var/test/screenshots"))


def _table(n=400, seed=5):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(18, 90, n),
            "sex": rng.choice(["F", "M"], n),
            "disease": rng.choice(["flu", "gastritis", "cancer", "asthma"], n),
        }
    )


def _release(officer, dataset, plan):
    from anonweb.jobs.execution import job_execute
    from anonweb.jobs.models import JobStatus
    from anonweb.jobs.services import anonymize_launch

    job = anonymize_launch(
        user=officer, dataset=dataset, plan=plan, title="t", purpose="study", recipient="lab"
    )
    job_execute(job_id=job.pk, worker="browser-test")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    return job.release


def test_utility_charts_loss_and_dp_intervals(page, live_server, settings, tmp_path):
    from anonweb.datasets.services import dataset_create, dataset_set_tags
    from anonweb.releases.budget import budget_set

    settings.MEDIA_ROOT = tmp_path / "media"
    team = TeamFactory(name="Utility team")
    officer = member(team, Role.PRIVACY_OFFICER, username="u_officer")
    steward = member(team, Role.DATA_STEWARD, username="u_steward")
    member(team, Role.ANALYST, username="u_analyst")
    dataset = dataset_create(user=officer, team=team, upload=csv_upload(_table()), name="clinic")
    dataset = dataset_set_tags(
        user=officer,
        dataset=dataset,
        tags={"age": "quasi_identifier", "sex": "quasi_identifier", "disease": "sensitive"},
    )
    search = {
        "version": 1,
        "quasi_identifiers": ["age", "sex"],
        "sensitive": ["disease"],
        "hierarchies": {
            "age": {"builder": "interval", "width": 5, "fanout": 2},
            "sex": {"rows": [["F", "*"], ["M", "*"]]},
        },
        "steps": [{"kind": "optimal_generalization", "params": {"k": 5, "suppression": 0.05}}],
    }
    k_release = _release(officer, dataset, search)
    budget_set(user=steward, dataset=dataset, epsilon=2.0)
    dp_plan = {
        "version": 1,
        "steps": [
            {
                "kind": "dp_release",
                "params": {
                    "kind": "histogram",
                    "epsilon": 1.0,
                    "columns": ["disease"],
                    "categories": {"disease": ["flu", "gastritis", "cancer", "asthma"]},
                    "count_missing": False,
                },
            }
        ],
    }
    dp_release = _release(officer, dataset, dp_plan)

    problems = []
    page.on("pageerror", lambda exc: problems.append(str(exc)))
    login(page, live_server, "u_steward")
    page.goto(f"{live_server.url}/releases/{k_release.pk}/")
    section = page.locator('[data-testid="utility"]')
    section.scroll_into_view_if_needed()
    charts = page.locator('[data-testid="utility-chart"] .main-svg')
    charts.first.wait_for(timeout=15000)
    assert page.locator('[data-testid="utility-chart"]').count() == 3  # age, sex, disease
    # each chart draws the source (left) and the released table (right)
    first = page.locator('[data-testid="utility-chart"]').first
    assert first.locator(".subplot.xy, .subplot.x2y2").count() == 2
    assert "source" in first.text_content() and "released" in first.text_content()
    step = k_release.report["steps"][0]
    loss_age = page.locator('[data-testid="loss-age"]').text_content()
    assert float(loss_age) == pytest.approx(step["loss_per_qi"]["age"], abs=5e-5)
    aggregate = page.locator('[data-testid="loss-aggregate"]').text_content()
    assert float(aggregate) == pytest.approx(step["information_loss"], abs=5e-5)
    SHOTS.mkdir(parents=True, exist_ok=True)
    section.screenshot(path=str(SHOTS / "utility.png"))
    if os.environ.get("ANONWEB_DOCS_SCREENSHOTS"):
        shutil.copy(SHOTS / "utility.png", Path("docs") / "screenshot-utility.png")

    page.goto(f"{live_server.url}/releases/{dp_release.pk}/")
    rows = page.locator('[data-testid="dp-statistic"]')
    rows.first.wait_for(timeout=15000)
    assert rows.count() == 4
    half = dp_release.report["steps"][0]["ci95_halfwidth"]
    for i in range(4):
        value = float(rows.nth(i).locator('[data-testid="dp-value"]').text_content())
        interval = rows.nth(i).locator('[data-testid="dp-interval"]').text_content()
        low, high = map(float, re.match(r"\s*\[([-\d.]+), ([-\d.]+)\]", interval).groups())
        # the page writes figures with four significant digits
        assert low == pytest.approx(value - half, rel=1e-3, abs=0.01)
        assert high == pytest.approx(value + half, rel=1e-3, abs=0.01)
    assert problems == [], problems

    # an analyst reading the approved release gets no utility section
    from anonweb.releases.services import release_review

    release_review(user=steward, release=dp_release, decision="approve", override="checked: fine")
    page.context.clear_cookies()
    login(page, live_server, "u_analyst")
    page.goto(f"{live_server.url}/releases/{dp_release.pk}/")
    assert page.locator('[data-testid="release-status"]').count() == 1
    assert page.locator('[data-testid="utility"]').count() == 0
