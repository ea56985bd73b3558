"""The plan page as the plan is written: the release gate's findings that the plan and the tags
decide, answered by the check endpoint (the core policy's own subset), and the privacy cost shown
before the budget it is taken from."""

import json

import pytest
from django.urls import reverse

pytestmark = pytest.mark.django_db

HIERARCHIES = {
    "zip": {"builder": "mask"},
    "age": {"builder": "interval", "width": 10},
    "sex": {"rows": [["F", "*"], ["M", "*"]]},
}


def _check(client, dataset, steps):
    plan = {
        "version": 1,
        "quasi_identifiers": ["zip", "age", "sex"],
        "hierarchies": HIERARCHIES,
        "steps": steps,
    }
    response = client.post(
        reverse("jobs:plan_check", args=[dataset.pk]),
        json.dumps(plan),
        content_type="application/json",
    )
    assert response.status_code == 200
    return response.json()


SEARCH = {"kind": "optimal_generalization", "params": {"k": 2, "suppression": 0.0}}


def test_an_identifier_the_plan_leaves_as_it_is_is_a_finding(client, officer, dataset):
    client.force_login(officer)
    answer = _check(client, dataset, [SEARCH])
    assert answer["errors"] == []
    [finding] = answer["findings"]
    assert finding["code"] == "identifier_released" and finding["columns"] == ["name"]
    assert finding["severity"] == "block" and finding["records"] == dataset.rows == 6
    assert "no step of the plan changes or drops it" in finding["message"]
    dropped = _check(client, dataset, [{"kind": "drop", "params": {"columns": ["name"]}}, SEARCH])
    assert dropped["findings"] == []
    tokenized = _check(
        client,
        dataset,
        [{"kind": "tokenize", "params": {"columns": ["name"], "key": "release-key"}}, SEARCH],
    )
    assert tokenized["findings"] == []


def test_untagged_columns_and_missing_quasi_identifiers_are_findings(client, officer, dataset):
    from anonweb.datasets.services import dataset_set_tags

    dataset_set_tags(
        user=officer,
        dataset=dataset,
        tags={"name": "identifier", "zip": "other", "age": "other", "sex": "other", "disease": ""},
    )
    client.force_login(officer)
    response = client.post(
        reverse("jobs:plan_check", args=[dataset.pk]),
        json.dumps({"version": 1, "steps": [{"kind": "drop", "params": {"columns": ["name"]}}]}),
        content_type="application/json",
    )
    answer = response.json()
    assert answer["errors"] == []
    codes = sorted((f["code"], tuple(f["columns"])) for f in answer["findings"])
    assert codes == [("column_untagged", ("disease",)), ("no_quasi_identifiers", ())]


def test_an_invalid_plan_has_errors_and_no_findings(client, officer, dataset):
    client.force_login(officer)
    answer = _check(client, dataset, [{"kind": "drop", "params": {"columns": ["nope"]}}])
    assert answer["errors"] and "findings" not in answer


def test_the_check_is_for_officers_of_the_team(client, steward, outsider, dataset):
    for user, status in ((steward, 403), (outsider, 404)):
        client.force_login(user)
        response = client.post(
            reverse("jobs:plan_check", args=[dataset.pk]), "{}", content_type="application/json"
        )
        assert response.status_code == status


def test_the_previewed_cost_comes_before_the_budget(client, officer, steward, dataset):
    from anonweb.releases.budget import budget_set

    budget_set(user=steward, dataset=dataset, epsilon=2.0)
    client.force_login(officer)
    plan = {
        "version": 1,
        "steps": [
            {"kind": "drop", "params": {"columns": ["name"]}},
            {
                "kind": "dp_release",
                "params": {"kind": "count", "epsilon": 0.5},
            },
        ],
    }
    page = client.post(
        reverse("jobs:plan", args=[dataset.pk]),
        {"title": "t", "purpose": "p", "recipient": "r", "plan": json.dumps(plan), "preview": "1"},
    ).content.decode()
    privacy = page.split('data-testid="privacy"')[1]
    assert privacy.index('data-testid="plan-cost"') < privacy.index('data-testid="ledger-summary"')
    assert "This plan spends ε = 0.5000" in privacy


def test_the_check_says_whether_the_cost_fits_the_budget(client, officer, steward, dataset):
    from anonweb.releases.budget import budget_set

    client.force_login(officer)
    plan = {
        "version": 1,
        "steps": [{"kind": "dp_release", "params": {"kind": "count", "epsilon": 0.5}}],
    }
    url = reverse("jobs:plan_check", args=[dataset.pk])

    def check():
        return client.post(url, json.dumps(plan), content_type="application/json").json()

    unset = check()["budget"]
    assert "no privacy budget is set" in unset["problem"]
    budget_set(user=steward, dataset=dataset, epsilon=2.0)
    fits = check()["budget"]
    assert fits["problem"] is None and fits["remaining"]["epsilon"] == 2.0
    budget_set(user=steward, dataset=dataset, epsilon=0.25)
    short = check()["budget"]
    assert "only ε = 0.25 of the budget" in short["problem"]


def test_a_plan_the_worker_could_not_run_is_refused_alike_everywhere(client, officer, dataset):
    """Microaggregating a quasi-identifier that the search generalizes: the live check, the page
    and the API give the same reason, once, before any job exists."""
    from anonweb.jobs.models import Job

    client.force_login(officer)
    steps = [
        {"kind": "drop", "params": {"columns": ["name"]}},
        {"kind": "microaggregation", "params": {"columns": ["age"], "k": 2}},
        SEARCH,
    ]
    reason = (
        "step 3 (optimal_generalization): it generalizes 'age' with its hierarchy, which lists "
        "the source's values, but step 2 (microaggregation) changes those values first"
    )
    live = _check(client, dataset, steps)["errors"]
    assert len(live) == 1 and live[0].startswith(reason)
    plan = {
        "version": 1,
        "quasi_identifiers": ["zip", "age", "sex"],
        "hierarchies": HIERARCHIES,
        "steps": steps,
    }
    page = client.post(
        reverse("jobs:plan", args=[dataset.pk]),
        {"title": "t", "purpose": "p", "recipient": "r", "plan": json.dumps(plan)},
    )
    assert page.status_code == 400
    assert page.context["form"].errors["plan"] == live
    api = client.post(
        f"/api/v1/datasets/{dataset.pk}/releases/",
        {"title": "t", "purpose": "p", "recipient": "r", "plan": plan},
        content_type="application/json",
    )
    assert api.status_code == 400 and api.json()["errors"] == live
    assert not Job.objects.filter(dataset=dataset).exists()
