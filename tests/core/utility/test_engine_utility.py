"""The utility of a release an engine wrote (:func:`engine_release_utility`) is the one measured
in memory (:func:`release_utility`) on the same two tables, on every engine: the same
distributions, counts, total variation distances and suppressed cells and records (means and
standard deviations to 1e-12: each engine sums in its own order). Both come from the one
comparison of counts (:func:`compare_counts`), and the in-memory figures are checked against
hand-worked ones."""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd
import pytest

from anonweb.core.engine.duckdb_engine import DuckDBEngine
from anonweb.core.engine.pandas_engine import PandasEngine
from anonweb.core.errors import ParameterError
from anonweb.core.release.engine_release import make_engine_release
from anonweb.core.release.plan import plan_from_dict
from anonweb.core.utility.measures import engine_release_utility, release_utility
from tests.core.release.test_engine_release import TAGS, _plan, _table

SUMMED = {"mean", "std", "mean_shift", "std_shift"}  # figures each engine sums its own way


def same(a, b, path="", summed=False) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        assert list(a) == list(b), (path, sorted(set(a) ^ set(b)))
        for key in a:
            same(a[key], b[key], f"{path}.{key}", summed or key in SUMMED)
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), (path, a, b)
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{path}[{i}]", summed)
    elif summed and isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-12), (path, a, b)
    else:
        assert type(a) is type(b) and a == b, (path, a, b)


