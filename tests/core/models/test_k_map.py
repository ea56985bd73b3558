"""k-map with an estimated population (ARX's KMap with the D3 / D4 estimators)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from anonweb.core.errors import ParameterError
from anonweb.core.io.hierarchy import Hierarchy
from anonweb.core.io.hierarchy_builders import interval_hierarchy, mask_hierarchy
from anonweb.core.models import class_data, model_from_dict
from anonweb.core.models.base import PrivacyModel
from anonweb.core.models.k_map import KMap, derived_k
from anonweb.core.release.plan import plan_from_dict
from anonweb.core.release.policy import PolicyThresholds, evaluate_release
from anonweb.core.release.run import apply_plan
from anonweb.core.search.flash import optimal_generalization
from tests.core import oracle


def arx_derived_k(k, rows, population, estimator, alpha):
    """ARX's KMap.initialize, written again with scipy's Poisson law (its loops as ARX has them:
    the Poisson one returns one past the count it stopped at)."""
    lam = rows / population * k
    law = stats.poisson(lam)
    if estimator == "poisson":
        counter, value = 0, 0.0
        while value < 1 - alpha:
            value = law.cdf(counter)
            counter += 1
        found = counter + 1
    else:
        counter, value = 1, 0.0
        while value < 1 - alpha:
            value += law.pmf(counter) / (1 - law.pmf(0))
            counter += 1
        found = counter
    return max(1, min(k, found, rows))


@pytest.mark.parametrize(
    "k,rows,population,estimator,alpha",
    [
        (k, rows, pop, est, alpha)
        for k in (1, 2, 5, 10, 50)
        for rows, pop in ((100, 100), (1000, 5000), (30162, 300000), (500, 10**7))
        for est in ("poisson", "zero_truncated_poisson")
        for alpha in (0.01, 0.1)
    ],
)
def test_derived_k_equals_arxs_loops(k, rows, population, estimator, alpha):
    assert derived_k(k, rows, population, estimator, alpha) == arx_derived_k(
        k, rows, population, estimator, alpha
    )


def test_a_smaller_sampling_fraction_asks_less_of_each_class():
    ks = [derived_k(10, 1000, pop, "poisson", 0.01) for pop in (1000, 2000, 10**4, 10**6)]
    assert ks == sorted(ks, reverse=True) and ks[0] == 10 and ks[-1] < 10


def test_parameters_are_checked():
    with pytest.raises(ParameterError):
        KMap(0, 100)
    with pytest.raises(ParameterError):
        KMap(5, 100, "binomial")
    with pytest.raises(ParameterError):
        KMap(5, 100, significance=1.5)
    # without a population size, k-map needs a population table: refused when none is bound
    with pytest.raises(ParameterError, match="needs a population table"):
        model_from_dict({"model": "k_map", "k": 5}).with_population(None)
    with pytest.raises(ParameterError, match="unknown parameter"):
        model_from_dict({"model": "k_map", "k": 5, "population_size": 9, "population_table": "x"})
    spec = {"model": "k_map", "k": 5, "population_size": 5000}
    assert model_from_dict(spec).to_dict() == {
        **spec,
        "estimator": "poisson",
        "significance": 0.01,
    }
    data = class_data(pd.DataFrame({"a": range(10)}), quasi_identifiers=["a"])
    with pytest.raises(ParameterError, match="cannot be smaller"):
        KMap(2, 5).check(data)


def _toy(seed: int, n: int = 150):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "age": rng.integers(18, 80, n),
            "zip": rng.choice(["47677", "47602", "47678", "47905", "47909", "47906"], n),
            "sex": rng.choice(["F", "M"], n),
        }
    )
    hierarchies = {
        "age": interval_hierarchy(df["age"], width=5, fanout=2, attribute="age"),
        "zip": mask_hierarchy(df["zip"], attribute="zip"),
        "sex": Hierarchy(rows=(("F", "*"), ("M", "*")), attribute="sex"),
    }
    return df, hierarchies


@pytest.mark.parametrize(
    "seed,k,population,estimator,suppression",
    [
        (41, 10, 300, "poisson", 0.05),
        (42, 10, 3000, "poisson", 0.0),
        (43, 20, 1500, "zero_truncated_poisson", 0.1),
        (44, 5, 150, "poisson", 0.02),
    ],
)
def test_search_optimum_equals_brute_force_over_the_lattice(
    seed, k, population, estimator, suppression
):
    df, hierarchies = _toy(seed)
    qis = ["age", "zip", "sex"]
    model = KMap(k, population, estimator)
    # the reference: k-anonymity with ARX's derived k, computed by the scipy version
    k_prime = arx_derived_k(k, len(df), population, estimator, 0.01)
    rows = {q: [list(r) for r in hierarchies[q].rows] for q in qis}
    expected = oracle.brute_force(
        df, rows, qis, [{"model": "k_anonymity", "k": k_prime}], suppression, "geometric"
    )
    assert expected is not None
    score, node, _losses, suppressed = expected
    result = optimal_generalization(
        df, quasi_identifiers=qis, hierarchies=hierarchies, suppression=suppression, models=[model]
    )
    assert tuple(result.levels[q] for q in qis) == node
    assert result.suppressed == suppressed
    assert result.information_loss == pytest.approx(score[0], abs=1e-9)


def _failing_records_never_grow(model: PrivacyModel, df, hierarchies) -> bool:
    """What the search's monotonicity claim promises: generalizing one column one level never
    adds records to failing classes (so a node within the suppression limit keeps every
    generalization of it within the limit)."""
    qis = list(hierarchies)
    heights = [len(hierarchies[q].rows[0]) for q in qis]
    failing = {}
    for node in itertools.product(*[range(h) for h in heights]):
        out = df.assign(**{q: hierarchies[q].generalize(df[q], lv) for q, lv in zip(qis, node)})
        data = class_data(out, quasi_identifiers=qis)
        failing[node] = int(data.sizes[~model.passes(data)].sum())
    for node, bad in failing.items():
        for i in range(len(node)):
            up = tuple(lv + (j == i) for j, lv in enumerate(node))
            if up in failing and failing[up] > bad:
                return False
    return True


class _ShrinkingKMap(KMap):
    """A broken model claiming monotonicity: it wants *at most* k' people per class."""

    def passes(self, data):
        rows = int(data.sizes.sum())
        return np.asarray(data.sizes <= self.derived(rows))


