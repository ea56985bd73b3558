"""Seed 000, figure 9 in a real browser: two microaggregations of the same seven BMIs, each
3-anonymous alone. The second release's review page flags that together they give away Doug
Fulton's 43; the steward sees the finding, the officer also sees the value."""

import json

import pandas as pd
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from anonweb.accounts.models import Role
from tests.browser.conftest import login
from tests.web.factories import TeamFactory, member
from tests.web.test_conflict_findings import BMI, HEIGHT, NAMES, bmi_plans

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _run_plan(page, url, dataset_id, plan, title):
    page.goto(f"{url}/jobs/plan/{dataset_id}/")
    page.fill("#id_title", title)
    page.fill("#id_purpose", "BMI study")
    page.fill("#id_recipient", "Clinic research unit")
    page.eval_on_selector("[data-testid=advanced]", "d => { d.open = true; }")  # the JSON view
    page.fill("#id_plan", json.dumps({"version": 1, **plan}))
    page.click("[data-testid=launch-plan]")
    page.wait_for_url("**/jobs/*/")
    page.wait_for_selector(
        "[data-testid=job-status].succeeded, [data-testid=job-status].failed", timeout=90_000
    )
    assert page.locator("[data-testid=job-status]").inner_text() == "Succeeded", page.locator(
        "[data-testid=job-error]"
    ).inner_text()
    page.click("text=See the release")
    page.wait_for_url("**/releases/*/")
    return page.url


def test_the_second_bmi_release_is_flagged_on_its_review_page(
    new_context, live_server, broker, start_worker
):
    from anonweb.datasets.services import dataset_create, dataset_set_tags

    team = TeamFactory(name="Clinic")
    officer_user = member(team, Role.PRIVACY_OFFICER, username="olivia")
    member(team, Role.DATA_STEWARD, username="sam")
    start_worker(broker("filesystem://"))
    csv = pd.DataFrame({"name": NAMES, "bmi": BMI, "height": HEIGHT}).to_csv(index=False)
    dataset = dataset_create(
        user=officer_user,
        team=team,
        upload=SimpleUploadedFile("bmi.csv", csv.encode()),
        name="bmi",
    )
    dataset_set_tags(
        user=officer_user,
        dataset=dataset,
        tags={"name": "identifier", "bmi": "sensitive", "height": "quasi_identifier"},
    )
    url = live_server.url
    first_plan, second_plan = bmi_plans()

    officer = new_context(viewport={"width": 1280, "height": 1000}).new_page()
    login(officer, url, "olivia")
    first_url = _run_plan(officer, url, dataset.pk, first_plan, "k1")
    assert officer.locator("[data-testid=conflicts]").count() == 0
    assert "Checked against 0 earlier" in officer.locator("[data-testid=no-conflicts]").inner_text()
    second_url = _run_plan(officer, url, dataset.pk, second_plan, "k2")
    # The officer sees which record and the value an attacker would infer.
    finding = officer.locator("[data-testid=conflict-finding][data-type=exact_inference]")
    assert finding.count() == 1
    officer.click("[data-testid=inferred-values] summary")
    values = officer.locator("[data-testid=inferred-values] table").inner_text()
    assert "4\t43.0" in values  # source row 4: Doug Fulton

    steward = new_context(viewport={"width": 1280, "height": 1000}).new_page()
    login(steward, url, "sam")
    steward.goto(second_url)
    assert steward.locator("[data-testid=release-status]").inner_text() == "Awaiting approval"
    flagged = steward.locator("[data-testid=conflicts]")
    assert flagged.is_visible()
    text = flagged.inner_text()
    assert "Exact inference: 1 record(s) · bmi" in text
    assert "release 1 (awaiting approval)" in text and "release 2 (awaiting approval)" in text
    assert "43" not in text and steward.locator("[data-testid=inferred-values]").count() == 0
    # The release gate lists the conflict as blocking: Approve without a justification is refused.
    gate = steward.locator("[data-testid=finding][data-code=conflict_exact_inference]")
    assert gate.count() == 1 and "block" in gate.inner_text()
    steward.click("button[value=approve]")
    steward.wait_for_load_state()
    assert steward.locator("[data-testid=release-status]").inner_text() == "Awaiting approval"
    # The earlier release's page shows the same finding, with the live status of both.
    steward.goto(first_url)
    assert steward.locator("[data-testid=conflict-finding][data-type=exact_inference]").count() == 1
