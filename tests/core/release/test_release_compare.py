"""Two releases side by side: differences flagged where the stored values differ, and only there;
steps aligned by kind; the safer side named where a figure has a direction."""

from __future__ import annotations

import copy

import pytest

from anonweb.core.release.compare import (
    align,
    compare_findings,
    compare_plans,
    compare_releases,
    compare_utility,
    flatten,
    same,
)

PLAN = {
    "version": 1,
    "quasi_identifiers": ["age", "sex"],
    "sensitive": ["diagnóstico"],
    "hierarchies": {"age": {"builder": "interval", "width": 10}},
    "steps": [
        {"kind": "drop", "params": {"columns": ["name"]}},
        {"kind": "optimal_generalization", "params": {"k": 2, "suppression": 0.0}},
    ],
}


def risk(k: int, classes: int, prosecutor: float, l_distinct: int) -> dict:
    return {
        "k": k,
        "rows": 6,
        "classes": classes,
        "uniques": 0,
        "suppressed": 0,
        "quasi_identifiers": ["age", "sex"],
        "prosecutor_risk": {"max": prosecutor, "mean": prosecutor},
        "journalist_risk": {"max": prosecutor, "mean": prosecutor},
        "marketer_risk": classes / 6,
        "records_at_risk": {"0.2": {"count": 6 if prosecutor > 0.2 else 0, "share": 1.0}},
        "sensitive": {"diagnóstico": {"l_distinct": l_distinct, "t_closeness": 0.5}},
    }


def report(k: int, classes: int, loss: float, levels: dict) -> dict:
    return {
        "steps": [
            {"step": 1, "kind": "drop", "dropped": ["name"]},
            {
                "step": 2,
                "kind": "optimal_generalization",
                "levels": levels,
                "k": k,
                "classes": classes,
                "suppressed": 0,
                "information_loss": loss,
                "information_loss_measure": "ARX's Loss, geometric mean",
                "loss_per_qi": {q: lv / 4 for q, lv in levels.items()},
            },
        ],
        "risk_after": risk(k, classes, 1 / k, 2 if k > 2 else 1),
        "privacy_cost": {},
    }


def by_label(rows) -> dict:
    return {r.label: r for r in rows}


def test_identical_releases_show_no_difference():
    rep = report(2, 3, 0.4, {"age": 1, "sex": 0})
    result = compare_releases(
        plan_a=PLAN, plan_b=copy.deepcopy(PLAN), report_a=rep, report_b=copy.deepcopy(rep)
    )
    assert result.differences == 0
    assert result.plan and result.risk and result.loss
    assert result.findings == ()  # no findings given: an analyst's comparison


def test_a_hand_made_pair_flags_exactly_what_changed():
    plan_b = copy.deepcopy(PLAN)
    plan_b["steps"][1]["params"]["k"] = 3
    result = compare_releases(
        plan_a=PLAN,
        plan_b=plan_b,
        report_a=report(2, 3, 0.4, {"age": 1, "sex": 0}),
        report_b=report(3, 2, 0.6, {"age": 2, "sex": 0}),
    )
    plan = by_label(result.plan)
    changed = {label for label, r in plan.items() if r.differs}
    assert changed == {"Step 2 (optimal_generalization) · k"}
    assert (
        plan["Step 2 (optimal_generalization) · k"].a,
        plan["Step 2 (optimal_generalization) · k"].b,
    ) == (2, 3)
    risk_rows = by_label(result.risk)
    assert risk_rows["k (smallest class)"].differs and risk_rows["k (smallest class)"].better == "b"
    assert risk_rows["Highest prosecutor risk"].better == "b"  # 1/3 < 1/2
    assert not risk_rows["Unique records"].differs
    assert risk_rows["Records with prosecutor risk above 0.2"].a == 6
    assert risk_rows["Records with prosecutor risk above 0.2"].b == 6
    assert risk_rows["diagnóstico: distinct l"].better == "b"
    assert risk_rows["Classes"].differs and risk_rows["Classes"].better is None
    loss = by_label(result.loss)
    assert loss["Level of age"].differs and not loss["Level of sex"].differs
    assert loss["Information loss"].better == "a"
    assert loss["Information loss of age"].a == 0.25 and loss["Information loss of age"].b == 0.5
    assert not loss["Information loss of sex"].differs
    assert result.differences == sum(r.differs for rows in result.sections.values() for r in rows)


def test_an_inserted_step_does_not_shift_the_later_ones():
    plan_b = copy.deepcopy(PLAN)
    plan_b["steps"].insert(1, {"kind": "regex_mask", "params": {"column": "zip"}})
    rows = by_label(compare_plans(PLAN, plan_b))
    assert rows["Step 2 (regex_mask)"].a is None and rows["Step 2 (regex_mask)"].differs
    search = rows["Step 2/3 (optimal_generalization) · k"]
    assert (search.a, search.b, search.differs) == (2, 2, False)


