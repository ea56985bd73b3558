"""Population uniqueness as a privacy model (ARX's PopulationUniqueness criterion)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from anonweb.core.errors import ParameterError
from anonweb.core.io.hierarchy import Hierarchy
from anonweb.core.io.hierarchy_builders import interval_hierarchy, mask_hierarchy
from anonweb.core.models import class_data, model_from_dict
from anonweb.core.models.population_uniqueness import PopulationUniqueness, estimated_uniqueness
from anonweb.core.release.plan import plan_from_dict
from anonweb.core.release.policy import PolicyThresholds, evaluate_release
from anonweb.core.release.run import apply_plan
from anonweb.core.search.flash import optimal_generalization
from tests.core import oracle


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


def test_the_sample_as_its_own_population_has_its_own_uniques():
    sizes = np.array([1, 1, 1, 2, 5])
    assert estimated_uniqueness(sizes, 10, "dankar") == pytest.approx(3 / 10)
    assert estimated_uniqueness(sizes, 10, "zayatz") == pytest.approx(3 / 10)
    assert estimated_uniqueness(np.array([2, 3]), 10**6, "pitman") == 0.0


@pytest.mark.parametrize("seed", range(5))
def test_zayatz_equals_the_formula_written_from_the_paper(seed):
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 6, 60)
    population = int(sizes.sum()) * int(rng.integers(3, 50))
    got = estimated_uniqueness(sizes, population, "zayatz")
    assert got == pytest.approx(oracle.zayatz_share(sizes.tolist(), population), rel=1e-9)


def test_no_estimate_for_a_table_with_uniques_fails_as_arx_rules():
    # one class of one: Pitman's fit has nothing to fit, so no estimate; ARX accepts an
    # estimate of 0 only without sample uniques
    model = PopulationUniqueness(0.5, 1000, "pitman")
    data = class_data(pd.DataFrame({"a": [1]}), quasi_identifiers=["a"])
    check = model.check(data)
    assert not check.satisfied and check.value is None


def test_parameters_are_checked():
    with pytest.raises(ParameterError):
        PopulationUniqueness(0.0, 100)
    with pytest.raises(ParameterError):
        PopulationUniqueness(0.1, 100, "guess")
    with pytest.raises(ParameterError, match="needs population_size"):
        model_from_dict({"model": "population_uniqueness", "max": 0.1})
    spec = {"model": "population_uniqueness", "max": 0.1, "population_size": 5000}
    assert model_from_dict(spec).to_dict() == {**spec, "estimator": "dankar"}
    data = class_data(pd.DataFrame({"a": range(10)}), quasi_identifiers=["a"])
    with pytest.raises(ParameterError, match="cannot be smaller"):
        PopulationUniqueness(0.1, 5).check(data)


@pytest.mark.parametrize(
    "seed,k,suppression,ceiling,population",
    [
        (31, 1, 0.0, 0.002, 2000),
        (32, 1, 0.1, 0.001, 5000),
        (33, 2, 0.05, 0.0005, 20000),
        (34, 1, 0.2, 0.02, 150),
        (35, 1, 0.0, 0.05, 150),
    ],
)
def test_search_optimum_equals_brute_force_over_the_lattice(
    seed, k, suppression, ceiling, population
):
    df, hierarchies = _toy(seed)
    qis = ["age", "zip", "sex"]
    model = PopulationUniqueness(ceiling, population, "zayatz")
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


def test_the_claim_of_no_monotonicity_is_needed():
    """Generalizing can raise the estimate (the fitted shape changes), so the model must not
    claim monotonicity: on random tables some generalization of a passing node fails."""
    found = 0
    for seed in range(30):
        df, hierarchies = _toy(seed, n=80)
        qis = ["age", "zip", "sex"]
        for population in (200, 2000):
            values = []
            for level in range(len(hierarchies["age"].rows[0])):
                out = df.assign(age=hierarchies["age"].generalize(df["age"], level))
                data = class_data(out, quasi_identifiers=qis)
                values.append(estimated_uniqueness(data.sizes, population, "zayatz"))
            found += any(b > a + 1e-12 for a, b in zip(values, values[1:], strict=False))
    assert found > 0


def _released():
    df, hierarchies = _toy(4, n=300)
    plan = {
        "quasi_identifiers": ["age", "sex"],
        "hierarchies": {"age": {"builder": "interval", "width": 20}},
        "steps": [{"kind": "generalize", "params": {"levels": {"age": 1}}}],
    }
    out, _report = apply_plan(df, plan_from_dict(plan), rng=np.random.default_rng(1), secrets={})
    tags = {"age": "quasi_identifier", "sex": "quasi_identifier"}
    return df, out, plan, tags


def test_the_gate_holds_a_release_to_the_policys_ceiling():
    df, out, plan, tags = _released()
    data = class_data(out, quasi_identifiers=["age", "sex"])
    sizes = data.sizes.copy()
    sizes[0] = 1  # the toy release has no uniques; measure one that would
    population = 3000
    worst = PopulationUniqueness(1.0, population, "zayatz").check(data).value
    assert worst is not None
    spec = {"model": "population_uniqueness", "population_size": population, "estimator": "zayatz"}
    if worst == 0:
        # no sample uniques: any ceiling passes, as in ARX
        policy = PolicyThresholds(max_prosecutor_risk=1.0, models=[{**spec, "max": 1e-9}])
        result = evaluate_release(df, out, plan=plan, tags=tags, thresholds=policy)
        assert not [f for f in result.findings if f.code == "risk_model"]
        out = out.copy()
        out.loc[out.index[0], "age"] = "unique-age"
        worst = (
            PopulationUniqueness(1.0, population, "zayatz")
            .check(class_data(out, quasi_identifiers=["age", "sex"]))
            .value
        )
    assert worst is not None and worst > 0
    strict = PolicyThresholds(max_prosecutor_risk=1.0, models=[{**spec, "max": worst / 2}])
    result = evaluate_release(df, out, plan=plan, tags=tags, thresholds=strict)
    found = [f for f in result.findings if f.code == "risk_model"]
    assert len(found) == 1 and found[0].blocks
    assert "population uniqueness" in found[0].message
    assert found[0].facts["value"] == pytest.approx(worst)
    loose = PolicyThresholds(max_prosecutor_risk=1.0, models=[{**spec, "max": min(1.0, worst)}])
    result = evaluate_release(df, out, plan=plan, tags=tags, thresholds=loose)
    assert not [f for f in result.findings if f.code == "risk_model"]
    assert not math.isnan(worst)
