"""``anonweb intruder --engine duckdb|spark``: the maximum-knowledge intruder check counted out
of core gives the JSON of the in-memory check (``--engine pandas``) for the same ``--seed``."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.cli.test_anonymize_engines import _spark_ready
from tests.cli.test_engine_option import run


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    folder = tmp_path_factory.mktemp("intruder")
    rng = np.random.default_rng(31)
    n = 800
    x = pd.DataFrame({"age": rng.integers(18, 90, n), "income": rng.integers(1, 60, n) * 1000.0})
    y = x.assign(age=x["age"] + rng.integers(-2, 3, n), income=x["income"] + rng.normal(0, 900, n))
    x.to_parquet(folder / "x.parquet", index=False)
    y.to_parquet(folder / "y.parquet", index=False)
    x.to_csv(folder / "x.csv", index=False)
    y.to_csv(folder / "y.csv", index=False)
    return folder


def intruder(tables, engine, suffix="parquet", *extra):
    p = run(
        "intruder", str(tables / f"x.{suffix}"), str(tables / f"y.{suffix}"),
        "--columns", "age,income", "--seed", "4", "--engine", engine, *extra,
    )  # fmt: skip
    return p


def figures(p):
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads(p.stdout)
    out.pop("peak_memory_bytes")
    return out.pop("engine"), out


@pytest.mark.parametrize("suffix", ["parquet", "csv"])
def test_duckdb_gives_the_in_memory_json(tables, suffix):
    engine, memory = figures(intruder(tables, "pandas", suffix))
    assert engine == "pandas"
    engine, ours = figures(intruder(tables, "duckdb", suffix, "--memory-limit", "200MB"))
    assert engine == "duckdb"
    assert ours == memory
    assert 0 < memory["correct_link_share"] < 1 and memory["n_records"] == 800


@pytest.mark.slow
@pytest.mark.skipif(not _spark_ready(), reason="Spark needs pyspark and a Java runtime")
def test_spark_gives_the_in_memory_json(tables, monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    monkeypatch.setenv("ANONWEB_SPARK_MASTER", "local[2]")
    _, memory = figures(intruder(tables, "pandas"))
    engine, ours = figures(intruder(tables, "spark"))
    assert engine == "spark" and ours == memory


def test_the_euclidean_metric_is_refused_out_of_core(tables):
    p = intruder(tables, "duckdb", "parquet", "--metric", "euclidean")
    assert p.returncode == 2
    assert "euclidean metric" in p.stderr and "--engine pandas" in p.stderr
