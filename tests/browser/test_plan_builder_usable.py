"""The plan builder as a new privacy officer meets it: labels in words, a DP count form without
columns, the check as typed reporting what the server reports, sensitive columns that can be
dropped, steps that can be reordered from the keyboard, column lists without dropped columns,
ε said per statistic or per record, and pages short enough to scan."""

import json

import numpy as np
import pandas as pd
import pytest

from anonweb.accounts.models import Role
from tests.browser.conftest import login
from tests.web.conftest import csv_upload
from tests.web.factories import TeamFactory, member

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

ROWS = 300


def _table(n=ROWS, seed=11):
    """Like the demo: people with an identifier, quasi-identifiers, a diagnosis, and a free-text
    note long enough to make a sample row tall."""
    rng = np.random.default_rng(seed)
    words = ["patient", "reports", "mild", "pain", "since", "monday", "follow", "up", "advised"]
    return pd.DataFrame(
        {
            "name": [f"Person {i}" for i in range(n)],
            "zip": rng.choice(["02138", "02139", "02141", "02142"], n),
            "age": rng.integers(20, 70, n),
            "sex": rng.choice(["F", "M"], n),
            "diagnosis": rng.choice(["flu", "asthma", "diabetes", "migraine"], n),
            "notes": [" ".join(rng.choice(words, 80)) for _ in range(n)],
        }
    )


def _dataset(officer, team):
    from anonweb.datasets.services import dataset_create, dataset_set_tags

    ds = dataset_create(user=officer, team=team, upload=csv_upload(_table()), name="clinic")
    return dataset_set_tags(
        user=officer,
        dataset=ds,
        tags={
            "name": "identifier",
            "zip": "quasi_identifier",
            "age": "quasi_identifier",
            "sex": "quasi_identifier",
            "diagnosis": "sensitive",
            "notes": "keep",
        },
    )


def _plan(page) -> dict:
    return json.loads(page.locator("#id_plan").input_value())


def _errors(page) -> str:
    page.wait_for_timeout(600)  # the check waits for a pause in typing
    return page.locator("[data-testid=plan-errors]").inner_text()


def _label(scope, field) -> str:
    return scope.locator(f"[data-field={field}] > label").first.text_content()


@pytest.fixture
def officer_page(page, live_server):
    team = TeamFactory(name="Newcomers")
    officer = member(team, Role.PRIVACY_OFFICER, username="nina")
    ds = _dataset(officer, team)
    login(page, live_server.url, "nina")
    page.goto(f"{live_server.url}/jobs/plan/{ds.pk}/")
    page.wait_for_selector("[data-testid=search-section]")
    return page, ds


def test_fields_are_labelled_in_words_and_dp_forms_fit_the_statistic(officer_page):
    page, _ = officer_page
    search = page.locator("[data-testid=search-section]")
    assert _label(search, "max_nodes") == "Most lattice nodes to check"
    assert _label(search, "aggregate") == "Combine the columns' losses by"
    assert _label(search, "time_limit") == "Time limit (seconds)"
    assert "max_nodes" not in search.inner_text()

    page.click("[data-testid=dp-add]")
    dp = page.locator("[data-testid=dp-step]").first
    dp.locator("select[name=kind]").select_option("count")
    assert _label(dp, "epsilon") == "Total ε for this statistic *"
    assert not dp.locator("[data-field=columns]").is_visible()  # a count takes no column
    assert not dp.locator("[data-field=bounds]").is_visible()
    dp.locator("select[name=kind]").select_option("sum")
    assert dp.locator("[data-field=columns]").is_visible()
    assert dp.locator("[data-field=bounds]").is_visible()

    # local DP: ε is per column and per record
    page.select_option("[data-testid=action-diagnosis]", "ldp_randomized_response")
    rr = page.locator("[data-testid=column-diagnosis]")
    assert _label(rr, "epsilon") == "ε per column per record (local DP) *"
    rr.locator("input[name=epsilon]").fill("1")
    rr.locator("input[name=categories]").fill("flu, asthma, diabetes, migraine")
    page.locator("[data-testid=dp-step] button.link").click()  # no central DP statistic
    page.locator("h1").click()
    page.wait_for_function(
        "() => (document.querySelector('[data-testid=live-cost-total]') || {}).innerText"
        "?.includes('per record')",
        timeout=20_000,
    )
    assert "local DP: ε = 1 per record in total (1, one per randomized column)" in (
        page.locator("[data-testid=live-cost-total]").inner_text()
    )


def test_the_check_as_typed_reports_an_impossible_k(officer_page):
    page, _ = officer_page
    k = page.locator("[data-testid=search-section] input[name=k]")
    k.fill(str(ROWS + 1))
    page.locator("h1").click()
    assert f"'k' is {ROWS + 1} but the table has only {ROWS} rows" in _errors(page)
    k.fill("5")
    page.locator("h1").click()
    page.wait_for_function("() => document.getElementById('plan-errors').hidden")


