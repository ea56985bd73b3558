"""The intruder check counted from distinct records (the in-memory path and every engine's):
the same figures as a record-by-record computation, and the same to the last bit on the pandas,
DuckDB and Spark engines as in memory, on random tables with and without ties."""

from __future__ import annotations

import importlib.util
import shutil

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import rankdata

from anonweb.core.assessment.intruder_engine import (
    intruder_check_of_release,
    intruder_check_on_engine,
)
from anonweb.core.engine.duckdb_engine import DuckDBEngine
from anonweb.core.engine.lineage import LINEAGE_COLUMN
from anonweb.core.engine.pandas_engine import PandasEngine
from anonweb.core.errors import DataError, ParameterError
from anonweb.core.risk.intruder import distinct_rows, intruder_check, weighted_percentiles

COLS = ["a", "b", "c"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(-50, 50), st.integers(1, 6)), min_size=1, max_size=30),
    st.lists(st.floats(0, 100), min_size=1, max_size=9),
)
def test_weighted_percentiles_are_numpys_of_the_repeated_values(pairs, q):
    values = np.array([v / 4 for v, _ in pairs])
    counts = np.array([c for _, c in pairs])
    expected = np.percentile(np.repeat(values, counts), q)
    assert weighted_percentiles(values, counts, q).tolist() == expected.tolist()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(1, 5)), max_size=40))
def test_distinct_rows_are_numpys_unique_rows(rows):
    matrix = np.array([[a, b / 2] for a, b, _ in rows], dtype=float).reshape(-1, 2)
    counts = np.array([c for *_, c in rows], dtype=np.int64)
    distinct, summed, inverse = distinct_rows(matrix, counts)
    expected, back = np.unique(matrix, axis=0, return_inverse=True)
    assert distinct.tolist() == expected.tolist()
    assert inverse.tolist() == back.reshape(-1).tolist()
    assert summed.tolist() == np.bincount(back.reshape(-1), counts, len(expected)).tolist()


def table(n: int, seed: int, *, ties: bool) -> tuple[pd.DataFrame, pd.DataFrame]:
    """An original and a noisy copy: small integers (many tied records and ranks) or floats."""
    rng = np.random.default_rng(seed)
    if ties:
        x = pd.DataFrame({c: rng.integers(0, 6, n) for c in COLS})
        y = x + rng.integers(-1, 2, size=x.shape)
    else:
        x = pd.DataFrame({c: rng.normal(0, 10, n) for c in COLS})
        y = x + rng.normal(0, 1, size=x.shape)
    return x, y


def by_record(x: pd.DataFrame, y: pd.DataFrame, threshold: float) -> dict[str, float]:
    """The rank metric record by record: each record's match distance (Chebyshev, in ranks, to
    every anonymized record), its chance of being linked to its own record when the intruder
    picks among the closest at random, and its permutation distance."""
    rx = np.column_stack([rankdata(x[c]) for c in COLS])
    ry = np.column_stack([rankdata(y[c]) for c in COLS])
    dist = np.abs(rx[:, None, :] - ry[None, :, :]).max(axis=2)
    match = dist.min(axis=1)
    closest = dist == match[:, None]
    own = np.diag(closest) / closest.sum(axis=1)
    perm = np.abs(rx - ry).max(axis=1)
    return {
        "correct_link_share": float(own.mean()),
        "not_deniable_share": float((match < threshold).mean()),
        "match_median": float(np.median(match)),
        "match_max": float(match.max()),
        "permutation_p95": float(np.percentile(perm, 95)),
        "permutation_mean": float(perm.mean()),
    }


@pytest.mark.parametrize("ties", [True, False])
def test_the_figures_are_those_of_a_record_by_record_computation(ties):
    x, y = table(300, 4, ties=ties)
    result = intruder_check(x, y, columns=COLS, rng=np.random.default_rng(5)).to_dict()
    expected = by_record(x, y, result["threshold"])
    assert result["correct_link_share"] == pytest.approx(expected["correct_link_share"])
    assert result["not_deniable_share"] == expected["not_deniable_share"]
    assert result["match_distances"]["summary"]["median"] == expected["match_median"]
    assert result["match_distances"]["summary"]["max"] == expected["match_max"]
    assert result["permutation_distance"]["p95"] == expected["permutation_p95"]
    assert result["permutation_distance"]["mean"] == pytest.approx(expected["permutation_mean"])
    assert sum(result["match_distances"]["counts"]) == 300


