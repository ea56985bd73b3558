"""A release written out of core keeps its lineage (the source row of each released row, in a
private Parquet file beside it, never in the release) and is checked for conflicts with the
earlier live releases of its source out of core, with the in-memory check's findings; a later
release made in memory is checked against it through that file. What the check cannot count
out of core (aggregates solved against every record) blocks the release with the reason."""

from __future__ import annotations

import importlib.util
import shutil

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from anonweb.core.conflicts.inference import Aggregate
from anonweb.core.conflicts.release import EarlierRelease, release_conflicts
from anonweb.core.engine.duckdb_engine import DuckDBEngine
from anonweb.core.engine.lineage import LINEAGE_COLUMN, LINEAGE_WRITTEN
from anonweb.core.engine.pandas_engine import PandasEngine
from anonweb.core.release.engine_release import make_engine_release
from anonweb.core.release.plan import plan_from_dict
from anonweb.core.release.policy import PolicyThresholds

N = 400
HIERARCHIES = {
    "age": {"rows": [[a, f"{a // 10 * 10}-{a // 10 * 10 + 9}"] for a in range(18, 80)]},
    "sex": {"rows": [["F", "*"], ["M", "*"]]},
}
PLAN = {
    "quasi_identifiers": ["age", "sex"],
    "sensitive": ["disease"],
    "hierarchies": HIERARCHIES,
    "steps": [
        {"kind": "drop", "params": {"columns": ["name"]}},
        {
            "kind": "optimal_generalization",
            "params": {"k": 5, "suppression": 0.0},
        },
    ],
}
TAGS = {"age": "quasi_identifier", "sex": "quasi_identifier", "disease": "sensitive"}
TAGS |= {"name": "identifier", "visit": "keep"}


def table() -> pd.DataFrame:
    rng = np.random.default_rng(11)
    return pd.DataFrame(
        {
            "name": [f"person {i}" for i in range(N)],
            "age": rng.integers(18, 80, N),
            "sex": rng.choice(["F", "M"], N),
            "disease": rng.choice(["flu", "ulcer", "cancer"], N, p=[0.5, 0.3, 0.2]),
            # a reading both releases publish as it is: unique per person, it joins them
            "visit": rng.permutation(N) * 7 + 1000,
        }
    )


