"""The plan builder in a real browser: a k-anonymity plan and a DP plan built entirely with the
forms (no JSON typed), checked as they are typed, the JSON kept in step, and run by a worker."""

import json
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from anonweb.accounts.models import Role
from tests.browser.conftest import login
from tests.web.conftest import csv_upload
from tests.web.factories import TeamFactory, member

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
SHOTS = Path(os.environ.get("ANONWEB_SCREENSHOTS", "var/test/screenshots"))


def _table(n=300, seed=5):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "name": [f"Person {i}" for i in range(n)],
            "zip": rng.choice(["02138", "02139", "02141", "02142"], n),
            "age": rng.integers(20, 70, n),
            "sex": rng.choice(["F", "M"], n),
            "diagnosis": rng.choice(["flu", "asthma", "diabetes", "migraine"], n),
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
        },
    )


def _plan_text(page) -> dict:
    return json.loads(page.locator("#id_plan").input_value())


def _wait_valid(page):
    page.locator("h1").click()  # leave the field: its change is written and checked
    page.wait_for_timeout(400)
    page.wait_for_function(
        "() => document.getElementById('plan-builder').dataset.checked === 'valid'"
        " && document.getElementById('plan-errors').hidden",
        timeout=20_000,
    )


def _wait_job(page):
    page.wait_for_url(re.compile(r"/jobs/(\d+|plan/\d+)/$"))
    page.wait_for_load_state()
    errors = page.locator(".errorlist")
    assert not errors.count(), errors.all_inner_texts()
    page.wait_for_url("**/jobs/*/")
    page.wait_for_selector(
        "[data-testid=job-status].succeeded, [data-testid=job-status].failed", timeout=90_000
    )
    assert page.locator("[data-testid=job-status]").inner_text() == "Succeeded", page.locator(
        "[data-testid=job-error]"
    ).inner_text()


def test_k_anonymity_plan_from_the_forms(
    page, live_server, broker, start_worker, settings, tmp_path
):
    from anonweb.jobs.models import Job
    from anonweb.releases.models import Release

    team = TeamFactory(name="Builders")
    officer = member(team, Role.PRIVACY_OFFICER, username="bella")
    ds = _dataset(officer, team)
    start_worker(broker("filesystem://"))
    login(page, live_server.url, "bella")
    page.goto(f"{live_server.url}/jobs/plan/{ds.pk}/")
    page.wait_for_selector("[data-testid=column-name]")
    assert "k-anonymous" in page.locator("[data-testid=builder-title]").inner_text()

    # the identifier: tokenized instead of dropped
    page.select_option("[data-testid=action-name]", "tokenize")
    assert [s["kind"] for s in _plan_text(page)["steps"]][0] == "tokenize"
    # age: intervals of 10 years, top-coded at 60 (its hierarchy folds under the column)
    page.click("[data-testid=more-age] > summary")
    page.select_option("[data-testid=hierarchy-kind-age]", "interval")
    age = page.locator("[data-testid=hierarchy-age]")
    age.locator("input[name=width]").fill("10")
    age.locator("input[name=top]").fill("60")
    # the search: k = 4, 5% suppression, distinct 2-diversity of the diagnosis
    search = page.locator("[data-testid=search-section]")
    search.locator("input[name=k]").fill("-4")
    page.wait_for_selector("[data-testid=plan-errors] li")
    assert "'k'" in page.locator("[data-testid=plan-errors]").inner_text()  # as typed, with why
    search.locator("input[name=k]").fill("4")
    search.locator("input[name=suppression]").fill("0.05")
    search.locator("[data-testid='sf-add-models']").click()
    search.locator("select[name='models[0].model']").select_option("distinct_l")
    search.locator("select[name='models[0].sensitive']").select_option("diagnosis")
    search.locator("input[name='models[0].l']").fill("2")
    _wait_valid(page)
    plan = _plan_text(page)
    assert plan["hierarchies"]["age"] == {"builder": "interval", "width": 10, "top": 60}
    (opt,) = [s for s in plan["steps"] if s["kind"] == "optimal_generalization"]
    assert opt["params"]["k"] == 4 and opt["params"]["suppression"] == 0.05
    assert opt["params"]["models"] == [{"model": "distinct_l", "sensitive": "diagnosis", "l": 2}]
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "plan-builder.png"), full_page=True)
    page.fill("#id_purpose", "quarterly statistics")
    page.fill("#id_recipient", "research unit")
    page.click("[data-testid=launch-plan]")
    _wait_job(page)
    job = Job.objects.filter(dataset=ds).order_by("-id").first()
    release = Release.objects.get(pk=job.result["release_id"])
    assert release.plan["steps"][0]["kind"] == "tokenize"
    assert release.plan["hierarchies"]["age"] == {"builder": "interval", "width": 10, "top": 60}
    assert "distinct 2-diversity on diagnosis" in json.dumps(release.report)

    # the search's alternatives: pick a point of the scatter, get its plan with fixed levels
    page.wait_for_timeout(1500)  # the job page may still be polling its status
    page.goto(f"{live_server.url}/releases/{release.pk}/", wait_until="domcontentloaded")
    page.wait_for_selector("#chart-alternatives .main-svg")
    (search,) = [s for s in release.report["steps"] if s["kind"] == "optimal_generalization"]
    others = [a for a in search["alternatives"] if not a["optimal"]]
    assert others, "the search should offer other nodes"
    page.evaluate(
        "(levels) => document.getElementById('chart-alternatives')"
        ".emit('plotly_click', {points: [{customdata: JSON.stringify(levels)}]})",
        others[0]["levels"],
    )
    page.wait_for_url("**/jobs/plan/*/?release=*")
    page.wait_for_selector("[data-testid=search-section]")
    picked = [s for s in _plan_text(page)["steps"] if s["kind"] == "optimal_generalization"]
    assert picked[0]["params"]["levels"] == others[0]["levels"]


def test_dp_plan_from_the_forms(page, live_server, broker, start_worker, settings, tmp_path):
    from anonweb.releases.budget import budget_set

    team = TeamFactory(name="DP builders")
    officer = member(team, Role.PRIVACY_OFFICER, username="dora")
    steward = member(team, Role.DATA_STEWARD, username="stan")
    ds = _dataset(officer, team)
    budget_set(user=steward, dataset=ds, epsilon="2", delta="")
    start_worker(broker("filesystem://"))
    login(page, live_server.url, "dora")
    page.goto(f"{live_server.url}/jobs/plan/{ds.pk}/")
    page.wait_for_selector("[data-testid=search-on]")
    page.uncheck("[data-testid=search-on]")
    page.click("[data-testid=dp-add]")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=builder-title]').textContent.includes('Differentially')"
    )
    assert page.locator("[data-testid=search-section]").count() == 0  # no k fields
    dp = page.locator("[data-testid=dp-step]").first
    dp.locator("select[name=kind]").select_option("count")
    dp.locator("input[name=epsilon]").fill("0.5")
    _wait_valid(page)
    assert "ε = 0.5000" in page.locator("[data-testid=live-cost-total]").inner_text()
    plan = _plan_text(page)
    assert [s["kind"] for s in plan["steps"]] == ["drop", "dp_release"]
    page.fill("#id_purpose", "quarterly statistics")
    page.fill("#id_recipient", "research unit")
    page.click("[data-testid=launch-plan]")
    _wait_job(page)
