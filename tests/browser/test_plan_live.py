"""The plan builder as the plan changes: the release gate's findings that the plan and the tags
decide follow each choice, and PRAM and codebook parameters are built in tables (no JSON typed),
kept in step with the JSON view both ways."""

import json
import os
from pathlib import Path

import pytest

from anonweb.accounts.models import Role
from tests.browser.conftest import login
from tests.browser.test_plan_builder import _dataset, _plan_text, _wait_valid
from tests.web.factories import TeamFactory, member

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
SHOTS = Path(os.environ.get("ANONWEB_SCREENSHOTS", "var/test/screenshots"))
FINDINGS = "[data-testid=live-findings]"


def _findings_state(page, state):
    page.wait_for_function(
        f"() => document.querySelector('{FINDINGS}').dataset.state === '{state}'", timeout=20_000
    )


def test_gate_findings_follow_the_plan_and_pram_is_built_in_a_table(page, live_server):
    team = TeamFactory(name="Live")
    officer = member(team, Role.PRIVACY_OFFICER, username="lena")
    ds = _dataset(officer, team)
    login(page, live_server.url, "lena")
    page.goto(f"{live_server.url}/jobs/plan/{ds.pk}/")
    page.wait_for_selector("[data-testid=column-name]")

    # the suggestion drops the identifier: nothing the plan alone decides stands in the way
    _findings_state(page, "clear")
    # keeping it is a blocking finding, named as the gate names it, before anything runs
    page.select_option("[data-testid=action-name]", "keep")
    _findings_state(page, "findings")
    item = page.locator(f"{FINDINGS} li[data-code=identifier_released]")
    assert "name is tagged identifier" in item.inner_text()
    assert "error" in item.get_attribute("class")

    # a codebook instead, typed in its table
    page.select_option("[data-testid=action-name]", "substitute")
    row = page.locator("[data-testid=column-name]")
    row.locator("[data-testid=sf-add-codebook]").click()
    row.locator("input[name='codebook.key']").last.fill("Person 0")
    row.locator("input[name='codebook.value']").last.fill("P-zero")
    row.locator("[data-testid=sf-add-codebook]").click()
    row.locator("input[name='codebook.key']").last.fill("Person 1")
    row.locator("input[name='codebook.value']").last.fill("P-one")
    _wait_valid(page)
    _findings_state(page, "clear")
    (sub,) = [s for s in _plan_text(page)["steps"] if s["kind"] == "substitute"]
    assert sub["params"]["codebook"] == {"Person 0": "P-zero", "Person 1": "P-one"}

    # PRAM of the diagnosis: categories, then "keep with 0.7" fills the transition matrix
    page.select_option("[data-testid=action-diagnosis]", "pram")
    diag = page.locator("[data-testid=column-diagnosis]")
    diag.locator("[data-testid=sf-categories-matrix]").fill("flu, asthma, diabetes, migraine")
    diag.locator("[data-testid=sf-categories-matrix]").press("Tab")
    diag.locator("[data-testid=sf-keep-matrix]").fill("0.7")
    diag.locator("[data-testid=sf-fill-matrix]").click()
    _wait_valid(page)
    (pram,) = [s for s in _plan_text(page)["steps"] if s["kind"] == "pram"]
    matrix = pram["params"]["matrix"]
    assert list(matrix) == ["flu", "asthma", "diabetes", "migraine"]
    for src, row_ in matrix.items():
        assert row_[src] == 0.7 and sum(row_.values()) == pytest.approx(1.0)
        assert all(p == pytest.approx(0.1) for t, p in row_.items() if t != src)
    assert "p_keep" not in pram["params"]
    # a row that no longer sums to 1 is refused by the server's check, as typed
    cell = diag.locator("input[name='matrix[flu][asthma]']")
    cell.fill("0.5")
    page.wait_for_selector("[data-testid=plan-errors] li")
    assert "Σ 1.4" in diag.inner_text()
    cell.fill("0.1")
    _wait_valid(page)

    # the JSON view drives the table too
    plan = _plan_text(page)
    for step in plan["steps"]:
        if step["kind"] == "pram":
            step["params"]["matrix"]["flu"] = {
                "flu": 0.6,
                "asthma": 0.2,
                "diabetes": 0.1,
                "migraine": 0.1,
            }
    page.evaluate(
        "text => { const a = document.getElementById('id_plan'); a.value = text;"
        " a.dispatchEvent(new Event('input', {bubbles: true})); }",
        json.dumps(plan),
    )
    diag = page.locator("[data-testid=column-diagnosis]")
    assert diag.locator("input[name='matrix[flu][flu]']").input_value() == "0.6"
    assert diag.locator("input[name='matrix[flu][asthma]']").input_value() == "0.2"
    _wait_valid(page)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "plan-live-findings-pram.png"), full_page=True)
