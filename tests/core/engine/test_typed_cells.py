"""Each engine reads a Parquet cell of every Arrow type as the same value
(:mod:`anonweb.core.io.arrow_cells`) and writes a node's label for it: a histogram's values
mapped to labels are found again in the rows by every engine, whatever the column's type
(sub-second and zoned timestamps, dates, float32, integers and booleans with blanks, a
dictionary column)."""

from __future__ import annotations

import importlib.util
import shutil

import pandas as pd
import pyarrow.parquet as pq
import pytest

from anonweb.core.engine.base import ColumnMapping, NodeRelease
from anonweb.core.engine.duckdb_engine import DuckDBEngine
from anonweb.core.engine.pandas_engine import PandasEngine
from anonweb.core.io.arrow_cells import read_parquet
from anonweb.core.io.frame import read_table
from tests.cli.test_engines_column_types import _table

COLUMNS = ["ts", "tsutc", "tsparis", "day", "f32", "f64", "i8", "i64", "flag", "s", "cat"]


def _label(value) -> str | None:
    return None if pd.isna(value) else f"<{value}>"


def _released(engine, path, tmp_path) -> pd.DataFrame:
    """Every column mapped to a label of its value as the engine's histogram holds it."""
    mappings = []
    for c in COLUMNS:
        values = engine.histogram(path, [c]).labels[c]
        mappings.append(ColumnMapping(c, values, tuple(_label(v) for v in values)))
    node = NodeRelease(mappings=mappings, quasi_identifiers=COLUMNS, drop=("g",))
    out = tmp_path / f"{engine.name}.parquet"
    engine.write_release(path, node, out)
    return read_parquet(out)


def _check(engine, tmp_path) -> None:
    path = tmp_path / "t.parquet"
    pq.write_table(_table(), path)
    source = read_table(path)
    want = pd.DataFrame({c: [_label(v) for v in source[c].tolist()] for c in COLUMNS}, dtype=object)
    got = _released(engine, path, tmp_path)
    # every value found again (a value the join missed would come out blank)
    assert got.isna().sum().to_dict() == want.isna().sum().to_dict()
    rows = sorted(map(tuple, got[COLUMNS].astype(str).to_numpy().tolist()))
    assert rows == sorted(map(tuple, want.astype(str).to_numpy().tolist()))
    assert "<0.1>" in set(got["f32"]) and "<2021-03-04 10:00:00.250000>" in set(got["ts"])


@pytest.mark.parametrize("name", ["pandas", "duckdb"])
def test_each_engine_finds_every_typed_value_it_counted(tmp_path, name):
    engine = PandasEngine() if name == "pandas" else DuckDBEngine(memory_limit="256MB")
    try:
        _check(engine, tmp_path)
    finally:
        engine.close()


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("pyspark") is None or shutil.which("java") is None,
    reason="Spark needs pyspark and a Java runtime",
)
def test_spark_finds_every_typed_value_it_counted(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    from anonweb.core.engine.spark_engine import SparkEngine

    engine = SparkEngine(master="local[2]")
    try:
        _check(engine, tmp_path)
    finally:
        engine.close()
