"""Enhanced β-likeness (anonweb.core.models.beta_likeness): a hand-worked table, the figure
against a brute-force count, the search's optimum against the exhaustive one, and the model as a
team-policy threshold at the release gate."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pandas as pd
import pytest

from anonweb.core.assessment.profile import assess_risk
from anonweb.core.errors import ParameterError
from anonweb.core.io.hierarchy import Hierarchy
from anonweb.core.io.hierarchy_builders import interval_hierarchy, mask_hierarchy
from anonweb.core.models import ClassData, class_data, model_from_dict
from anonweb.core.models.beta_likeness import BetaLikeness
from anonweb.core.models.counts import sensitive_domain
from anonweb.core.release.plan import plan_from_dict
from anonweb.core.release.policy import PolicyThresholds, evaluate_release
from anonweb.core.release.run import apply_plan
from anonweb.core.search.flash import optimal_generalization
from tests.core import oracle

# 10 records: flu 5 (p = 0.5), cold 3 (p = 0.3), hiv 2 (p = 0.2)
#   class a: flu 1, cold 2, hiv 2 -> gains -0.6, 1/3, 1.0; caps 0.69, 1.20, 1.61 -> β = 1.0
#   class b: flu 4, cold 1        -> gains 0.6, -1/3;      flu's cap ln 2 = 0.693 -> β = 0.6
HAND = pd.DataFrame(
    {
        "zip": ["a"] * 5 + ["b"] * 5,
        "disease": ["flu", "cold", "cold", "hiv", "hiv", "flu", "flu", "flu", "flu", "cold"],
    }
)


def _data(df: pd.DataFrame) -> ClassData:
    return class_data(df, quasi_identifiers=["zip"], sensitive=["disease"])


def test_hand_worked_figures():
    figures = BetaLikeness("disease", 1.0).measure(_data(HAND))
    assert figures.tolist() == pytest.approx([1.0, 0.6])


@pytest.mark.parametrize(
    "beta,satisfied,failing_classes,failing_records",
    [(1.0, True, 0, 0), (5.0, True, 0, 0), (0.99, False, 1, 5), (0.5, False, 2, 10)],
)
def test_hand_worked_check(beta, satisfied, failing_classes, failing_records):
    check = BetaLikeness("disease", beta).check(_data(HAND))
    assert check.satisfied is satisfied
    assert check.value == pytest.approx(1.0)
    assert (check.failing_classes, check.failing_records) == (failing_classes, failing_records)


def test_the_minus_ln_cap_binds_a_frequent_value():
    # class b all flu: gain (1 - 0.5) / 0.5 = 1.0 <= β = 2, but above flu's cap ln 2, so it fails
    # for every β (basic β-likeness would accept it); its figure is infinite
    df = pd.DataFrame(
        {"zip": ["a"] * 6 + ["b"] * 4, "disease": ["cold"] * 5 + ["flu"] + ["flu"] * 4}
    )
    model = BetaLikeness("disease", 2.0)
    figures = model.measure(_data(df))
    assert figures[1] == np.inf
    assert figures[0] == pytest.approx((5 / 6 - 0.5) / 0.5)
    assert model.passes(_data(df)).tolist() == [True, False]
    assert model.check(_data(df)).value is None  # infinite: stored reports hold no infinity
    profile = assess_risk(df, quasi_identifiers=["zip"], sensitive=["disease"])
    assert profile.to_dict()["sensitive"]["disease"]["beta_likeness"] is None  # ∞ in JSON


def test_parameters_are_checked():
    with pytest.raises(ParameterError, match="β"):
        BetaLikeness("disease", 0)
    with pytest.raises(ParameterError):
        model_from_dict({"model": "beta_likeness", "sensitive": "disease"})
    spec = {"model": "beta_likeness", "sensitive": "disease", "beta": 1.0}
    assert model_from_dict(spec) == BetaLikeness("disease", 1.0)
    assert BetaLikeness("disease", 1.0).to_dict() == spec


def _brute_figure(values: list, table: Counter) -> float:
    total, n = sum(table.values()), len(values)
    worst = 0.0
    for v, c in Counter(values).items():
        p = table[v] / total
        gain = (c / n - p) / p
        if gain > -math.log(p) + 1e-12:
            return math.inf
        worst = max(worst, gain)
    return worst


@pytest.mark.parametrize("seed", range(6))
def test_figures_equal_a_brute_force_count_on_both_paths(seed):
    rng = np.random.default_rng(seed)
    n = 60
    df = pd.DataFrame(
        {
            "zip": rng.choice(list("abcdefg"), n),
            "disease": rng.choice(["flu", "cold", "hiv", "ulcer"], n, p=[0.5, 0.3, 0.15, 0.05]),
        }
    )
    data = _data(df)
    sparse = BetaLikeness("disease", 1.0).measure(data)
    table = Counter(df["disease"])
    order = pd.unique(df["zip"])
    expected = [_brute_figure(list(df.loc[df["zip"] == z, "disease"]), table) for z in order]
    assert sparse.tolist() == pytest.approx(expected)
    # the dense histograms the search keeps give the same figures
    domain, codes = sensitive_domain(df["disease"])
    cls = pd.Series(pd.Categorical(df["zip"], categories=order)).cat.codes.to_numpy()
    hist = np.zeros((len(order), len(domain.values)))
    np.add.at(hist, (cls, codes), 1)
    dense = ClassData(hist.sum(axis=1), histograms=lambda name: (domain, hist))
    assert BetaLikeness("disease", 1.0).measure(dense).tolist() == pytest.approx(expected)


def _toy(seed: int, n: int = 120) -> tuple[pd.DataFrame, dict[str, Hierarchy]]:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "age": rng.integers(18, 80, n),
            "zip": rng.choice(["47677", "47602", "47678", "47905", "47909", "47906"], n),
            "sex": rng.choice(["F", "M"], n),
            "disease": rng.choice(
                ["flu", "ulcer", "cancer", "gastritis"], n, p=[0.4, 0.3, 0.2, 0.1]
            ),
        }
    )
    hierarchies = {
        "age": interval_hierarchy(df["age"], width=5, fanout=2, attribute="age"),
        "zip": mask_hierarchy(df["zip"], attribute="zip"),
        "sex": Hierarchy(rows=(("F", "*"), ("M", "*")), attribute="sex"),
    }
    return df, hierarchies


@pytest.mark.parametrize(
    "seed,k,suppression,beta",
    [
        (21, 2, 0.1, 1.0),
        (22, 3, 0.05, 0.8),
        (23, 2, 0.2, 1.5),
        (24, 1, 0.1, 0.6),
        (25, 4, 0.0, 2.0),
    ],
)
def test_search_optimum_equals_brute_force_over_the_lattice(seed, k, suppression, beta):
    df, hierarchies = _toy(seed)
    qis = ["age", "zip", "sex"]
    model = BetaLikeness("disease", beta)
    specs = [{"model": "k_anonymity", "k": k}, model.to_dict()]
    rows = {q: [list(r) for r in hierarchies[q].rows] for q in qis}
    expected = oracle.brute_force(df, rows, qis, specs, suppression, "geometric")
    assert expected is not None
    score, node, _losses, suppressed = expected
    result = optimal_generalization(
        df,
        quasi_identifiers=qis,
        hierarchies=hierarchies,
        k=k,
        suppression=suppression,
        models=[model],
    )
    assert tuple(result.levels[q] for q in qis) == node
    assert result.suppressed == suppressed
    assert result.information_loss == pytest.approx(score[0], abs=1e-9)


def _released():
    rng = np.random.default_rng(4)
    n = 400
    df = pd.DataFrame(
        {
            "age": rng.integers(20, 80, n),
            "sex": rng.choice(["F", "M"], n),
            "disease": rng.choice(["flu", "asthma", "diabetes", "hiv"], n, p=[0.4, 0.3, 0.2, 0.1]),
        }
    )
    plan = {
        "quasi_identifiers": ["age", "sex"],
        "sensitive": ["disease"],
        "hierarchies": {"age": {"builder": "interval", "width": 20}},
        "steps": [{"kind": "generalize", "params": {"levels": {"age": 1}}}],
    }
    out, _report = apply_plan(df, plan_from_dict(plan), rng=np.random.default_rng(1), secrets={})
    tags = {"age": "quasi_identifier", "sex": "quasi_identifier", "disease": "sensitive"}
    return df, out, plan, tags


def test_the_gate_holds_a_release_to_the_policys_beta():
    df, out, plan, tags = _released()
    exclude = np.zeros(len(out), dtype=bool)
    data = class_data(out, quasi_identifiers=["age", "sex"], sensitive=["disease"], exclude=exclude)
    worst = BetaLikeness("disease", 1.0).check(data).value
    assert worst is not None and 0 < worst < 10
    base = [{"model": "k_anonymity", "k": 2}, {"model": "distinct_l", "l": 1}]

    strict = PolicyThresholds(
        max_prosecutor_risk=1.0, models=[*base, {"model": "beta_likeness", "beta": worst / 2}]
    )
    result = evaluate_release(df, out, plan=plan, tags=tags, thresholds=strict)
    found = [f for f in result.findings if f.code == "risk_model"]
    assert len(found) == 1 and found[0].blocks
    assert found[0].columns == ("disease",)
    assert found[0].facts["value"] == pytest.approx(worst)
    assert "likeness on disease" in found[0].message
    assert result.risk["beta_likeness"]["disease"] == pytest.approx(worst)

    loose = PolicyThresholds(
        max_prosecutor_risk=1.0, models=[*base, {"model": "beta_likeness", "beta": worst}]
    )
    result = evaluate_release(df, out, plan=plan, tags=tags, thresholds=loose)
    assert not [f for f in result.findings if f.code == "risk_model"]
    # a spec naming another column leaves this one alone
    other = PolicyThresholds(
        max_prosecutor_risk=1.0,
        models=[*base, {"model": "beta_likeness", "sensitive": "elsewhere", "beta": 0.01}],
    )
    result = evaluate_release(df, out, plan=plan, tags=tags, thresholds=other)
    assert not [f for f in result.findings if f.code == "risk_model"]


def test_a_policy_round_trips_and_keeps_k_l_t():
    policy = PolicyThresholds(
        models=[
            {"model": "k_anonymity", "k": 4},
            {"model": "distinct_l", "l": 3},
            {"model": "t_closeness", "t": 0.3},
            {"model": "beta_likeness", "beta": 1.5},
        ]
    )
    assert (policy.k, policy.l, policy.t) == (4, 3, 0.3)
    again = PolicyThresholds.from_dict(policy.to_dict())
    assert again == policy
    with pytest.raises(ParameterError):
        PolicyThresholds(models=[{"model": "beta_likeness", "beta": -1}])
    with pytest.raises(ParameterError):
        PolicyThresholds(models=[{"model": "no_such_model"}])