def test_a_tied_link_counts_as_the_chance_of_picking_ones_own():
    # two records alike in both tables: the intruder cannot tell them apart (1/2 each); the
    # third is linked to its own for sure
    x = pd.DataFrame({"a": [1, 1, 5], "b": [2, 2, 9]})
    result = intruder_check(x, x.copy(), columns=["a", "b"], rng=np.random.default_rng(0))
    assert result.correct_link_share == pytest.approx((0.5 + 0.5 + 1) / 3)


def _spark_ready() -> bool:
    return importlib.util.find_spec("pyspark") is not None and shutil.which("java") is not None


def on_engine(engine, x, y, tmp_path, **kw):
    x.to_parquet(tmp_path / "x.parquet", index=False)
    y.to_parquet(tmp_path / "y.parquet", index=False)
    duck = DuckDBEngine(memory_limit="200MB")
    try:
        return intruder_check_on_engine(
            duck if engine is None else engine,
            duck,
            str(tmp_path / "x.parquet"),
            str(tmp_path / "y.parquet"),
            columns=COLS,
            rng=np.random.default_rng(9),
            workdir=tmp_path,
            **kw,
        ).to_dict()
    finally:
        duck.close()


@pytest.mark.parametrize("ties", [True, False])
@pytest.mark.parametrize("baseline", ["records", "attributes"])
@pytest.mark.parametrize("engine", ["pandas", "duckdb"])
def test_an_engine_gives_the_in_memory_figures(tmp_path, engine, baseline, ties):
    x, y = table(700, 7 if ties else 8, ties=ties)
    y = y.sample(frac=1, random_state=1).reset_index(drop=True)  # rows apart: few own links
    y.iloc[:350] = x.iloc[:350] + y.iloc[:350] - y.iloc[:350].round()  # half close to their own
    memory = intruder_check(
        x, y, columns=COLS, rng=np.random.default_rng(9), baseline=baseline
    ).to_dict()
    ours = on_engine(
        PandasEngine() if engine == "pandas" else None, x, y, tmp_path, baseline=baseline
    )
    assert ours == memory
    assert 0 < memory["correct_link_share"] < 1


@pytest.mark.slow
@pytest.mark.skipif(not _spark_ready(), reason="Spark needs pyspark and a Java runtime")
@pytest.mark.parametrize("ties", [True, False])
def test_spark_gives_the_in_memory_figures(tmp_path, ties, monkeypatch):
    from anonweb.core.engine.spark_engine import SparkEngine

    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    engine = SparkEngine(master="local[2]")
    try:
        x, y = table(500, 11 if ties else 12, ties=ties)
        memory = intruder_check(x, y, columns=COLS, rng=np.random.default_rng(9)).to_dict()
        assert on_engine(engine, x, y, tmp_path) == memory
    finally:
        engine.close()


def test_an_engine_refuses_what_the_in_memory_check_refuses(tmp_path):
    x, y = table(50, 3, ties=True)
    with pytest.raises(DataError, match="50 rows and the anonymized table 49"):
        on_engine(None, x, y.iloc[:49], tmp_path)
    with pytest.raises(DataError, match="anonymized column 'b' has 2 missing values"):
        on_engine(None, x, y.astype(float).assign(b=[np.nan] * 2 + [1.0] * 48), tmp_path)
    with pytest.raises(DataError, match="original column 'a' is not numeric"):
        on_engine(None, x.astype({"a": str}).assign(a=["x"] * 50), y, tmp_path)
    with pytest.raises(ParameterError, match="euclidean metric"):
        on_engine(None, x, y, tmp_path, metric="euclidean")


@pytest.mark.parametrize("engine", ["pandas", "duckdb"])
def test_a_shuffled_release_is_paired_with_its_source_through_its_lineage(tmp_path, engine):
    x, y = table(400, 21, ties=True)
    order = np.random.default_rng(22).permutation(len(x))
    x.to_parquet(tmp_path / "x.parquet", index=False)
    y.iloc[order].to_parquet(tmp_path / "release.parquet", index=False)
    pd.DataFrame({LINEAGE_COLUMN: order}).to_parquet(tmp_path / "lineage.parquet", index=False)
    duck = DuckDBEngine(memory_limit="200MB")
    try:
        ours = intruder_check_of_release(
            PandasEngine() if engine == "pandas" else duck,
            duck,
            str(tmp_path / "x.parquet"),
            str(tmp_path / "release.parquet"),
            str(tmp_path / "lineage.parquet"),
            columns=COLS,
            rng=np.random.default_rng(23),
            workdir=tmp_path,
        ).to_dict()
    finally:
        duck.close()
    memory = intruder_check(x, y, columns=COLS, rng=np.random.default_rng(23)).to_dict()
    assert ours == memory
