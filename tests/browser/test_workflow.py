"""A real browser: log in, launch a job, watch its progress bar reach 100% without reloading."""

import pytest

from anonweb.accounts.models import Role
from tests.browser.conftest import login
from tests.web.factories import TeamFactory, member

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_officer_launches_a_job_and_sees_progress_reach_100(
    page,
    live_server,
    broker,
    start_worker,
):
    team = TeamFactory(name="Browser team")
    member(team, Role.PRIVACY_OFFICER, username="officer1")
    start_worker(broker("filesystem://"))
    login(page, live_server, "officer1")
    page.goto(f"{live_server.url}/jobs/")
    page.click("[data-testid=queue-check]")
    page.wait_for_url("**/jobs/*/")
    bar = page.locator("[data-testid=progress]")
    seen = set()
    for _ in range(200):
        seen.add(int(bar.get_attribute("aria-valuenow")))
        if 100 in seen:
            break
        page.wait_for_timeout(100)
    assert 100 in seen, f"progress values seen: {sorted(seen)}"
    assert len(seen) > 2, "the bar should move through intermediate values without a reload"
    page.wait_for_selector("text=Succeeded")


def test_analyst_cannot_reach_datasets(page, live_server):
    team = TeamFactory(name="Analysts")
    member(team, Role.ANALYST, username="analyst1")
    login(page, live_server, "analyst1")
    assert page.locator("nav >> text=Datasets").count() == 0
    response = page.goto(f"{live_server.url}/datasets/upload/")
    assert response.status == 200
    assert "privacy officer role" in page.content()
