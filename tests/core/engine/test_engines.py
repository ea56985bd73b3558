"""The engines read the same table into the same histogram, and everything measured from it is
the same on every engine: risk profile, search optimum, release.

pandas and DuckDB run on every test run; Spark (a JVM, seconds to start) shares one session for
the whole test session and its tests are marked slow.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anonweb.core.assessment.profile import assess_histogram, assess_risk
from anonweb.core.engine.base import ColumnMapping, NodeRelease, peak_memory_bytes
from anonweb.core.engine.duckdb_engine import DuckDBEngine
from anonweb.core.engine.histogram import histogram_of_frame
from anonweb.core.engine.pandas_engine import PandasEngine
from anonweb.core.engine.select import choose_engine, make_engine
from anonweb.core.errors import DataError, ParameterError
from anonweb.core.io.hierarchy import Hierarchy
from anonweb.core.io.hierarchy_builders import interval_hierarchy, mask_hierarchy
from anonweb.core.models import DistinctL, TCloseness
from anonweb.core.search.flash import optimal_generalization, search_histogram
from anonweb.core.search.release_node import node_release

QIS = ["age", "zip", "sex"]
ROOT = Path(__file__).resolve().parents[3]


def _table(seed: int, n: int, missing: bool) -> tuple[pd.DataFrame, dict[str, Hierarchy]]:
    """A small table with numbers, text, missing values and a skewed sensitive column."""
    rng = np.random.default_rng(seed)
    age = rng.integers(18, 60, n).astype(float)
    zips = rng.choice(["47677", "47602", "47678", "47905", "47909"], n).astype(object)
    if missing:  # the first row keeps its values: a hierarchy is built over what is there
        age[1:][rng.random(n - 1) < 0.05] = np.nan
        zips[1:][rng.random(n - 1) < 0.05] = None
    df = pd.DataFrame(
        {
            "age": age,
            "zip": zips,
            "sex": rng.choice(["F", "M"], n),
            "disease": rng.choice(["flu", "ulcer", "cancer"], n, p=[0.5, 0.3, 0.2]),
            "income": rng.integers(0, 4, n),
        }
    )
    hierarchies = {
        "age": interval_hierarchy(df["age"].dropna(), width=5, fanout=2, attribute="age"),
        "zip": mask_hierarchy(df["zip"].dropna(), attribute="zip"),
        "sex": Hierarchy(rows=(("F", "*"), ("M", "*")), attribute="sex"),
    }
    return df, hierarchies


def _to_1e12(value):
    """Floats to 12 significant digits, through dicts and lists: engines number the sensitive
    values in their own order, so a class's terms may be added in another order and differ in
    the last bit; the contract is the same figures to 1e-9."""
    if isinstance(value, dict):
        return {k: _to_1e12(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_1e12(v) for v in value]
    if isinstance(value, float):
        return float(f"{value:.12g}")
    return value


def _summary(profile_dict: dict) -> dict:
    """A profile's figures with the disclosing classes as a set (their order among classes of
    equal size follows the class numbering, which differs between a table and a histogram)."""
    d = _to_1e12(json.loads(json.dumps(profile_dict)))
    for s in d["sensitive"].values():
        s["disclosing_classes"] = sorted(
            json.dumps(c, sort_keys=True) for c in s["disclosing_classes"]
        )
    return d


def _figures(result) -> dict:
    d = result.to_dict()
    d.pop("search")
    return d


@pytest.fixture(scope="module")
def duck():
    engine = DuckDBEngine(memory_limit="256MB")
    yield engine
    engine.close()


TABLES = st.tuples(st.integers(0, 10_000), st.integers(1, 200), st.booleans())
SEARCH = st.tuples(st.integers(1, 6), st.sampled_from([0.0, 0.05, 0.1]))


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(table=TABLES)
def test_pandas_and_duckdb_count_the_same_cells_and_measure_the_same_risk(tmp_path, duck, table):
    df, _ = _table(*table)
    path = tmp_path / "t.parquet"
    df.to_parquet(path)
    from_frame = PandasEngine().histogram(df, QIS, ["disease", "income"])
    from_duck = duck.histogram(path, QIS, ["disease", "income"])
    assert from_duck.same_as(from_frame)
    assert from_duck.rows == len(df) and int(from_duck.class_sizes.sum()) == len(df)
    profile = assess_histogram(from_duck, population_size=10 * len(df)).to_dict()
    assert _to_1e12(profile) == _to_1e12(
        assess_histogram(from_frame, population_size=10 * len(df)).to_dict()
    )
    # and the same figures as the table's own profile, grouped from its rows (every disclosing
    # class listed: which of equally large ones make a shorter list follows the class order)
    every = {"population_size": 10 * len(df), "disclosing_limit": len(df)}
    rows = assess_risk(df, quasi_identifiers=QIS, sensitive=["disease", "income"], **every)
    whole = assess_histogram(from_duck, **every).to_dict()
    assert _summary(whole) == _summary(rows.to_dict())


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(table=TABLES, search=SEARCH, l_model=st.booleans())
def test_the_search_from_a_duckdb_histogram_finds_the_tables_optimum(
    tmp_path, duck, table, search, l_model
):
    df, hierarchies = _table(*table)
    k, suppression = search
    k = min(k, len(df))
    models = [DistinctL("disease", 2)] if l_model else [TCloseness("disease", 0.4)]
    path = tmp_path / "t.parquet"
    df.to_parquet(path)
    hist = duck.histogram(path, QIS, ["disease"])
    try:
        expected = optimal_generalization(
            df,
            quasi_identifiers=QIS,
            hierarchies=hierarchies,
            k=k,
            suppression=suppression,
            models=models,
        )
    except ParameterError:
        with pytest.raises(ParameterError, match="no generalization satisfies"):
            search_histogram(
                hist, hierarchies=hierarchies, k=k, suppression=suppression, models=models
            )
        return
    got = search_histogram(
        hist, hierarchies=hierarchies, k=k, suppression=suppression, models=models
    )
    assert _figures(got) == _figures(expected)


@pytest.mark.parametrize("k,suppression", [(3, 0.0), (4, 0.05), (6, 0.1)])
def test_each_engine_writes_the_release_the_search_decided(tmp_path, duck, k, suppression):
    df, hierarchies = _table(7, 400, True)
    path = tmp_path / "t.parquet"
    df.to_parquet(path)
    hist = duck.histogram(path, QIS, ["disease"])
    result = search_histogram(hist, hierarchies=hierarchies, k=k, suppression=suppression)
    expected = optimal_generalization(
        df, quasi_identifiers=QIS, hierarchies=hierarchies, k=k, suppression=suppression
    ).apply(df)
    node = node_release(result, hist, hierarchies)
    for engine in (PandasEngine(), duck):
        out = tmp_path / f"{engine.name}.parquet"
        written = engine.write_release(path, node, out)
        assert (written.rows, written.suppressed) == (len(df), result.suppressed)
        assert _rows(pd.read_parquet(out)) == _rows(expected)


@pytest.mark.parametrize("suffix", ["csv", "parquet"])
def test_columns_named_as_the_engines_own_are_counted_and_released_as_any(tmp_path, duck, suffix):
    # __n and __w name the count and the weights' sum, __drop and __sup the suppression flags:
    # a table's own columns of those names are read as its columns, never in their place.
    df, hierarchies = _table(7, 400, True)
    df = df.assign(__drop=False, __sup=True, __n="x", __w=1.0)
    path = tmp_path / f"t.{suffix}"
    if suffix == "csv":
        df.to_csv(path, index=False)
        df = pd.read_csv(path, dtype={"zip": object})
    else:
        df.to_parquet(path)
    for qis in (QIS, [*QIS, "__n"]):
        counted = duck.histogram(path, qis, ["disease"], weights="__w")
        assert counted.same_as(PandasEngine().histogram(path, qis, ["disease"], weights="__w"))
        assert counted.rows == len(df)
    hist = duck.histogram(path, QIS, ["disease"])
    result = search_histogram(hist, hierarchies=hierarchies, k=6, suppression=0.1)
    assert result.suppressed > 0
    expected = optimal_generalization(
        df, quasi_identifiers=QIS, hierarchies=hierarchies, k=6, suppression=0.1
    ).apply(df)
    node = node_release(result, hist, hierarchies)
    for engine in (PandasEngine(), duck):
        out = tmp_path / f"{engine.name}.parquet"
        written = engine.write_release(path, node, out)
        assert (written.rows, written.suppressed) == (len(df), result.suppressed)
        assert _rows(pd.read_parquet(out)) == _rows(expected)


@pytest.mark.parametrize(
    "own", [(), ("filename",), ("file_row_number",), ("file_row_number", "filename")]
)
def test_duckdb_numbers_a_folders_rows_whatever_its_columns_are_called(tmp_path, own):
    # A folder of three Parquet files of many row groups, read by two threads: each row's
    # number is its position in the files in name order, and a column of the table called as
    # DuckDB's row number or file name is the table's own (written as it is).
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "source"
    folder.mkdir()
    rng = np.random.default_rng(1)
    sizes = [70_000, 1, 50_000]
    start = 0
    for i, size in enumerate(sizes):
        columns = {"v": np.arange(start, start + size)}
        columns |= {name: rng.integers(0, 9, size) for name in own}
        pq.write_table(pa.table(columns), folder / f"part-{i}.parquet", row_group_size=4_000)
        start += size
    engine = DuckDBEngine(memory_limit="256MB", threads=2)
    try:
        node = NodeRelease((), ("v",), lineage="row", shuffle_seed=4)
        engine.write_release(folder, node, tmp_path / "out.parquet")
    finally:
        engine.close()
    out = pd.read_parquet(tmp_path / "out.parquet")
    assert sorted(out.columns) == sorted(["v", "row", *own])
    assert len(out) == sum(sizes) and (out["row"] == out["v"]).all()
    source = pd.read_parquet(folder).set_index("v")
    for name in own:
        assert (out[name].to_numpy() == source.loc[out["v"], name].to_numpy()).all()


def _rows(df: pd.DataFrame) -> list[tuple]:
    """The table's rows as text, sorted: a release's content whatever its row order."""
    cols = sorted(df.columns)
    text = df[cols].astype(object).where(df[cols].notna(), None).astype(str)
    return sorted(text.itertuples(index=False, name=None))


def test_suppression_below_k_is_the_k_anonymity_searchs_own(tmp_path, duck):
    df, hierarchies = _table(3, 300, False)
    path = tmp_path / "t.parquet"
    df.to_parquet(path)
    hist = duck.histogram(path, QIS)
    result = search_histogram(hist, hierarchies=hierarchies, k=5, suppression=0.1)
    node = node_release(result, hist, hierarchies)
    by_size = NodeRelease(node.mappings, node.quasi_identifiers, None, suppress_below=5)
    a, b = tmp_path / "a.parquet", tmp_path / "b.parquet"
    assert duck.write_release(path, node, a).suppressed == result.suppressed
    assert duck.write_release(path, by_size, b).suppressed == result.suppressed
    assert _rows(pd.read_parquet(a)) == _rows(pd.read_parquet(b))


def test_duckdb_runs_under_its_memory_limit_and_spills_to_the_folder_given(tmp_path):
    spill = tmp_path / "spill"
    engine = DuckDBEngine(memory_limit="128MB", temp_directory=spill)
    try:
        limit = engine.con.execute("SELECT current_setting('memory_limit')").fetchone()
        folder = engine.con.execute("SELECT current_setting('temp_directory')").fetchone()
        assert limit is not None and limit[0].replace(" ", "") in ("122.0MiB", "128MB")
        assert folder is not None and folder[0] == str(spill)
        # a histogram of 1.5 million cells (two int64 keys and a count each: more than the
        # limit once hashed) is built from the file all the same
        n = 1_500_000
        path = tmp_path / "wide.parquet"
        i = np.arange(n)
        pd.DataFrame({"a": i, "b": i % 7}).to_parquet(path)
        hist = engine.histogram(path, ["a", "b"])
        assert (hist.cells, hist.rows, int(hist.class_sizes.max())) == (n, n, 1)
    finally:
        engine.close()


def test_engine_choice_by_name_environment_and_rows(tmp_path, monkeypatch):
    df, _ = _table(1, 50, False)
    path = tmp_path / "t.parquet"
    df.to_parquet(path)
    monkeypatch.delenv("ANONWEB_ENGINE", raising=False)
    monkeypatch.setenv("ANONWEB_ENGINE_AUTO_ROWS", "51")
    assert choose_engine(None, path) == "pandas"
    monkeypatch.setenv("ANONWEB_ENGINE_AUTO_ROWS", "50")
    assert choose_engine(None, path) == "duckdb"
    assert choose_engine("auto", df) == "pandas"  # a table already in memory stays there
    monkeypatch.setenv("ANONWEB_ENGINE", "spark")
    assert choose_engine(None, path) == "spark"
    assert choose_engine("pandas", path) == "pandas"
    with pytest.raises(ParameterError, match="unknown engine 'polars'"):
        choose_engine("polars", path)
    engine = make_engine("duckdb", path, memory_limit="100MB")
    try:
        assert engine.name == "duckdb" and engine.row_count(path) == 50
    finally:
        engine.close()


def test_missing_columns_and_empty_tables_are_refused_in_the_tables_words(tmp_path, duck):
    df, _ = _table(1, 20, False)
    path = tmp_path / "t.parquet"
    df.to_parquet(path)
    for engine, source in ((PandasEngine(), df), (duck, path)):
        with pytest.raises(DataError, match="unknown quasi-identifier: nope"):
            engine.histogram(source, ["nope"])
        with pytest.raises(ParameterError, match="both quasi-identifier and sensitive"):
            engine.histogram(source, ["age"], ["age"])
    with pytest.raises(DataError, match="no rows"):
        histogram_of_frame(df.iloc[:0], QIS)


def test_weights_are_summed_per_cell(tmp_path, duck):
    df, _ = _table(2, 100, True)
    path = tmp_path / "t.parquet"
    df.to_parquet(path)
    a = PandasEngine().histogram(df, QIS, weights="income")
    b = duck.histogram(path, QIS, weights="income")
    assert a.weights is not None and b.weights is not None
    assert np.array_equal(a.weights, b.weights) and a.weights.sum() == df["income"].sum()


def test_peak_memory_is_the_os_figure():
    peak = peak_memory_bytes()
    assert peak > 10_000_000  # an interpreter with pandas loaded holds tens of MB at least
    assert peak_memory_bytes(children=True) >= peak


@pytest.mark.shared_data
@pytest.mark.parametrize("run", ["k2_s0", "k5_s0", "k5_s2", "k10_s2", "k5_s2_l2", "k5_s2_t02eq"])
def test_arx_optimum_holds_on_duckdb(datasets_dir, tmp_path_factory, duck, run):
    from tests.core.search.test_search import ARX_LOSS, ARX_RUNS, QI8

    path, hierarchies = _adult_parquet(datasets_dir, tmp_path_factory)
    k, s, models, levels, suppressed, min_class, classes, _ = ARX_RUNS[run]
    sens = sorted({m.sensitive for m in models})
    result = search_histogram(
        duck.histogram(path, QI8, sens), hierarchies=hierarchies, k=k, suppression=s, models=models
    )
    assert tuple(result.levels[q] for q in QI8) == levels
    assert (result.suppressed, result.k, result.classes) == (suppressed, min_class, classes)
    assert result.search["optimal"] is True
    assert result.information_loss == pytest.approx(ARX_LOSS[run], abs=1e-6)


_ADULT: dict[str, object] = {}


def _adult_parquet(datasets_dir, tmp_path_factory):
    from anonweb.core.io.frame import read_table
    from anonweb.core.io.hierarchy import read_hierarchy
    from tests.core.search.test_search import QI8

    if not _ADULT:
        arx = datasets_dir / "arx"
        path = tmp_path_factory.mktemp("adult") / "adult.parquet"
        read_table(arx / "adult.csv", sep=";").to_parquet(path)
        _ADULT["path"] = path
        _ADULT["hierarchies"] = {
            q: read_hierarchy(arx / f"adult_hierarchy_{q}.csv", attribute=q) for q in QI8
        }
    return _ADULT["path"], _ADULT["hierarchies"]


# --- Spark: one session for the whole test run ----------------------------------------------


@pytest.fixture(scope="session")
def spark_engine():
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from anonweb.core.engine.spark_engine import SparkEngine

    engine = SparkEngine(master="local[2]")
    yield engine
    engine.spark.stop()


@pytest.mark.slow
@settings(
    max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(table=TABLES, search=SEARCH)
def test_spark_counts_measures_and_searches_as_pandas_does(tmp_path, spark_engine, table, search):
    df, hierarchies = _table(*table)
    path = tmp_path / "t.parquet"
    df.to_parquet(path)
    ours = spark_engine.histogram(path, QIS, ["disease", "income"])
    frame = PandasEngine().histogram(df, QIS, ["disease", "income"])
    assert ours.same_as(frame)
    assert _to_1e12(assess_histogram(ours).to_dict()) == _to_1e12(assess_histogram(frame).to_dict())
    k, suppression = search
    k = min(k, len(df))
    try:
        expected = search_histogram(frame, hierarchies=hierarchies, k=k, suppression=suppression)
    except ParameterError:
        return
    got = search_histogram(ours, hierarchies=hierarchies, k=k, suppression=suppression)
    assert _figures(got) == _figures(expected)


@pytest.mark.slow
def test_spark_writes_the_release_the_search_decided(tmp_path, spark_engine):
    df, hierarchies = _table(11, 300, True)
    path = tmp_path / "t.parquet"
    df.to_parquet(path)
    hist = spark_engine.histogram(path, QIS, ["disease"])
    result = search_histogram(hist, hierarchies=hierarchies, k=4, suppression=0.05)
    expected = optimal_generalization(
        df, quasi_identifiers=QIS, hierarchies=hierarchies, k=4, suppression=0.05
    ).apply(df)
    out = tmp_path / "release"
    written = spark_engine.write_release(path, node_release(result, hist, hierarchies), out)
    assert (written.rows, written.suppressed) == (len(df), result.suppressed)
    assert _rows(pd.read_parquet(out)) == _rows(expected)


@pytest.mark.slow
def test_spark_counts_and_releases_columns_named_as_its_own_as_any(tmp_path, spark_engine):
    df, hierarchies = _table(7, 400, True)
    df = df.assign(__drop=False, __sup=True, __n="x", __w=1.0)
    path = tmp_path / "t.parquet"
    df.to_parquet(path)
    for qis in (QIS, [*QIS, "__n"]):
        counted = spark_engine.histogram(path, qis, ["disease"], weights="__w")
        assert counted.same_as(PandasEngine().histogram(path, qis, ["disease"], weights="__w"))
    hist = spark_engine.histogram(path, QIS, ["disease"])
    result = search_histogram(hist, hierarchies=hierarchies, k=6, suppression=0.1)
    assert result.suppressed > 0
    expected = optimal_generalization(
        df, quasi_identifiers=QIS, hierarchies=hierarchies, k=6, suppression=0.1
    ).apply(df)
    out = tmp_path / "release"
    written = spark_engine.write_release(path, node_release(result, hist, hierarchies), out)
    assert (written.rows, written.suppressed) == (len(df), result.suppressed)
    assert _rows(pd.read_parquet(out)) == _rows(expected)


SPARK_CLUSTER_RUN = """
import json, sys
from anonweb.core.engine.spark_engine import SparkEngine
from anonweb.core.io.hierarchy import read_hierarchy
from anonweb.core.search.flash import search_histogram
from tests.core.search.test_search import QI8
path, arx = sys.argv[1], sys.argv[2]
engine = SparkEngine()
assert engine.spark.sparkContext.master.startswith("local-cluster"), engine.spark.sparkContext.master
hs = {q: read_hierarchy(f"{arx}/adult_hierarchy_{q}.csv", attribute=q) for q in QI8}
r = search_histogram(engine.histogram(path, QI8), hierarchies=hs, k=5, suppression=0.02)
print(json.dumps({"levels": [r.levels[q] for q in QI8], "suppressed": r.suppressed,
                  "k": r.k, "classes": r.classes, "loss": r.information_loss}))
