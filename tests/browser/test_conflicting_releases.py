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
from tests.web.releases.test_conflict_findings import (
    BMI,
    HEIGHT,
    NAMES,
    STROKE_TAGS,
    _release,
    _upload,
    bmi_plans,
    stroke_plans,
    stroke_table,
)

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


JUSTIFICATION = "The two recipients are bound by contract never to exchange their extracts."


def test_the_earlier_of_two_conflicting_releases_needs_the_override_once_the_later_is_approved(
    new_context, live_server, tmp_path
):
    """Issue 19: release 1 (age generalized) and release 2 (sex and region) both keep a glucose
    reading unique per patient. Release 2, written second, is blocked by the linkage and
    approved over it; release 1, written with nothing to conflict with, is then refused without
    a justification, and its sign-off report lists the conflict."""
    from anonweb.releases.models import Release

    team = TeamFactory(name="Stroke unit")
    officer_user = member(team, Role.PRIVACY_OFFICER, username="olivia")
    member(team, Role.DATA_STEWARD, username="sam")
    dataset = _upload(officer_user, team, stroke_table(), "stroke", STROKE_TAGS)
    by_age, by_sex = stroke_plans(["glucose"])
    first = _release(officer_user, dataset, by_age, "by age")
    second = _release(officer_user, dataset, by_sex, "by sex and region")
    assert first.findings == []  # nothing to conflict with when it was written
    url = live_server.url

    steward = new_context(viewport={"width": 1280, "height": 1000}, accept_downloads=True)
    page = steward.new_page()
    login(page, url, "sam")
    page.goto(f"{url}/releases/{second.pk}/")
    assert page.locator("[data-testid=finding][data-code=conflict_linkage]").count() > 0
    page.fill("#override", JUSTIFICATION)
    page.click("button[value=approve]")
    page.wait_for_selector("[data-testid=release-status]:has-text('Approved')")

    page.goto(f"{url}/releases/{first.pk}/")
    gate = page.locator("[data-testid=findings]")
    assert page.locator("[data-testid=no-findings]").count() == 0
    linkage = gate.locator("[data-testid=finding][data-code=conflict_linkage]")
    assert linkage.count() > 0 and "block" in linkage.first.inner_text()
    assert "release 2: approved" in gate.inner_text()
    assert page.locator("[data-testid=conflicts]").is_visible()
    # Approve with a plain note: refused, the release stays pending.
    page.fill("#note", "Looks fine.")
    page.click("button[value=approve]")
    page.wait_for_load_state()
    assert "blocking finding" in page.locator("main").inner_text()
    assert page.locator("[data-testid=release-status]").inner_text() == "Awaiting approval"
    assert Release.objects.get(pk=first.pk).status == "pending"
    # With a justification it goes through, over the findings as they stand now.
    page.fill("#override", JUSTIFICATION)
    page.click("button[value=approve]")
    page.wait_for_selector("[data-testid=release-status]:has-text('Approved')")
    override = page.locator("[data-testid=override]").inner_text()
    assert "conflict_linkage" in override and JUSTIFICATION in override

    with page.expect_download() as info:
        page.click("[data-testid=signoff]")
    saved = tmp_path / info.value.suggested_filename
    info.value.save_as(saved)
    report = steward.new_page()
    report.goto(saved.as_uri())
    assert report.locator("[data-testid=no-findings]").count() == 0
    assert report.locator("[data-testid=finding][data-code=conflict_linkage]").count() > 0
    conflict = report.locator("[data-testid=signoff-conflict][data-type=linkage]")
    assert conflict.count() > 0
    assert "release 2 (approved)" in conflict.first.inner_text()
    approved = report.locator("[data-testid=event]:has(code:text-is('release.approved'))")
    assert "conflict_linkage" in approved.last.inner_text()
