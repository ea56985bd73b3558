"""Local DP: randomized response keeps the truth with p = e^ε/(e^ε+K−1); debiasing is unbiased."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from anonweb.core.dp.local import (
    debias_counts,
    laplace_measurement,
    randomize_categories,
    randomize_numeric,
    randomized_response_measurement,
    rr_probabilities,
)
from anonweb.core.errors import DataError, ParameterError

CATS = ["A", "B", "C", "D"]
TRUTH = {"A": 600, "B": 250, "C": 100, "D": 50}


@pytest.mark.parametrize(("epsilon", "k"), [(0.1, 2), (1.0, 4), (3.0, 10)])
def test_rr_probabilities_have_ratio_e_to_the_epsilon(epsilon, k):
    p, q = rr_probabilities(epsilon, k)
    assert p / q == pytest.approx(math.exp(epsilon))
    assert p + (k - 1) * q == pytest.approx(1.0)


@pytest.mark.parametrize("epsilon", [0.5, 1.0, 2.0])
def test_reported_epsilon_is_opendp_map(epsilon):
    meas, eps = randomized_response_measurement(CATS, epsilon)
    assert eps == meas.map(1) == pytest.approx(epsilon, rel=1e-9)


def _simulate_rr(truth: dict[str, int], epsilon: float, rng: np.random.Generator) -> dict[str, int]:
    """The mechanism's definition, drawn with numpy so the test is deterministic."""
    cats = list(truth)
    p, _ = rr_probabilities(epsilon, len(cats))
    true = np.repeat(np.arange(len(cats)), list(truth.values()))
    keep = rng.random(len(true)) < p
    other = (true + rng.integers(1, len(cats), len(true))) % len(cats)
    reported = np.where(keep, true, other)
    return {c: int((reported == i).sum()) for i, c in enumerate(cats)}


@pytest.mark.parametrize("epsilon", [0.5, 2.0])
def test_debiasing_is_unbiased_over_many_seeds(epsilon):
    estimates = [
        debias_counts(
            _simulate_rr(TRUTH, epsilon, np.random.default_rng(seed)),
            epsilon=epsilon,
            categories=CATS,
        )
        for seed in range(400)
    ]
    means = pd.DataFrame(estimates).mean()
    sems = pd.DataFrame(estimates).std() / math.sqrt(len(estimates))
    for cat, true in TRUTH.items():
        assert abs(means[cat] - true) < 4 * sems[cat] + 1


def test_opendp_randomized_column_keeps_truth_at_rate_p_and_debiases_close():
    n, epsilon = 3000, 1.5
    rng = np.random.default_rng(1)
    df = pd.DataFrame({"job": rng.choice(CATS, n, p=[0.6, 0.25, 0.1, 0.05]), "x": np.arange(n)})
    result = randomize_categories(df, column="job", epsilon=epsilon, categories=CATS)
    p, _ = rr_probabilities(epsilon, 4)
    kept = int((result.frame["job"] == df["job"]).sum())
    assert stats.binomtest(kept, n, p).pvalue > 1e-4
    true = df["job"].value_counts()
    for cat, estimate in result.report["estimated_counts"].items():
        assert abs(estimate - true[cat]) < 5 * result.report["estimate_sd"]
    assert result.report["epsilon_spent"] == pytest.approx(epsilon)
    assert (result.frame["x"] == df["x"]).all()


def test_declared_categories_include_values_absent_from_the_data():
    df = pd.DataFrame({"c": ["A"] * 200})
    result = randomize_categories(df, column="c", epsilon=0.5, categories=CATS)
    assert set(result.report["estimated_counts"]) == set(CATS)
    assert set(result.frame["c"]) <= set(CATS)
    assert result.report["categories_source"] == "declared"


def test_missing_values_count_only_as_a_declared_category():
    df = pd.DataFrame({"c": ["A", None, "B", "A"] * 50})
    result = randomize_categories(df, column="c", epsilon=1.0, categories=["A", "B", "(missing)"])
    assert set(result.report["estimated_counts"]) == {"A", "B", "(missing)"}
    assert sum(result.report["observed_counts"].values()) == len(df)


def test_missing_values_can_be_reported_as_a_declared_category():
    df = pd.DataFrame({"c": ["A", None, "B", "A"] * 50})
    result = randomize_categories(
        df, column="c", epsilon=1.0, categories=["A", "B"], missing_as="B"
    )
    assert set(result.report["observed_counts"]) == {"A", "B"}
    assert result.frame["c"].notna().all()
    assert result.report["p_keep"] == pytest.approx(rr_probabilities(1.0, 2)[0])


def test_randomized_response_without_declared_categories_is_refused():
    df = pd.DataFrame({"c": ["A", "B"] * 20})
    with pytest.raises(ParameterError, match="needs its public categories"):
        randomize_categories(df, column="c", epsilon=1.0)


def test_numeric_noise_is_laplace_with_range_over_epsilon():
    n, lo, hi, epsilon = 3000, 0.0, 10.0, 2.0
    df = pd.DataFrame({"v": np.full(n, 4.0)})
    result = randomize_numeric(df, column="v", epsilon=epsilon, bounds=(lo, hi))
    scale = result.report["noise"]["scale"]
    assert scale == pytest.approx((hi - lo) / epsilon, rel=1e-6)
    noise = result.frame["v"].to_numpy() - 4.0
    assert stats.kstest(noise, "laplace", args=(0, scale)).pvalue > 1e-4
    meas, _, eps = laplace_measurement((lo, hi), epsilon)
    assert eps == meas.map(hi - lo) <= epsilon


def test_numeric_values_are_clamped_before_noise_and_missing_ones_stand_for_a_declared_value():
    df = pd.DataFrame({"v": [1e9] * 2000 + [None] * 2000})
    out = randomize_numeric(df, column="v", epsilon=5.0, bounds="0,1", missing_as=0).frame["v"]
    assert abs(out.iloc[:2000].mean() - 1.0) < 0.05
    assert out.notna().all() and abs(out.iloc[2000:].mean()) < 0.05


def test_numeric_missing_values_are_refused_unless_they_stand_for_a_value():
    df = pd.DataFrame({"v": [0.5, None]})
    with pytest.raises(DataError, match="1 missing value"):
        randomize_numeric(df, column="v", epsilon=1.0, bounds="0,1")
    with pytest.raises(ParameterError, match="within the bounds"):
        randomize_numeric(df, column="v", epsilon=1.0, bounds="0,1", missing_as=5)


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda df: randomize_categories(df, column="c", epsilon=0), ParameterError),
        (lambda df: randomize_categories(df, column="c", epsilon="x"), ParameterError),
        (lambda df: randomize_categories(df, column="zz", epsilon=1), DataError),
        (lambda df: randomize_categories(df, column="c", epsilon=1, categories=["A"]), DataError),
        (lambda df: randomize_numeric(df, column="v", epsilon=1, bounds=None), ParameterError),
        (lambda df: randomize_numeric(df, column="c", epsilon=1, bounds=(0, 1)), DataError),
    ],
)
def test_bad_input_is_refused(call, error):
    df = pd.DataFrame({"c": ["A", "B"], "v": [1.0, 2.0]})
    with pytest.raises(error):
        call(df)


def test_plan_steps_are_registered_with_a_local_cost():
    from anonweb.core.release.plan import get_step

    spec = get_step("ldp_randomized_response")
    assert spec.privacy_cost({"column": "c", "epsilon": 1.5}) == {"local_epsilon": 1.5}
    assert get_step("ldp_laplace").validate is not None
