"""Mondrian local recoding."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anonweb.core.errors import DataError, ParameterError
from anonweb.core.search.mondrian import mondrian


def _numeric(seed: int, n: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "age": rng.integers(18, 90, n),
            "income": rng.lognormal(10, 1, n).round(),
            "hours": rng.integers(1, 80, n),
        }
    )


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 400), k=st.integers(1, 20))
def test_every_partition_has_k_rows_and_contains_its_records(seed, n, k):
    df = _numeric(seed, n)
    if k > n:
        with pytest.raises(ParameterError):
            mondrian(df, quasi_identifiers=list(df.columns), k=k)
        return
    result = mondrian(df, quasi_identifiers=list(df.columns), k=k)
    sizes = np.bincount(result.partition)
    assert sizes.min() >= k and result.smallest == sizes.min()
    for d, col in enumerate(df.columns):
        lo, hi = result.lower[d][result.partition], result.upper[d][result.partition]
        assert ((df[col].to_numpy() >= lo) & (df[col].to_numpy() <= hi)).all()
    # strict: equal quasi-identifier tuples never end up in different partitions
    together = pd.Series(result.partition).groupby([df[c] for c in df.columns]).nunique()
    assert (together == 1).all()


def test_output_classes_and_labels():
    df = _numeric(1, 2000)
    before = df.copy()
    result = mondrian(df, quasi_identifiers=["age", "income"], k=10)
    out = result.apply(df)
    assert out.groupby(["age", "income"]).size().min() >= 10
    assert out["hours"].equals(df["hours"])
    assert out["age"].str.match(r"^\d+(-\d+)?$").all()
    assert 0 < result.information_loss < 1
    pd.testing.assert_frame_equal(df, before)


def test_splits_until_it_cannot():
    df = pd.DataFrame({"x": np.arange(100)})
    result = mondrian(df, quasi_identifiers=["x"], k=5)
    assert result.partitions >= 10 and np.bincount(result.partition).max() < 10


def test_missing_values_rejected():
    df = pd.DataFrame({"x": [1.0, None, 3.0]})
    with pytest.raises(DataError, match="missing"):
        mondrian(df, quasi_identifiers=["x"], k=1)
