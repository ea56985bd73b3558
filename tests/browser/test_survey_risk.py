"""Survey risk in a real browser: an officer names the weight and household columns and asks
for SUDA2 on the assess form; a worker runs the profile; plotly draws the SUDA-score and
household-risk charts; the records at highest risk are listed for the officer and not for the
steward."""

import numpy as np
import pandas as pd
import pytest

from anonweb.accounts.models import Role
from tests.browser.conftest import login
from tests.web.conftest import csv_upload
from tests.web.factories import TeamFactory, member

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _table(n=150, seed=11):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "region": rng.choice(["north", "south", "east"], n),
            "age": rng.choice(["20s", "30s", "40s", "50s"], n),
            "sex": rng.choice(["F", "M"], n),
            "weight": rng.uniform(50, 400, n).round(1),
            "household": np.arange(n) // 3,
        }
    )


def test_officer_sees_survey_charts_and_records_steward_sees_charts_only(
    new_context, live_server, broker, start_worker
):
    from anonweb.datasets.services import dataset_create, dataset_set_tags

    team = TeamFactory(name="Survey team")
    officer_user = member(team, Role.PRIVACY_OFFICER, username="olga")
    member(team, Role.DATA_STEWARD, username="sam")
    ds = dataset_create(user=officer_user, team=team, upload=csv_upload(_table()), name="lfs")
    qi = "quasi_identifier"
    dataset_set_tags(
        user=officer_user,
        dataset=ds,
        tags={"region": qi, "age": qi, "sex": qi, "weight": "other", "household": "other"},
    )
    start_worker(broker("filesystem://"))
    url = live_server.url

    officer = new_context(viewport={"width": 1280, "height": 1000}).new_page()
    login(officer, url, "olga")
    officer.goto(f"{url}/datasets/{ds.pk}/")
    officer.select_option("[data-testid=assess-weights]", "weight")
    officer.select_option("[data-testid=assess-household]", "household")
    officer.check("[data-testid=assess-suda2]")
    officer.click("[data-testid=assess]")
    officer.wait_for_url("**/jobs/*/")
    officer.wait_for_selector(
        "[data-testid=job-status].succeeded, [data-testid=job-status].failed", timeout=90_000
    )
    status = officer.locator("[data-testid=job-status]").inner_text()
    assert status == "Succeeded", officer.locator("[data-testid=job-error]").all_inner_texts()
    officer.click("text=Back to the dataset")
    officer.wait_for_selector("#chart-suda-scores .main-svg", timeout=20_000)
    officer.wait_for_selector("#chart-survey-risk .main-svg", timeout=20_000)
    assert "Households by household risk" in officer.locator("#chart-survey-risk").inner_text()
    officer.locator("[data-testid=highest-risk-records] > summary").click()
    rows = officer.locator("[data-testid=highest-risk-records] tbody tr")
    assert rows.count() == 20
    assert "region=" in rows.first.inner_text()

    steward = new_context().new_page()
    login(steward, url, "sam")
    steward.goto(f"{url}/datasets/{ds.pk}/")
    steward.wait_for_selector("#chart-suda-scores .main-svg", timeout=20_000)
    assert steward.locator("[data-testid=survey-risk]").count() == 1
    assert steward.locator("[data-testid=highest-risk-records]").count() == 0
    assert "region=" not in steward.content()