def test_sensitive_columns_can_be_dropped_and_dropped_columns_are_not_offered(officer_page):
    page, _ = officer_page
    actions = page.locator("[data-testid=action-diagnosis] option").all_inner_texts()
    assert "drop the column" in actions
    # the default plan drops the identifier first: no later form offers it
    search = page.locator("[data-testid=search-section]")
    search.locator("[data-testid='sf-add-models']").click()
    search.locator("select[name='models[0].model']").select_option("distinct_l")
    offered = search.locator("select[name='models[0].sensitive'] option").all_inner_texts()
    assert "name" not in offered and "diagnosis" in offered
    page.select_option("[data-testid=action-diagnosis]", "drop")
    steps = [s for s in _plan(page)["steps"] if s["kind"] == "drop"]
    assert any("diagnosis" in s["params"]["columns"] for s in steps)


def test_steps_can_be_reordered_from_the_keyboard(officer_page):
    page, _ = officer_page
    page.click("[data-testid=dp-add]")
    dp = page.locator("[data-testid=dp-step]").first
    dp.locator("select[name=kind]").select_option("count")
    dp.locator("input[name=epsilon]").fill("0.5")
    page.locator("h1").click()
    # drop, search, then the statistic: the search before it is not stable, and the server
    # and the check as typed both say so
    assert [s["kind"] for s in _plan(page)["steps"]] == [
        "drop",
        "optimal_generalization",
        "dp_release",
    ]
    page.wait_for_function(
        "() => document.getElementById('plan-errors').innerText.includes('would not be')",
        timeout=20_000,
    )
    up = page.locator("[data-testid=step-up-3]")
    up.focus()
    page.keyboard.press("Enter")
    assert [s["kind"] for s in _plan(page)["steps"]] == [
        "drop",
        "dp_release",
        "optimal_generalization",
    ]
    # the focus follows the moved step, so pressing again moves it on
    page.keyboard.press("Enter")
    assert [s["kind"] for s in _plan(page)["steps"]][0] == "dp_release"
    assert "1" in page.locator("[data-testid=order-step-1]").get_attribute("data-testid")
    assert page.locator("[data-testid=order-step-1]").get_attribute("data-kind") == "dp_release"
    assert page.locator("[data-testid=step-up-1]").is_disabled()


def test_a_dp_suggestion_has_a_dp_title(page, live_server):
    team = TeamFactory(name="Titles")
    officer = member(team, Role.PRIVACY_OFFICER, username="tara")
    ds = _dataset(officer, team)
    login(page, live_server.url, "tara")
    page.goto(
        f"{live_server.url}/jobs/plan/{ds.pk}/?mode=dp_histogram&k=5&suppression=0.02&identifiers=drop"
    )
    page.wait_for_selector("[data-testid=dp-section]")
    assert page.locator("#id_title").input_value() == "Differentially private statistics"


def test_the_plan_and_dataset_pages_can_be_scanned(officer_page, live_server, capsys):
    page, ds = officer_page
    page.wait_for_timeout(800)  # the check's answer (cost, findings) is part of the page
    plan_height = page.evaluate("document.body.scrollHeight")
    page.goto(f"{live_server.url}/datasets/{ds.pk}/")
    page.wait_for_selector("table.grid.small")
    # measured once the what-if has answered (its charts are part of the page): before, the
    # height depended on whether the first call had come back
    page.wait_for_function(
        "() => !document.querySelector('[data-testid=whatif-loss]').textContent.includes('…')",
        timeout=60_000,
    )
    page.wait_for_timeout(500)
    dataset_height = page.evaluate("document.body.scrollHeight")
    with capsys.disabled():
        print(f"\nplan page {plan_height} px, dataset page {dataset_height} px")
    cell = page.locator("table.grid.small td.clip").last
    assert cell.inner_text().endswith("…") and len(cell.inner_text()) <= 40
    assert len(cell.get_attribute("title")) > 200  # the whole note on hover
    # before: 3,790 px and 4,304 px on this table (sections open, notes in full)
    assert plan_height < 3000
    # the what-if's charts (about 1,500 px) included
    assert dataset_height < 5000


def _wait_checked(page, state):
    page.locator("h1").click()
    page.wait_for_function(
        f"() => document.getElementById('plan-builder').dataset.checked === '{state}'",
        timeout=20_000,
    )


def test_a_perturbed_quasi_identifier_leaves_the_search_and_comes_back(officer_page):
    """Microaggregation or generalization of a quasi-identifier, not both: the builder makes a
    plan that runs either way (the search once failed on the means it could not generalize)."""
    page, _ = officer_page
    hierarchy = _plan(page)["hierarchies"]["age"]
    page.select_option("[data-testid=action-age]", "microaggregation")
    page.locator("[data-testid=column-age] input[name=k]").fill("3")
    _wait_checked(page, "valid")
    plan = _plan(page)
    assert plan["quasi_identifiers"] == ["zip", "sex"] and "age" not in plan["hierarchies"]
    assert [s["kind"] for s in plan["steps"]] == [
        "drop",
        "microaggregation",
        "optimal_generalization",
    ]
    assert page.locator("[data-testid=hierarchy-age]").count() == 0
    page.select_option("[data-testid=action-age]", "keep")
    _wait_checked(page, "valid")
    plan = _plan(page)
    assert plan["quasi_identifiers"] == ["zip", "age", "sex"]
    assert plan["hierarchies"]["age"] == hierarchy
