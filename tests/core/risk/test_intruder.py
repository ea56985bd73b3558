"""The maximum-knowledge intruder reproduces the permutation-paradigm findings."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from anonweb.core.errors import DataError, ParameterError
from anonweb.core.risk.intruder import intruder_check, permutation_distances, reverse_map

COLS = ["a", "b", "c", "d"]


def correlated(n: int, seed: int, rho: float = 0.5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    cov = np.full((4, 4), rho) + np.eye(4) * (1 - rho)
    scale = np.array([1.0, 10.0, 100.0, 0.1])
    return pd.DataFrame(rng.multivariate_normal(np.zeros(4), cov, size=n) * scale, columns=COLS)


def additive_noise(df: pd.DataFrame, seed: int, share: float = 0.01) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return df + rng.normal(0, np.sqrt(share * df.var().to_numpy()), size=df.shape)


def mvn_synthetic(df: pd.DataFrame, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    data = rng.multivariate_normal(df.mean().to_numpy(), df.cov().to_numpy(), size=len(df))
    return pd.DataFrame(data, columns=df.columns)


def test_reverse_mapping_is_a_permutation_with_the_anonymized_ranks():
    x = correlated(300, 1)
    y = additive_noise(x, 2, share=0.5)
    z = reverse_map(x, y, columns=COLS)
    for col in COLS:
        assert sorted(z[col]) == sorted(x[col])
        assert (z[col].rank().to_numpy() == y[col].rank().to_numpy()).all()


def test_permutation_distance_is_zero_for_a_monotone_masking():
    x = correlated(200, 3)
    assert permutation_distances(x, x * 2 + 1, columns=COLS).max() == 0
    swapped = x.copy()
    swapped.loc[[0, 1], "a"] = swapped.loc[[1, 0], "a"].to_numpy()
    d = permutation_distances(x, swapped, columns=COLS)
    assert d[0] == d[1] > 0 and d[2:].max() == 0


@pytest.mark.parametrize("metric", ["rank", "euclidean"])
def test_additive_noise_at_one_percent_is_not_deniable(metric):
    x = correlated(1500, 4)
    result = intruder_check(
        x, additive_noise(x, 5), columns=COLS, rng=np.random.default_rng(6), metric=metric
    )
    assert result.not_deniable_share > 0.15  # three times the 5% expected by chance
    assert result.correct_link_share > 0.5


@pytest.mark.parametrize("metric", ["rank", "euclidean"])
def test_multivariate_normal_synthetic_data_is_deniable(metric):
    x = correlated(1500, 7)
    result = intruder_check(
        x, mvn_synthetic(x, 8), columns=COLS, rng=np.random.default_rng(9), metric=metric
    )
    assert result.not_deniable_share < 0.08
    assert result.correct_link_share < 0.02


def test_more_noise_makes_links_deniable():
    x = correlated(1000, 10)
    shares = [
        intruder_check(
            x, additive_noise(x, 11, s), columns=COLS, rng=np.random.default_rng(12)
        ).not_deniable_share
        for s in (0.01, 0.1, 1.0)
    ]
    assert shares[0] > shares[1] > shares[2]
    assert shares[2] < 0.08


def test_report_has_both_distributions_on_shared_bins_and_no_input_mutation():
    x = correlated(400, 13)
    y = additive_noise(x, 14)
    before = x.copy()
    report = intruder_check(
        x, y, columns=COLS, rng=np.random.default_rng(15), n_baseline=500
    ).to_dict()
    pd.testing.assert_frame_equal(x, before)
    assert report["match_distances"]["bin_edges"] == report["baseline_distances"]["bin_edges"]
    assert sum(report["match_distances"]["counts"]) == 400
    assert sum(report["baseline_distances"]["counts"]) == 500
    assert 0 <= report["not_deniable_share"] <= 1


def test_attribute_baseline_follows_the_seed_definition():
    x = correlated(800, 16, rho=0.0)
    result = intruder_check(
        x, mvn_synthetic(x, 17), columns=COLS, rng=np.random.default_rng(18), baseline="attributes"
    )
    assert result.not_deniable_share < 0.1


def test_ordered_categorical_columns_are_ranked_by_category_order():
    levels = ["low", "mid", "high"]
    x = pd.DataFrame(
        {
            "g": pd.Categorical(["low", "high", "mid", "mid"], categories=levels, ordered=True),
            "v": [1, 2, 3, 4],
        }
    )
    assert permutation_distances(x, x, columns=["g", "v"]).max() == 0


@pytest.mark.parametrize(
    ("original", "anonymized", "columns", "error"),
    [
        (pd.DataFrame({"a": [1, 2, 3]}), pd.DataFrame({"a": [1, 2]}), ["a"], DataError),
        (pd.DataFrame({"a": ["x", "y"]}), pd.DataFrame({"a": ["x", "y"]}), ["a"], DataError),
        (pd.DataFrame({"a": [1.0, None]}), pd.DataFrame({"a": [1, 2]}), ["a"], DataError),
        (pd.DataFrame({"a": [1, 2]}), pd.DataFrame({"a": [1, 2]}), ["zz"], DataError),
        (pd.DataFrame({"a": [1, 2]}), pd.DataFrame({"a": [1, 2]}), [], ParameterError),
    ],
)
def test_bad_input_is_refused(original, anonymized, columns, error):
    with pytest.raises(error):
        intruder_check(original, anonymized, columns=columns, rng=np.random.default_rng(0))
