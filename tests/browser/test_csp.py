"""Pages still work under the Content-Security-Policy: the charts draw, the progress page
polls, forms post, and the browser reports no blocked script or style."""

import pytest
from django.db import transaction

from anonweb.accounts.models import Role
from tests.browser.conftest import login
from tests.web.conftest import csv_upload
from tests.web.factories import TeamFactory, member

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def test_charts_and_progress_work_under_the_policy(page, live_server, settings, tmp_path):
    from anonweb.datasets.services import dataset_create, dataset_set_tags
    from anonweb.jobs.execution import job_execute
    from anonweb.jobs.models import JobKind
    from anonweb.jobs.services import job_create

    settings.MEDIA_ROOT = tmp_path / "media"
    team = TeamFactory(name="CSP team")
    officer = member(team, Role.PRIVACY_OFFICER, username="csp_officer")
    dataset = dataset_create(user=officer, team=team, upload=csv_upload(), name="patients")
    dataset_set_tags(
        user=officer,
        dataset=dataset,
        tags={"zip": "quasi_identifier", "age": "quasi_identifier", "disease": "sensitive"},
    )
    with transaction.atomic():
        job = job_create(user=officer, team=team, kind=JobKind.PROFILE, dataset=dataset)
    job_execute(job_id=job.pk, worker="browser-test")

    problems = []

    def on_console(msg):
        # The browser asks for /favicon.ico on its own; the site has none.
        if msg.type in ("error", "warning") and "favicon" not in msg.location.get("url", ""):
            problems.append(msg.text)

    page.on("console", on_console)
    page.on("pageerror", lambda exc: problems.append(str(exc)))

    login(page, live_server, "csp_officer")
    response = page.goto(f"{live_server.url}/datasets/{dataset.pk}/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.wait_for_selector(".chart .plot .main-svg", timeout=15000)
    assert page.locator(".chart .plot .main-svg").count() >= 1

    page.goto(f"{live_server.url}/jobs/{job.pk}/")
    page.wait_for_selector("text=Succeeded")
    assert page.locator("[data-testid=progress]").get_attribute("aria-valuenow") == "100"

    blocked = [p for p in problems if "Content Security Policy" in p or "Refused" in p]
    assert blocked == [], blocked
    assert problems == [], problems


def test_swagger_ui_lists_the_operations_under_the_policy(page, live_server):
    """/api/docs/ runs Swagger UI from the site's own files with no inline script, so the
    policy that every page carries lets it load the schema and list every operation."""
    member(TeamFactory(name="Docs team"), Role.PRIVACY_OFFICER, username="docs_officer")
    problems = []
    page.on(
        "console",
        lambda msg: problems.append(msg.text) if msg.type in ("error", "warning") else None,
    )
    page.on("pageerror", lambda exc: problems.append(str(exc)))

    login(page, live_server, "docs_officer")
    response = page.goto(f"{live_server.url}/api/docs/")
    assert "script-src 'self'" in response.headers["content-security-policy"]
    page.wait_for_selector(".opblock", timeout=15000)
    assert page.locator(".opblock").count() >= 20
    blocked = [p for p in problems if "Content Security Policy" in p or "Refused" in p]
    assert blocked == [], blocked