def shifted(source: pd.DataFrame, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """An earlier release made in memory: ages in tens from 5 (the engine's search cuts them
    from 0), with the reading, shuffled."""
    lo = (source["age"] - 5) // 10 * 10 + 5
    frame = pd.DataFrame(
        {
            "age": lo.astype(str) + "-" + (lo + 9).astype(str),
            "sex": source["sex"],
            "visit": source["visit"],
        }
    )
    order = np.random.default_rng(seed).permutation(len(frame))
    return frame.iloc[order].reset_index(drop=True), order


@pytest.fixture(params=["pandas", "duckdb"])
def engine(request):
    made = PandasEngine() if request.param == "pandas" else DuckDBEngine(memory_limit="300MB")
    yield made
    made.close()


def release(engine, tmp_path, earlier=(), source=None, name="release.parquet", seed=5):
    df = table()
    path = source or tmp_path / "source.parquet"
    if source is None:
        df.to_parquet(path, index=False)
    return df, make_engine_release(
        path,
        plan_from_dict(PLAN),
        engine=engine,
        out=tmp_path / name,
        rng=np.random.default_rng(seed),
        tags=TAGS,
        earlier=earlier,
    )


def test_the_lineage_names_each_released_rows_source_row(engine, tmp_path):
    df, made = release(engine, tmp_path)
    written = pd.read_parquet(made.path)
    lineage = pq.read_table(made.lineage_path).column(LINEAGE_COLUMN).to_numpy()
    assert LINEAGE_WRITTEN not in written.columns and LINEAGE_COLUMN not in written.columns
    assert sorted(lineage) == list(range(N))  # each source row once
    assert not np.array_equal(lineage, np.arange(N))  # the rows were shuffled
    source = df.iloc[lineage].reset_index(drop=True)
    assert written["visit"].tolist() == source["visit"].tolist()
    assert written["disease"].tolist() == source["disease"].tolist()
    # each released age is the generalization of its source row's
    lo = source["age"] // 10 * 10
    assert (written["age"] == lo.astype(str) + "-" + (lo + 9).astype(str)).all()
    assert made.report["lineage"]["source_rows"] == "kept privately"
    assert made.report["conflicts"] == {
        "run": True,
        "checked": [],
        "findings": {},
        "note": "no earlier live release",
    }


def test_an_engine_release_is_checked_against_an_earlier_one_as_in_memory(engine, tmp_path):
    df = table()
    frame, rows = shifted(df, 2)
    earlier = [EarlierRelease("release 1", "approved", 41, frame, rows, quasi_identifiers=("age",))]
    _, made = release(engine, tmp_path, earlier=earlier)
    check = made.conflicts
    assert made.report["conflicts"]["run"] and made.report["conflicts"]["checked"] == [41]
    assert check is not None and check.checked == [41]
    # the reading joins the two releases one to one; joined, the two cuts of age leave small
    # classes, and the diseases of some of them are disclosed
    kinds = [(f["type"], f["link"]) for f in check.private]
    assert ("linkage", "columns") in kinds
    assert all(f["link_columns"] == ["visit"] for f in check.private)
    codes = {f.code for f in made.gate.findings}
    assert "conflict_linkage" in codes and "conflicts_unchecked" not in codes
    assert made.report["conflicts"]["findings"] == {"linkage": len(check.public)}
    # the in-memory check of the written release with its lineage finds the same
    written = pd.read_parquet(made.path)
    lineage = pq.read_table(made.lineage_path).column(LINEAGE_COLUMN).to_numpy()
    memory = release_conflicts(
        df,
        frame=written,
        rows=lineage,
        earlier=earlier,
        quasi_identifiers=["age", "sex"],
        plan_quasi_identifiers=["age", "sex"],
        sensitive=["disease"],
        k=PolicyThresholds().k,
        l=PolicyThresholds().l,
    )
    assert check.private == memory.private and check.public == memory.public
    assert [f.to_dict() for f in check.gate_findings()] == [
        f.to_dict() for f in memory.gate_findings()
    ]
    for finding in check.private:  # the records are source rows, named from 1
        assert set(finding["records"]) <= set(range(1, N + 1))


def test_a_later_release_in_memory_is_checked_against_an_engine_release(engine, tmp_path):
    df, made = release(engine, tmp_path)
    written = pd.read_parquet(made.path)
    lineage = pq.read_table(made.lineage_path).column(LINEAGE_COLUMN).to_numpy()
    engine_release = EarlierRelease(
        "release 1", "pending", 8, written, lineage, quasi_identifiers=("age", "sex")
    )
    frame, rows = shifted(df, 3)
    memory = release_conflicts(
        df,
        frame=frame,
        rows=rows,
        earlier=[engine_release],
        quasi_identifiers=["age", "sex"],
        sensitive=["disease"],
    )
    assert memory.checked == [8]
    assert any(f["type"] == "linkage" for f in memory.public)
    # the other way round, out of core, the figures are the same ones
    _, again = release(
        engine,
        tmp_path,
        earlier=[
            EarlierRelease(
                "release 1", "pending", 8, quasi_identifiers=("age", "sex"),
                table_file=made.path, rows_file=made.lineage_path,
            )
        ],
        name="again.parquet",
    )  # fmt: skip
    assert again.conflicts is not None and again.conflicts.checked == [8]


def test_aggregates_of_an_earlier_release_keep_the_release_blocked_with_the_reason(
    engine, tmp_path
):
    means = Aggregate("release 2", "age", np.zeros(N, dtype=np.int64), np.array([48.0]))
    earlier = [EarlierRelease("release 2", "approved", 9, aggregates=(means,))]
    _, made = release(engine, tmp_path, earlier=earlier)
    assert made.conflicts is None
    entry = made.report["conflicts"]
    assert entry["run"] is False and entry["earlier"] == ["release 2"]
    assert "exact inference and differencing" in entry["reason"]
    (blocked,) = [f for f in made.gate.findings if f.code == "conflicts_unchecked"]
    assert blocked.severity == "block"
    assert "exact inference and differencing" in blocked.message
    assert "release 2" in blocked.message


def test_a_csv_source_on_duckdb_keeps_no_lineage_and_stays_blocked(tmp_path):
    df = table()
    path = tmp_path / "source.csv"
    df.to_csv(path, index=False)
    frame, rows = shifted(df, 2)
    earlier = [EarlierRelease("release 1", "approved", 41, frame, rows)]
    engine = DuckDBEngine(memory_limit="300MB")
    try:
        _, made = release(engine, tmp_path, earlier=earlier, source=path)
    finally:
        engine.close()
    assert made.lineage_path is None and made.conflicts is None
    assert made.report["lineage"]["source_rows"] is None
    assert "kept no lineage" in made.report["conflicts"]["reason"]
    assert "conflicts_unchecked" in {f.code for f in made.gate.findings}
    assert not list(tmp_path.glob(".*rows*"))  # nothing left beside the release


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("pyspark") is None or shutil.which("java") is None,
    reason="Spark needs pyspark and a Java runtime",
)
def test_spark_keeps_the_lineage_and_is_checked_as_in_memory(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    from anonweb.core.engine.spark_engine import SparkEngine

    spark = SparkEngine(master="local[2]")
    try:
        df = table()
        # a folder of two Parquet files: each row's position counts the first file's rows
        folder = tmp_path / "source"
        folder.mkdir()
        df.iloc[:150].to_parquet(folder / "part-0.parquet", index=False)
        df.iloc[150:].to_parquet(folder / "part-1.parquet", index=False)
        frame, rows = shifted(df, 2)
        earlier = [
            EarlierRelease("release 1", "approved", 41, frame, rows, quasi_identifiers=("age",))
        ]
        _, made = release(spark, tmp_path, earlier=earlier, source=folder)
    finally:
        spark.close()
        spark.spark.stop()
    written = pd.read_parquet(made.path)
    lineage = pq.read_table(made.lineage_path).column(LINEAGE_COLUMN).to_numpy()
    assert sorted(lineage) == list(range(N))
    source = df.iloc[lineage].reset_index(drop=True)
    assert written["visit"].tolist() == source["visit"].tolist()
    memory = release_conflicts(
        df,
        frame=written,
        rows=lineage,
        earlier=earlier,
        quasi_identifiers=["age", "sex"],
        plan_quasi_identifiers=["age", "sex"],
        sensitive=["disease"],
    )
    assert made.conflicts is not None and made.conflicts.public
    assert made.conflicts.private == memory.private and made.conflicts.public == memory.public


def test_duckdb_numbers_the_rows_of_a_folder_of_parquet_files_in_order(tmp_path):
    df = table()
    folder = tmp_path / "source"
    folder.mkdir()
    for i, start in enumerate(range(0, N, 130)):
        df.iloc[start : start + 130].to_parquet(folder / f"part-{i}.parquet", index=False)
    engine = DuckDBEngine(memory_limit="300MB")
    try:
        _, made = release(engine, tmp_path, source=folder)
    finally:
        engine.close()
    written = pd.read_parquet(made.path)
    lineage = pq.read_table(made.lineage_path).column(LINEAGE_COLUMN).to_numpy()
    assert sorted(lineage) == list(range(N))
    assert written["visit"].tolist() == df["visit"].iloc[lineage].tolist()


# The columns an engine adds to number the rows, as a table may name its own: its lineage's,
# and the row number and file name DuckDB reads a folder of Parquet files with.
OWN_NAMES = (LINEAGE_WRITTEN, "file_row_number", "filename")


def own_named_release(engine, tmp_path, names=OWN_NAMES):
    """A release of a table (two Parquet files in a folder) with columns ``names`` named as the
    engine's own, published as they are: the table and the release."""
    df = table()
    rng = np.random.default_rng(3)
    df = df.assign(**{name: rng.permutation(N) * (i + 2) for i, name in enumerate(names)})
    folder = tmp_path / "source"
    folder.mkdir()
    df.iloc[:150].to_parquet(folder / "a.parquet", index=False)
    df.iloc[150:].to_parquet(folder / "b.parquet", index=False, row_group_size=60)
    made = make_engine_release(
        folder,
        plan_from_dict(PLAN),
        engine=engine,
        out=tmp_path / "release.parquet",
        rng=np.random.default_rng(5),
        tags=TAGS | dict.fromkeys(names, "keep"),
    )
    return df, made


def check_own_named(df, made, names=OWN_NAMES):
    written = pd.read_parquet(made.path)
    lineage = pq.read_table(made.lineage_path).column(LINEAGE_COLUMN).to_numpy()
    assert sorted(lineage) == list(range(N))
    source = df.iloc[lineage].reset_index(drop=True)
    assert written["visit"].tolist() == source["visit"].tolist()
    # the table's own columns of those names are published as they are, never replaced
    for name in names:
        assert written[name].tolist() == source[name].tolist(), name
    assert sorted(written.columns) == sorted([*TAGS.keys() - {"name"}, *names])


@pytest.mark.parametrize("names", [OWN_NAMES, (LINEAGE_WRITTEN, "filename"), ("file_row_number",)])
def test_columns_named_as_the_engines_own_are_released_as_they_are(engine, tmp_path, names):
    # DuckDB reads the file name under a name of its own, and numbers the rows of files with a
    # column called file_row_number by their order as read
    check_own_named(*own_named_release(engine, tmp_path, names), names)


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("pyspark") is None or shutil.which("java") is None,
    reason="Spark needs pyspark and a Java runtime",
)
def test_spark_releases_columns_named_as_its_own_as_they_are(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    from anonweb.core.engine.spark_engine import SparkEngine

    spark = SparkEngine(master="local[2]")
    try:
        # and the columns Spark numbers the rows with: its metadata, the file, the index
        names = (*OWN_NAMES, "_metadata", "__file", "__i")
        made = own_named_release(spark, tmp_path, names)
    finally:
        spark.close()
        spark.spark.stop()
    check_own_named(*made, names)