def _tables(seed: int = 0, n: int = 2000) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A source and a release of it with every kind of column the comparison knows: numbers
    kept, numbers perturbed (with blanks, NaN and an infinity), numbers released as intervals
    and ``*``, text with blanks and ``*``, booleans, and suppressed records."""
    rng = np.random.default_rng(seed)
    age = rng.integers(17, 90, n)
    income = np.round(rng.lognormal(10, 1, n), 2)
    city = rng.choice(
        ["Lyon", " Lyon", "Nice", "Paris", None, "Brest"] + [f"c{i}" for i in range(20)], n
    )
    source = pd.DataFrame(
        {
            "age": age,
            "zip": rng.choice(["47677", "47602", "47678"], n),
            "city": city,
            "income": income,
            "score": rng.integers(0, 7, n),
            "flag": rng.random(n) < 0.3,
            "code": rng.integers(0, 4, n).astype(str),
        }
    )
    starred = rng.random(n) < 0.05
    released = pd.DataFrame(
        {
            "age": np.where(starred, "*", [f"[{a // 10 * 10}-{a // 10 * 10 + 10}[" for a in age]),
            "zip": np.where(starred, "*", [z[:4] + "*" for z in source["zip"]]),
            "city": np.where(rng.random(n) < 0.1, "*", city),
            "income": income + rng.normal(0, 500, n),
            "score": source["score"].to_numpy(),
            "flag": source["flag"].to_numpy(),
            "code": rng.integers(0, 4, n).astype(float),  # text in the source, numbers here
        }
    )
    released.loc[::37, "income"] = np.nan
    released.loc[5, "income"] = np.inf
    released = released.iloc[rng.permutation(n)].reset_index(drop=True)
    return source, released


REPORT = {"risk_before": {"quasi_identifiers": ["age", "zip"]}, "steps": []}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    source, released = _tables()
    folder = tmp_path_factory.mktemp("utility")
    source.to_parquet(folder / "source.parquet", index=False)
    released.to_parquet(folder / "release.parquet", index=False)
    return folder / "source.parquet", folder / "release.parquet"


def _in_memory(source_path, released_path, report=REPORT, bins=20):
    return release_utility(
        pd.read_parquet(source_path), pd.read_parquet(released_path), report=report, bins=bins
    ).to_dict()


@pytest.mark.parametrize("make", [PandasEngine, DuckDBEngine], ids=["pandas", "duckdb"])
def test_an_engine_measures_what_memory_measures(files, make):
    engine = make()
    try:
        got = engine_release_utility(engine, *files, report=REPORT).to_dict()
    finally:
        engine.close()
    expected = _in_memory(*files)
    same(got, expected)
    kinds = {c["column"]: c["kind"] for c in got["columns"]}
    assert kinds == {
        "age": "categorical",  # numbers released as intervals
        "zip": "categorical",
        "city": "categorical",
        "income": "numeric",
        "score": "numeric",
        "flag": "categorical",
        "code": "categorical",  # text released as numbers
    }
    assert got["records_suppressed"] > 0
    assert not got["matched"]


@pytest.mark.slow
def test_spark_measures_what_memory_measures(files):
    got = engine_release_utility(_engine("spark"), *files, report=REPORT).to_dict()
    same(got, _in_memory(*files))


def test_the_figures_of_a_small_release_by_hand(tmp_path):
    source = pd.DataFrame(
        {"age": [20, 21, 30, 39, 50], "sex": ["F", "F", "M", None, "M"], "x": [1.0, 2, 3, 4, 5]}
    )
    released = pd.DataFrame(
        {
            "age": ["[20-30[", "[20-30[", "[30-40[", "[30-40[", "*"],
            "sex": ["F", "F", "*", "*", "*"],
            "x": [1.0, 2, 3, np.nan, 6],
        }
    )
    source.to_parquet(tmp_path / "s.parquet", index=False)
    released.to_parquet(tmp_path / "r.parquet", index=False)
    report = {"risk_before": {"quasi_identifiers": ["age", "sex"]}, "steps": []}
    engine = DuckDBEngine()
    try:
        got = engine_release_utility(
            engine, tmp_path / "s.parquet", tmp_path / "r.parquet", report=report, bins=5
        ).to_dict()
    finally:
        engine.close()
    same(got, _in_memory(tmp_path / "s.parquet", tmp_path / "r.parquet", report, bins=5))
    assert got["records_suppressed"] == 1  # the last row: "*" in age and sex
    col = {c["column"]: c for c in got["columns"]}
    # sex: F 2, M 2, (missing) 1 against F 2, * 3: ½(0 + 2/5 + 1/5 + 3/5) = 0.6
    assert col["sex"]["tvd"] == pytest.approx(0.6, abs=1e-15)
    assert col["sex"]["suppressed"] == 3
    assert col["age"]["original"]["kind"] == "histogram" and col["age"]["tvd"] is None
    assert col["age"]["original"]["edges"] == [20.0, 27.0, 34.0, 41.0, 48.0, 55.0]
    assert col["age"]["original"]["counts"] == [2, 1, 1, 0, 1]
    # x: whole numbers 1..6 in five bins of width 2 ([1,3[, [3,5[, [5,7[, ...): 2,2,1 against
    # 2,1,1 and one blank; ½(0 + 1/5 + 0 + 1/5) = 0.2
    assert col["x"]["original"]["edges"] == [1.0, 3.0, 5.0, 7.0]
    assert col["x"]["original"]["counts"] == [2, 2, 1]
    assert col["x"]["released"]["counts"] == [2, 1, 1] and col["x"]["released"]["missing"] == 1
    assert col["x"]["tvd"] == pytest.approx(0.2, abs=1e-15)
    assert col["x"]["mean"] == {"original": 3.0, "released": 3.0}
    assert col["x"]["std"]["original"] == pytest.approx(math.sqrt(2), rel=1e-15)


def _engine(name: str):
    if name == "spark":
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        from anonweb.core.engine.spark_engine import SparkEngine

        return SparkEngine(master="local[2]")
    return PandasEngine() if name == "pandas" else DuckDBEngine()


@pytest.mark.parametrize(
    "engine_name", ["pandas", "duckdb", pytest.param("spark", marks=pytest.mark.slow)]
)
def test_an_engine_release_measures_its_utility_as_memory_does(tmp_path, engine_name):
    df = _table(4, 1200)
    plan = _plan({"k": 5, "suppression": 0.05})
    source = tmp_path / "source.parquet"
    df.to_parquet(source, index=False)
    out = tmp_path / "release.parquet"
    engine = _engine(engine_name)
    try:
        made = make_engine_release(
            source, plan_from_dict(plan), engine=engine, out=out, rng=np.random.default_rng(1),
            tags=TAGS,
        )  # fmt: skip
        got = engine_release_utility(engine, source, out, report=made.report, plan=plan)
    finally:
        engine.close()
    expected = release_utility(df, pd.read_parquet(out), report=made.report, plan=plan)
    same(got.to_dict(), expected.to_dict())
    assert got.loss is not None and got.loss.source == "search"
    search = next(s for s in made.report["steps"] if s["kind"] == "optimal_generalization")
    assert got.records_suppressed == search["suppressed"] > 0
    assert got.loss.per_qi == search["loss_per_qi"]


def test_a_release_of_figures_is_measured_in_memory(files):
    report = {"steps": [{"kind": "count", "step": 1, "value": 10.0, "noise": "laplace"}]}
    engine = DuckDBEngine()
    try:
        with pytest.raises(ParameterError, match="in memory"):
            engine_release_utility(engine, *files, report=report)
    finally:
        engine.close()