@pytest.mark.parametrize("seed", range(6))
def test_the_monotonicity_claim_holds_on_random_tables(seed):
    df, hierarchies = _toy(100 + seed, n=60)
    rng = np.random.default_rng(seed)
    model = KMap(int(rng.integers(2, 12)), int(rng.integers(60, 2000)))
    assert model.monotonic
    assert _failing_records_never_grow(model.for_table(len(df)), df, hierarchies)


def test_a_broken_claim_is_caught():
    df, hierarchies = _toy(7, n=60)
    broken = _ShrinkingKMap(3, 100)
    assert broken.monotonic  # claimed, wrongly
    assert not _failing_records_never_grow(broken, df, hierarchies)


def _released():
    df, _hierarchies = _toy(4, n=300)
    plan = {
        "quasi_identifiers": ["age", "sex"],
        "hierarchies": {"age": {"builder": "interval", "width": 20}},
        "steps": [{"kind": "generalize", "params": {"levels": {"age": 1}}}],
    }
    out, _report = apply_plan(df, plan_from_dict(plan), rng=np.random.default_rng(1), secrets={})
    tags = {"age": "quasi_identifier", "sex": "quasi_identifier"}
    return df, out, plan, tags


def test_the_gate_holds_a_release_to_the_policys_k_map():
    df, out, plan, tags = _released()
    smallest = int(class_data(out, quasi_identifiers=["age", "sex"]).sizes.min())
    # the sample is the population: k-map is k-anonymity, and k above the smallest class fails
    strict = {"model": "k_map", "k": smallest + 1, "population_size": len(out)}
    policy = PolicyThresholds(max_prosecutor_risk=1.0, models=[strict])
    result = evaluate_release(df, out, plan=plan, tags=tags, thresholds=policy)
    found = [f for f in result.findings if f.code == "risk_model"]
    assert len(found) == 1 and found[0].blocks
    assert f"{smallest + 1}-map" in found[0].message
    # from a population a hundred times larger, that k asks for far fewer records per class
    loose = {**strict, "population_size": 100 * len(out)}
    assert derived_k(smallest + 1, len(out), 100 * len(out), "poisson", 0.01) <= smallest
    policy = PolicyThresholds(max_prosecutor_risk=1.0, models=[loose])
    result = evaluate_release(df, out, plan=plan, tags=tags, thresholds=policy)
    assert not [f for f in result.findings if f.code == "risk_model"]


def test_the_risk_after_measures_the_population_models_on_the_release():
    df, hierarchies = _toy(45)
    plan = plan_from_dict(
        {
            "quasi_identifiers": ["age", "zip", "sex"],
            "hierarchies": {
                q: {"rows": [list(r) for r in hierarchies[q].rows]} for q in hierarchies
            },
            "steps": [
                {
                    "kind": "optimal_generalization",
                    "params": {
                        "suppression": 0.05,
                        "models": [
                            {"model": "k_map", "k": 10, "population_size": 3000},
                            {
                                "model": "population_uniqueness",
                                "max": 0.01,
                                "population_size": 3000,
                            },
                        ],
                    },
                }
            ],
        }
    )
    out, report = apply_plan(df, plan, rng=np.random.default_rng(0), secrets={})
    after = report.risk_after
    assert after is not None
    checks = {c["model"]["model"]: c for c in after["population_models"]}
    assert set(checks) == {"k_map", "population_uniqueness"}
    assert all(c["satisfied"] for c in checks.values())
    assert after["population"]["population_size"] == 3000
