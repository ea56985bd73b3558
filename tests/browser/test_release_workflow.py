"""The whole workflow in a real browser: an officer uploads, tags, assesses and anonymizes;
a steward approves; an analyst downloads the approved release."""

import io
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from anonweb.accounts.models import Role
from tests.browser.conftest import login
from tests.web.factories import TeamFactory, member

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
SHOTS = Path(os.environ.get("ANONWEB_SCREENSHOTS", "var/test/screenshots"))


def _table(n=120, seed=7):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "name": [f"Person {i}" for i in range(n)],
            "zip": rng.choice(["02138", "02139", "02141", "02142"], n),
            "age": rng.integers(20, 70, n),
            "sex": rng.choice(["F", "M"], n),
            "diagnosis": rng.choice(["flu", "asthma", "diabetes", "=cmd|' /C calc'!A0"], n),
        }
    )


def _wait_job(page):
    page.wait_for_url("**/jobs/*/")
    page.wait_for_selector(
        "[data-testid=job-status].succeeded, [data-testid=job-status].failed", timeout=90_000
    )
    assert page.locator("[data-testid=job-status]").inner_text() == "Succeeded", page.locator(
        "[data-testid=job-error]"
    ).inner_text()


def test_upload_tag_assess_anonymize_approve_download(
    new_context,
    live_server,
    broker,
    start_worker,
    tmp_path,
):
    team = TeamFactory(name="Registry")
    member(team, Role.PRIVACY_OFFICER, username="olivia")
    member(team, Role.DATA_STEWARD, username="sam")
    member(team, Role.ANALYST, username="ana")
    start_worker(broker("filesystem://"))
    SHOTS.mkdir(parents=True, exist_ok=True)
    url = live_server.url
    source = tmp_path / "registry.csv"
    _table().to_csv(source, index=False)

    officer = new_context(viewport={"width": 1280, "height": 1000}).new_page()
    login(officer, url, "olivia")
    officer.goto(f"{url}/datasets/upload/")
    officer.fill("#id_name", "registry")
    officer.set_input_files("#id_file", str(source))
    officer.click("main button[type=submit]")
    officer.wait_for_url("**/datasets/*/")
    # The upload returns at once; the page follows the job reading it, then shows the table.
    officer.wait_for_selector("#id_col_0", timeout=60_000)
    assert officer.locator("[data-testid=reading]").count() == 0
    roles = {
        "zip": "quasi_identifier",
        "age": "quasi_identifier",
        "sex": "quasi_identifier",
        "diagnosis": "sensitive",
    }
    for i, column in enumerate(["name", "zip", "age", "sex", "diagnosis"]):
        officer.select_option(f"#id_col_{i}", roles.get(column, "identifier"))
    officer.click("text=Save tags")
    officer.click("[data-testid=assess]")
    _wait_job(officer)
    officer.click("text=Back to the dataset")
    officer.wait_for_selector("#chart-class-sizes .main-svg")  # plotly drew the chart
    assert officer.locator("[data-testid=k]").inner_text() == "1"
    officer.screenshot(path=str(SHOTS / "dataset-risk.png"), full_page=True)

    # The steward raises the team's release policy to k >= 50 on the policy page.
    steward = new_context().new_page()
    login(steward, url, "sam")
    steward.goto(f"{url}/releases/policy/")
    steward.fill("#id_k", "50")
    steward.click("[data-testid=save-policy]")
    steward.wait_for_selector("text=Release policy of Registry saved")

    officer.click("[data-testid=anonymize]")
    officer.click("[data-testid=suggest] > summary")  # the suggestion form is folded
    officer.select_option("#id_identifiers", "drop")
    officer.fill("#id_k", "5")
    officer.click("button:text-is('Suggest')")
    officer.fill("#id_purpose", "Registry statistics 2026")
    officer.fill("#id_recipient", "Health ministry")
    officer.click("[data-testid=launch-plan]")
    _wait_job(officer)
    officer.click("text=See the release")
    assert int(officer.locator("[data-testid=k-after]").inner_text()) >= 5
    assert officer.locator("[data-testid=homogeneity] >> text=diagnosis").count() == 1
    assert officer.locator("[data-testid=release-status]").inner_text() == "Awaiting approval"
    # the requester cannot approve: no decision button (the words may appear in explanations)
    assert officer.locator("button[name=decision][value=approve]").count() == 0
    release_url = officer.url
    officer.screenshot(path=str(SHOTS / "release.png"), full_page=True)

    analyst = new_context().new_page()
    login(analyst, url, "ana")
    assert analyst.goto(release_url).status == 404  # not approved yet

    steward.goto(release_url)
    # Classes of 5 or more but fewer than 50: the release gate blocks, Approve alone is refused.
    assert steward.locator("[data-testid=finding][data-code=risk_k]").count() == 1
    assert "Registry statistics 2026" in steward.locator("[data-testid=purpose]").inner_text()
    steward.fill("#note", "k >= 5, identifiers dropped")
    steward.click("button[value=approve]")
    steward.wait_for_selector("text=blocking finding")
    assert steward.locator("[data-testid=release-status]").inner_text() == "Awaiting approval"
    justification = "The ministry publishes only aggregates; homogeneous classes are accepted."
    steward.fill("#override", justification)
    steward.click("button[value=approve]")
    steward.wait_for_selector("[data-testid=release-status]:has-text('Approved')")
    assert justification in steward.locator("[data-testid=override-justification]").inner_text()
    steward.goto(f"{url}/audit/")
    assert steward.locator(f"text={justification}").count() >= 1

    analyst.goto(f"{url}/releases/")
    analyst.click("text=v1")
    with analyst.expect_download() as info:
        analyst.click("[data-testid=download-csv]")
    data = Path(info.value.path()).read_text()
    released = pd.read_csv(io.StringIO(data), dtype=str)
    assert "name" not in released.columns
    assert not released["diagnosis"].str.startswith("=").any()  # formula neutralised
    assert released["diagnosis"].str.startswith("'=").any()
