"""DuckDB's keyed read of a Parquet file (one integer key per row, coded through the file's
dictionaries) gives the very histogram its grouping by values gives: the same codes, labels
(and their types), counts and weights; a key space past 62 bits falls back to that grouping."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import anonweb.core.engine.duckdb_engine as duckdb_engine
from anonweb.core.engine.duckdb_engine import DuckDBEngine
from anonweb.core.engine.histogram import Histogram, _order_of_distinct
from anonweb.core.engine.pandas_engine import PandasEngine
from tests.core.engine.test_engines import QIS, _table


@pytest.fixture(scope="module")
def duck():
    engine = DuckDBEngine(memory_limit="256MB")
    yield engine
    engine.close()


def _by_values(engine, monkeypatch, *args, **kwargs) -> Histogram:
    with monkeypatch.context() as m:
        m.setattr(duckdb_engine, "key_coding", lambda *a: None)
        return engine.histogram(*args, **kwargs)


def _identical(a: Histogram, b: Histogram) -> None:
    assert (a.quasi_identifiers, a.sensitive) == (b.quasi_identifiers, b.sensitive)
    for c in a.columns:
        assert a.codes[c].dtype == b.codes[c].dtype and np.array_equal(a.codes[c], b.codes[c])
        assert a.labels[c].dtype == b.labels[c].dtype and a.labels[c].equals(b.labels[c])
        assert [type(v) for v in a.labels[c]] == [type(v) for v in b.labels[c]]
    assert a.counts.dtype == b.counts.dtype and np.array_equal(a.counts, b.counts)
    assert (a.weights is None) == (b.weights is None)
    if a.weights is not None:
        assert np.array_equal(a.weights, b.weights)


@pytest.mark.parametrize("seed", range(12))
def test_the_keyed_read_is_the_grouping_by_values_cell_for_cell(tmp_path, duck, monkeypatch, seed):
    df, _ = _table(seed, 1 + seed * 37, seed % 2 == 0)
    n = len(df)
    df["f"] = np.where(np.arange(n) % 3 == 0, np.nan, np.arange(n) % 4 * 0.5)
    df["b"] = pd.array([True, None, False] * (n // 3 + 1), dtype="boolean")[:n]
    df["day"] = pd.to_datetime("2020-01-01") + pd.to_timedelta(np.arange(n) % 5, unit="D")
    path = tmp_path / "t.parquet"
    df.to_parquet(path, row_group_size=max(n // 3, 1))  # several dictionaries per column
    for sensitive in (["disease", "income"], ["f", "b", "day"]):
        keyed = duck._keyed_histogram(path, duck._relation(path), QIS, sensitive, "income")
        assert keyed is not None  # the keyed read ran, not its fallback
        _identical(keyed, _by_values(duck, monkeypatch, path, QIS, sensitive, weights="income"))
        _identical(keyed, duck.histogram(path, QIS, sensitive, weights="income"))
    # and the figures are the in-memory engine's
    assert duck.histogram(path, QIS, ["disease"]).same_as(
        PandasEngine().histogram(df, QIS, ["disease"])
    )


def test_a_key_space_past_62_bits_is_grouped_by_values(tmp_path, duck, monkeypatch):
    # four columns of 2^16 distinct values each: 2^64 combinations, no single int64 key
    n = 1 << 16
    rng = np.random.default_rng(0)
    df = pd.DataFrame({f"c{i}": rng.permutation(n) for i in range(4)})
    path = tmp_path / "wide.parquet"
    df.to_parquet(path)
    cols = list(df.columns)
    assert duck._keyed_histogram(path, duck._relation(path), cols, [], None) is None
    hist = duck.histogram(path, cols)
    _identical(hist, _by_values(duck, monkeypatch, path, cols))
    assert hist.same_as(PandasEngine().histogram(df, cols))


def test_distinct_keys_are_ordered_as_argsort_orders_them():
    rng = np.random.default_rng(3)
    for space in (10, 1 << 20, 1 << 40, 1 << 61):
        keys = rng.choice(min(space, 1 << 40), size=min(space, 5000), replace=False)
        keys = keys.astype(np.int64)
        assert np.array_equal(_order_of_distinct(keys, space), np.argsort(keys))


@pytest.mark.parametrize("keyed", [True, False])
def test_missing_booleans_and_dates_keep_their_kind_on_duckdb(tmp_path, duck, monkeypatch, keyed):
    """A boolean or date column with a missing value reads on DuckDB as the pandas engine reads
    it: booleans stay booleans (not 0.0 / 1.0, which a report would print) and dates stay dates."""
    df = pd.DataFrame(
        {
            "a": ["x", "y", "x", "y", "x"],
            "b": pd.array([True, None, False, True, True], dtype="boolean"),
            "t": pd.to_datetime(["2020-01-01", "2020-01-02", None, "2020-01-01", "2020-01-02"]),
        }
    )
    path = tmp_path / "t.parquet"
    df.to_parquet(path)
    ours = PandasEngine().histogram(path, ["a"], ["b", "t"])
    if keyed:
        theirs = duck.histogram(path, ["a"], ["b", "t"])
    else:
        theirs = _by_values(duck, monkeypatch, path, ["a"], ["b", "t"])
    assert ours.same_as(theirs)
    assert list(theirs.labels["b"][:2]) == [False, True] and pd.isna(theirs.labels["b"][2])
    assert str(theirs.labels["b"].dtype) == "boolean"
    assert pd.api.types.is_datetime64_any_dtype(theirs.labels["t"].dtype)