"""


@pytest.mark.slow
@pytest.mark.shared_data
def test_arx_optimum_holds_on_a_spark_local_cluster(datasets_dir, tmp_path_factory):
    """Two executor JVMs, so the group-by's shuffle crosses processes (its own Spark, in a
    child process: the test session's Spark runs in local mode)."""
    from tests.core.search.test_search import ARX_LOSS, ARX_RUNS

    path, _ = _adult_parquet(datasets_dir, tmp_path_factory)
    import pyspark

    env = {
        **os.environ,
        "ANONWEB_SPARK_MASTER": "local-cluster[2,1,1024]",
        "SPARK_HOME": str(Path(pyspark.__file__).parent),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYTHONPATH": str(ROOT),
    }
    proc = subprocess.run(
        [sys.executable, "-c", SPARK_CLUSTER_RUN, str(path), str(datasets_dir / "arx")],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    _, _, _, levels, suppressed, min_class, classes, _ = ARX_RUNS["k5_s2"]
    assert tuple(got["levels"]) == levels
    assert (got["suppressed"], got["k"], got["classes"]) == (suppressed, min_class, classes)
    assert got["loss"] == pytest.approx(ARX_LOSS["k5_s2"], abs=1e-6)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(table=TABLES, levels=st.tuples(st.integers(0, 3), st.integers(0, 5), st.integers(0, 1)))
def test_the_what_if_answers_the_same_from_a_duckdb_histogram(tmp_path, duck, table, levels):
    from anonweb.core.search.whatif import WhatIfTable

    df, hierarchies = _table(*table)
    path = tmp_path / "t.parquet"
    df.to_parquet(path)
    hist = duck.histogram(path, QIS, ["disease"])
    node = {q: min(lv, hierarchies[q].height - 1) for q, lv in zip(QIS, levels, strict=True)}
    kwargs = {"quasi_identifiers": QIS, "hierarchies": hierarchies, "sensitive": ["disease"]}
    every = {"disclosing_limit": len(df)}
    ours = WhatIfTable(hist, **kwargs, **every).evaluate(node, suppression=0.05, k=2)
    rows = WhatIfTable(df, **kwargs, **every).evaluate(node, suppression=0.05, k=2)
    assert _summary_whatif(ours.to_dict()) == _summary_whatif(rows.to_dict())


def _summary_whatif(d: dict) -> str:
    """A what-if's figures with lists of classes as sets (their order among equal classes
    follows the class numbering)."""

    def norm(x):
        if isinstance(x, dict):
            return {k: norm(v) for k, v in x.items()}
        if isinstance(x, list):
            return sorted((norm(v) for v in x), key=lambda v: json.dumps(v, sort_keys=True))
        return x

    return json.dumps(norm(_to_1e12(d)), sort_keys=True, default=str)


WHATIF_ASKS = [
    ((0, 0, 0), {"suppression": 0.05, "k": 2}),
    ((1, 1, 0), {"suppression": 0.1, "k": 3}),
    ((2, 2, 1), {"suppression": 0.0}),  # rolled up from the node before
    ((1, 0, 1), {"suppression": 0.05, "models": [DistinctL("disease", 2)]}),
    ((0, 0, 0), {"suppression": 0.02, "k": 2}),  # a repeat
]


def _whatif_from_each_side(hist, df, hierarchies, sensitive, dense_min, monkeypatch):
    """The answers of one what-if table built from ``hist`` and one from the rows, for the
    same nodes asked in the same order."""
    import anonweb.core.search.whatif as whatif
    from anonweb.core.search.whatif import WhatIfTable

    monkeypatch.setattr(whatif, "DENSE_MIN", dense_min)
    kwargs = {"quasi_identifiers": QIS, "hierarchies": hierarchies, "sensitive": sensitive}
    every = {"disclosing_limit": len(df), "population_size": 10 * len(df)}
    ours = WhatIfTable(hist, **kwargs, **every)
    rows = WhatIfTable(df, **kwargs, **every)
    for levels, kw in WHATIF_ASKS:
        node = {q: min(lv, hierarchies[q].height - 1) for q, lv in zip(QIS, levels, strict=True)}
        got = ours.evaluate(node, **kw).to_dict()
        want = rows.evaluate(node, **kw).to_dict()
        for key in ("k", "classes", "suppressed", "required_suppression", "satisfied"):
            assert got.get(key) == want.get(key), (node, key)
        assert got.get("prosecutor_risk") == want.get("prosecutor_risk"), node
        assert _summary_whatif(got) == _summary_whatif(want), node


@pytest.mark.parametrize("engine_name", ["pandas", "duckdb"])
@pytest.mark.parametrize("dense_min", [1 << 20, 0])
@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(table=TABLES)
def test_the_what_if_from_each_engines_histogram_answers_as_from_the_rows(
    tmp_path, duck, monkeypatch, engine_name, dense_min, table
):
    """Random tables, one and two sensitive columns, the counts dense and sparse: the what-if
    of an engine's histogram (its quasi-identifier rows and per-value counts) gives the
    figures of the what-if of the rows, node after node (repeats and roll-ups included)."""
    df, hierarchies = _table(*table)
    path = tmp_path / "t.parquet"
    df.to_parquet(path)
    for sensitive in (["disease"], ["disease", "income"]):
        if engine_name == "pandas":
            hist = PandasEngine().histogram(df, QIS, sensitive)
        else:
            hist = duck.histogram(path, QIS, sensitive)
        _whatif_from_each_side(hist, df, hierarchies, sensitive, dense_min, monkeypatch)


@pytest.mark.slow
@settings(
    max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(table=TABLES)
def test_the_what_if_from_a_spark_histogram_answers_as_from_the_rows(
    tmp_path, spark_engine, monkeypatch, table
):
    df, hierarchies = _table(*table)
    path = tmp_path / "t.parquet"
    df.to_parquet(path)
    hist = spark_engine.histogram(path, QIS, ["disease", "income"])
    _whatif_from_each_side(hist, df, hierarchies, ["disease", "income"], 1 << 20, monkeypatch)


def test_the_what_if_reads_two_spellings_of_one_hierarchy_row_as_one(monkeypatch):
    """A column holding 47677 and '47677' counts two values in the histogram, which the
    hierarchy reads as one row: the what-if merges their classes as the rows' what-if does."""
    df, hierarchies = _table(5, 120, False)
    zips = df["zip"].astype(object)
    zips[::3] = [int(z) for z in zips[::3]]
    df = df.assign(zip=zips)
    hist = PandasEngine().histogram(df, QIS, ["disease"])
    assert len(hist.labels["zip"]) > df["zip"].astype(str).nunique()
    _whatif_from_each_side(hist, df, hierarchies, ["disease"], 1 << 20, monkeypatch)
    _whatif_from_each_side(hist, df, hierarchies, ["disease"], 0, monkeypatch)


def _nan_and_null(path: Path) -> tuple[pd.DataFrame, dict[str, Hierarchy]]:
    """A Parquet file whose float quasi-identifier holds NaN in some rows and null in others
    (pandas writes only nulls; another writer may write both), read back as pandas reads it:
    both missing, one value."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    df, hierarchies = _table(5, 240, False)
    age: list[float | None] = df["age"].tolist()
    for i in range(1, len(age), 6):
        age[i] = float("nan")
    for i in range(4, len(age), 6):
        age[i] = None
    table = pa.Table.from_pandas(df.drop(columns="age"), preserve_index=False)
    pq.write_table(table.append_column("age", pa.array(age, pa.float64())), path)
    return pd.read_parquet(path), hierarchies


@pytest.mark.parametrize("name", ["duckdb", pytest.param("spark", marks=pytest.mark.slow)])
def test_nan_and_null_of_a_float_are_one_missing_value_on_every_engine(request, tmp_path, name):
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    engine = request.getfixturevalue("duck" if name == "duckdb" else "spark_engine")
    path = tmp_path / "t.parquet"
    df, hierarchies = _nan_and_null(path)
    assert df["age"].isna().sum() == 80
    hist = engine.histogram(path, QIS, ["disease"])
    frame = PandasEngine().histogram(path, QIS, ["disease"])
    assert hist.same_as(frame) and hist.class_sizes.size == frame.class_sizes.size
    # k, classes, uniques and every other figure of the risk profile
    assert _to_1e12(assess_histogram(hist).to_dict()) == _to_1e12(assess_histogram(frame).to_dict())
    got = search_histogram(hist, hierarchies=hierarchies, k=3, suppression=0.05)
    expected = optimal_generalization(
        df, quasi_identifiers=QIS, hierarchies=hierarchies, k=3, suppression=0.05
    )
    assert _figures(got) == _figures(expected)
    # a release that keeps the float column as it is holds one missing value, as pandas
    # writes it: grouped by any reader, the missing ages are one class per (zip, sex)
    sex = hist.labels["sex"]
    node = NodeRelease((ColumnMapping("sex", sex, tuple("*" for _ in sex)),), tuple(QIS))
    written = {}
    for each in (PandasEngine(), engine):
        out = tmp_path / f"{each.name}-release"
        each.write_release(path, node, out if each.name == "spark" else f"{out}.parquet")
        ages = pq.read_table(out if each.name == "spark" else f"{out}.parquet").column("age")
        written[each.name] = (ages.null_count, pc.sum(pc.is_nan(ages)).as_py() or 0)
        classes = duckdb.sql(
            "SELECT count(*) FROM (SELECT DISTINCT age, zip, sex FROM "
            f"read_parquet('{out}{'/*' if each.name == 'spark' else ''}.parquet'))"
        ).fetchall()[0]
        written[each.name] += classes
    assert written[name] == written["pandas"] == (80, 0, written["pandas"][2])
