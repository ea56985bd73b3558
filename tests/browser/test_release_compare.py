"""Comparing two versions of a source in a real browser: from a release page's "compare with"
list to the side-by-side page, where the changed parameter and the figures it moved stand out."""

import os
from pathlib import Path

import pytest

from anonweb.accounts.models import Role
from tests.browser.conftest import login
from tests.web.conftest import csv_upload
from tests.web.factories import TeamFactory, member
from tests.web.releases.test_published_report import launch

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
SHOTS = Path(os.environ.get("ANONWEB_SCREENSHOTS", "var/test/screenshots"))


def plan(age_level: int) -> dict:
    return {
        "version": 1,
        "quasi_identifiers": ["age", "sex"],
        "sensitive": ["disease"],
        "hierarchies": {"age": {"builder": "interval", "width": 10}},
        "steps": [
            {"kind": "drop", "params": {"columns": ["name", "zip"]}},
            {"kind": "generalize", "params": {"levels": {"age": age_level}}},
        ],
    }


def test_compare_two_versions_and_see_the_difference(page, live_server, settings, tmp_path):
    from anonweb.datasets.services import dataset_create, dataset_set_tags

    settings.MEDIA_ROOT = tmp_path / "media"
    team = TeamFactory(name="Comparison team")
    officer = member(team, Role.PRIVACY_OFFICER, username="oona")
    ds = dataset_create(user=officer, team=team, upload=csv_upload(), name="patients")
    dataset_set_tags(
        user=officer,
        dataset=ds,
        tags={
            "name": "identifier",
            "zip": "quasi_identifier",
            "age": "quasi_identifier",
            "sex": "quasi_identifier",
            "disease": "sensitive",
        },
    )
    first = launch(officer, ds, plan(1), "ages in decades")
    second = launch(officer, ds, plan(3), "ages in one band")

    login(page, live_server.url, "oona")
    page.goto(f"{live_server.url}/releases/{second.pk}/")
    picker = page.locator("[data-testid=compare-with]")
    picker.locator("select").select_option(str(first.pk))
    picker.locator("button").click()
    page.wait_for_url(f"**/releases/compare/?a={second.pk}&b={first.pk}")

    # the age level differs, and it is highlighted
    level = page.locator("tr[data-testid=differs]", has_text="levels.age")
    assert level.count() == 1
    assert level.locator("td.value").all_inner_texts() == ["3", "1"]
    background = level.evaluate("tr => getComputedStyle(tr).backgroundColor")
    same = page.locator(
        "tr:not(.differs)", has_text="Records suppressed (outside every class)"
    ).first
    assert background != same.evaluate("tr => getComputedStyle(tr).backgroundColor")
    # k after: 3 with ages in one band (only sex is left), 1 in decades; the safer side marked
    k = page.locator("[data-section=risk] tr[data-testid=differs]", has_text="k (smallest class)")
    assert k.locator("td.value").all_inner_texts() == ["3", "1"]
    assert "better" in (k.locator("td.value").first.get_attribute("class") or "")
    assert page.locator("[data-section=utility] tr[data-testid=differs]").count() >= 1

    page.get_by_test_id("only-differences").click()
    page.wait_for_url("**differences=1")
    assert page.locator("tr", has_text="Records suppressed (outside every class)").count() == 0
    assert page.locator("tr[data-testid=differs]", has_text="levels.age").count() == 1
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "compare.png"), full_page=True)