def test_lists_of_values_are_one_parameter_and_nested_objects_are_paths():
    assert flatten({"columns": ["a", "b"], "levels": {"age": 2}}) == {
        "columns": ["a", "b"],
        "levels.age": 2,
    }
    assert flatten({"rows": [{"x": 1}, {"x": 2}]}) == {"rows[1].x": 1, "rows[2].x": 2}
    assert flatten({"params": {}}) == {"params": {}}


@pytest.mark.parametrize(
    "a,b,equal",
    [
        (0.1 + 0.2, 0.3, True),
        (0.3, 0.31, False),
        (1, 1.0, True),
        (True, 1, False),
        (None, 0, False),
        (["a", "b"], ["a", "b"], True),
        (["a", "b"], ["b", "a"], False),
        ({"x": 1}, {"x": 1, "y": 2}, False),
        ("é", "é", True),
    ],
)
def test_same(a, b, equal):
    assert same(a, b) is equal


def test_align_pairs_matching_kinds_and_leaves_the_rest_alone():
    assert align(["a", "b", "c"], ["a", "c"], key=str) == [(0, 0), (1, None), (2, 1)]
    assert align(["a", "x"], ["a", "y"], key=str) == [(0, 0), (1, 1)]


def test_findings_by_code_and_columns():
    a = [
        {"code": "risk_k", "severity": "block", "columns": ["age"], "records": 6},
        {"code": "free_text", "severity": "warn", "columns": ["note"], "records": 1},
    ]
    b = [{"code": "free_text", "severity": "warn", "columns": ["note"], "records": 1}]
    rows = by_label(compare_findings(a, b))
    assert rows["Blocking findings"].a == 1 and rows["Blocking findings"].b == 0
    assert rows["Blocking findings"].better == "b"
    assert rows["risk_k (age)"].a == "block: 6 records" and rows["risk_k (age)"].b is None
    assert not rows["free_text (note)"].differs


def test_dp_releases_compare_spending_and_statistics():
    def dp(eps: float, halfwidth: float, kinds: list[str]) -> dict:
        return {
            "steps": [
                {
                    "step": i,
                    "kind": kind,
                    "columns": ["age"],
                    "epsilon_spent": eps / len(kinds),
                    "delta_spent": 0.0,
                    "privacy_cost": {"epsilon": eps / len(kinds), "delta": 0.0},
                    "ci95_halfwidth": halfwidth,
                    "noise": {"mechanism": "laplace", "scale": 1 / eps},
                }
                for i, kind in enumerate(kinds, 1)
            ],
            "privacy_cost": {"epsilon": eps, "delta": 0.0},
            "risk_after": None,
        }

    plan = {"version": 1, "steps": [{"kind": "dp_release", "params": {"kind": "count"}}]}
    result = compare_releases(
        plan_a=plan,
        plan_b=plan,
        report_a=dp(0.5, 6.4, ["count"]),
        report_b=dp(1.0, 3.2, ["count", "mean"]),
    )
    rows = by_label(result.dp)
    assert rows["ε spent (central)"].better == "a"
    assert "δ spent" not in rows  # neither spends δ
    assert rows["Statistic 1: 95% of values within ±"].better == "b"
    assert rows["Statistic 2: statistic"].a is None and rows["Statistic 2: statistic"].b == "mean"
    assert result.risk == () and result.loss == ()


def test_the_inputs_are_left_untouched():
    plan_b = copy.deepcopy(PLAN)
    rep = report(2, 3, 0.4, {"age": 1, "sex": 0})
    before = (copy.deepcopy(PLAN), copy.deepcopy(rep))
    compare_releases(plan_a=PLAN, plan_b=plan_b, report_a=rep, report_b=rep)
    assert (PLAN, rep) == before


def test_utilities_side_by_side():
    def utility(loss: float, tvd: float, shift: float, halfwidth: float) -> dict:
        return {
            "records_suppressed": 0,
            "information_loss": {"aggregate_value": loss},
            "columns": [
                {"column": "age", "information_loss": loss, "tvd": tvd, "mean_shift": shift},
                {"column": "sex", "tvd": 0.0, "changed_share": 0.0},
            ],
            "dp": [{"kind": "count", "columns": [], "label": "count", "ci95_halfwidth": halfwidth}],
        }

    rows = by_label(compare_utility(utility(0.25, 0.1, -0.5, 6.4), utility(0.5, 0.3, 0.2, 3.2)))
    assert rows["Information loss over the quasi-identifiers"].better == "a"
    assert rows["age: distance from the source's distribution (TVD)"].better == "a"
    assert rows["age: shift of the mean"].better == "b"  # |0.2| < |-0.5|
    assert not rows["sex: share of cells changed"].differs
    assert "sex: shift of the mean" not in rows  # absent on both sides: no row
    assert rows["DP figure 1: 95% interval ±"].better == "b"
    assert compare_utility(None, None) == ()
