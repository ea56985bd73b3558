"""The hierarchy wizard in a real browser: choosing a builder, typing its parameters, seeing the
preview and the coverage check change, and saving."""

import os
from pathlib import Path

import pytest

from anonweb.accounts.models import Role
from tests.browser.conftest import login
from tests.web.conftest import csv_upload
from tests.web.factories import TeamFactory, member

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
SHOTS = Path(os.environ.get("ANONWEB_SCREENSHOTS", "var/test/screenshots"))


def test_build_preview_and_save_an_interval_hierarchy(page, live_server, settings, tmp_path):
    from anonweb.datasets.models import Hierarchy
    from anonweb.datasets.services import dataset_create

    settings.MEDIA_ROOT = tmp_path / "media"
    team = TeamFactory(name="Wizard team")
    officer = member(team, Role.PRIVACY_OFFICER, username="wendy")
    ds = dataset_create(user=officer, team=team, upload=csv_upload(), name="patients")
    login(page, live_server.url, "wendy")
    page.goto(f"{live_server.url}/datasets/{ds.pk}/")
    page.click("[data-testid=build-hierarchy-age]")
    page.wait_for_selector("[data-testid=levels]")
    page.check("[data-testid=kind-interval]")
    width = page.locator("#builder-fields input[name=width]")
    width.fill("-5")
    page.wait_for_selector("[data-testid=spec-errors] li")
    assert "'width'" in page.locator("[data-testid=spec-errors]").inner_text()
    width.fill("10")
    page.locator("#builder-fields input[name=top]").fill("50")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=spec-errors]').hidden"
        " && document.querySelector('[data-testid=level-1]')"
        " && document.querySelector('[data-testid=level-1]').textContent.includes('>=50')"
    )
    assert "covered" in page.locator("[data-testid=coverage]").inner_text()
    # an uploaded table that misses values: the coverage check names them
    page.check("[data-testid=kind-upload]")
    hfile = tmp_path / "age.csv"
    hfile.write_text("29;20-29;*\n22;20-29;*\n27;20-29;*\n")
    page.set_input_files("[data-testid=upload-file]", str(hfile))
    page.wait_for_function(
        "() => document.querySelector('[data-testid=coverage]').textContent.includes('not covered')"
    )
    assert "43" in page.locator("[data-testid=coverage]").inner_text()
    page.check("[data-testid=kind-interval]")
    page.locator("#builder-fields input[name=width]").fill("20")
    page.wait_for_timeout(500)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "hierarchy-wizard.png"), full_page=True)
    page.click("[data-testid=save-hierarchy]")
    page.wait_for_url(f"**/datasets/{ds.pk}/")
    stored = Hierarchy.objects.get(dataset=ds, column="age", is_current=True)
    assert stored.spec["builder"] == "interval" and stored.spec["width"] == 20
