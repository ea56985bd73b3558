"""The Attacks section in a real browser: the officer reads the plain sentences of what an
attacker gets from the release (and what the live releases reconstruct together) and runs the
attacks again as a job; the analyst, who downloads the approved release, sees none of it."""

import pandas as pd
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from anonweb.accounts.models import Role
from tests.browser.conftest import login
from tests.web.factories import TeamFactory, member
from tests.web.releases.test_conflict_findings import BMI, HEIGHT, NAMES, _release, bmi_plans

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_the_officer_reads_the_attacks_and_the_analyst_does_not(
    new_context, live_server, broker, start_worker
):
    from anonweb.datasets.services import dataset_create, dataset_set_tags
    from anonweb.releases.services import release_approve

    team = TeamFactory(name="Clinic")
    officer_user = member(team, Role.PRIVACY_OFFICER, username="olivia")
    steward_user = member(team, Role.DATA_STEWARD, username="sam")
    member(team, Role.ANALYST, username="ana")
    env = broker("filesystem://")
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
    first_plan, second_plan = bmi_plans()
    first = _release(officer_user, dataset, first_plan, "k1")
    _release(officer_user, dataset, second_plan, "k2")
    release_approve(
        user=steward_user, release=first, override="Reviewed: accepted for this test release."
    )
    url = f"{live_server.url}/releases/{first.pk}/"
    start_worker(env)  # after the releases: it runs only the job the officer starts

    officer = new_context(viewport={"width": 1280, "height": 1000}).new_page()
    login(officer, live_server.url, "olivia")
    officer.goto(url)
    section = officer.locator("[data-testid=attacks]")
    assert section.is_visible()
    sentences = officer.locator("[data-testid=attack-sentences] li").all_inner_texts()
    assert sentences[0].startswith("An attacker who knows height of someone in the release")
    # Release 1 alone determined nothing when it was written.
    sentence = officer.locator("[data-testid=reconstruction-sentence]").inner_text()
    assert "determine no one's value" in sentence
    # Run again, release 2 now beside it: together they give away Doug Fulton's BMI.
    officer.click("[data-testid=run-attacks]")
    officer.wait_for_url("**/jobs/*/")
    officer.wait_for_selector(
        "[data-testid=job-status].succeeded, [data-testid=job-status].failed", timeout=90_000
    )
    assert officer.locator("[data-testid=job-status]").inner_text() == "Succeeded"
    officer.click("[data-testid=attacked-release]")
    officer.wait_for_url(f"{url}#attacks")
    assert "Last run on demand" in officer.locator("[data-testid=attacks]").inner_text()
    sentence = officer.locator("[data-testid=reconstruction-sentence]").inner_text()
    assert "determine the exact bmi of 1 record(s)" in sentence
    assert officer.locator("[data-testid=reconstructed-records]").first.inner_text() == "3"

    analyst = new_context(viewport={"width": 1280, "height": 1000}).new_page()
    login(analyst, live_server.url, "ana")
    analyst.goto(url)
    assert analyst.locator("[data-testid=release-status]").is_visible()  # the page is there
    assert analyst.locator("[data-testid=attacks]").count() == 0
    assert "attacker" not in analyst.content()
