"""Cells changed, out of core: with a release's lineage DuckDB joins it to its source by source
row and counts, per column, the cells that differ from the same record's source cell; the
figures are the in-memory ones (``source_rows``) on every engine, and a hand-worked case."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from anonweb.core.engine.lineage import LINEAGE_COLUMN
from anonweb.core.release.engine_release import make_engine_release
from anonweb.core.release.plan import plan_from_dict
from anonweb.core.utility.measures import engine_release_utility, release_utility
from tests.core.release.test_engine_release import TAGS, _plan, _table
from tests.core.utility.test_engine_utility import REPORT, _engine, same


def write(folder, source, released, rows):
    source.to_parquet(folder / "source.parquet", index=False)
    released.to_parquet(folder / "release.parquet", index=False)
    lineage = pd.DataFrame({LINEAGE_COLUMN: np.asarray(rows, dtype=np.int64)})
    lineage.to_parquet(folder / "lineage.parquet", index=False)
    return folder / "source.parquet", folder / "release.parquet", folder / "lineage.parquet"


def measured(engine_name, source, released, lineage, report=REPORT):
    engine = _engine(engine_name)
    try:
        return engine_release_utility(
            engine, source, released, report=report, lineage=str(lineage)
        ).to_dict()
    finally:
        engine.close()


def test_the_cells_changed_by_hand(tmp_path):
    source = pd.DataFrame(
        {
            "x": [1, 2, 3, 4, None],
            "t": ["a", " b", "c", None, "e"],
            "k": [7, 7, 8, 9, 9],
        }
    )
    # released in another order: row j is source row rows[j]
    rows = [4, 2, 0, 1, 3]
    released = pd.DataFrame(
        {
            "x": [np.nan, 3.0, 1.5, 2.0, 4.0],  # blank kept, 3 kept, 1 -> 1.5: one change
            "t": ["e", "*", "a", "b", None],  # c -> *; " b" reads b: one change
            "k": ["9", "8", "7", "7", "9"],  # numbers released as text, same labels: none
        }
    )
    paths = write(tmp_path, source, released, rows)
    got = measured("duckdb", *paths)
    changed = {c["column"]: c["changed"] for c in got["columns"]}
    assert changed == {"x": 1, "t": 1, "k": 0}
    assert got["matched"]
    expected = release_utility(source, released, report=REPORT, source_rows=rows).to_dict()
    same(got, expected)


def kinds_of_columns(n: int, seed: int):
    """A source and a shuffled release with every kind of column: numbers kept and perturbed
    (blanks, NaN, an infinity), numbers released as intervals and ``*``, text with blanks and
    ``*``, booleans, text released as numbers; and the release's lineage."""
    rng = np.random.default_rng(seed)
    age = rng.integers(17, 90, n)
    city = rng.choice(["Lyon", " Lyon", "Nice", "Paris", None] + [f"c{i}" for i in range(9)], n)
    source = pd.DataFrame(
        {
            "age": age,
            "city": city,
            "income": np.round(rng.lognormal(10, 1, n), 2),
            "score": rng.integers(0, 7, n),
            "flag": rng.random(n) < 0.3,
            "code": rng.integers(0, 4, n).astype(str),
        }
    )
    released = pd.DataFrame(
        {
            "age": np.where(rng.random(n) < 0.05, "*", [f"[{a // 10 * 10}-" for a in age]),
            "city": np.where(rng.random(n) < 0.1, "*", city),
            "income": source["income"] + np.where(rng.random(n) < 0.5, rng.normal(0, 500, n), 0),
            "score": np.where(rng.random(n) < 0.2, 0, source["score"]),
            "flag": np.where(rng.random(n) < 0.1, ~source["flag"], source["flag"]),
            "code": source["code"].astype(float).where(rng.random(n) < 0.7, 9.0),
        }
    )
    released.loc[::37, "income"] = np.nan
    released.loc[5, "income"] = np.inf
    rows = rng.permutation(n)
    return source, released.iloc[rows].reset_index(drop=True), rows


@pytest.mark.parametrize(
    "engine_name", ["pandas", "duckdb", pytest.param("spark", marks=pytest.mark.slow)]
)
def test_an_engine_counts_the_cells_changed_in_memory(tmp_path, engine_name):
    source, released, rows = kinds_of_columns(3000, 7)
    got = measured(engine_name, *write(tmp_path, source, released, rows))
    expected = release_utility(source, released, report=REPORT, source_rows=rows).to_dict()
    same(got, expected)
    changed = {c["column"]: c["changed"] for c in got["columns"]}
    assert all(v > 0 for v in changed.values()), changed
    assert changed["income"] < 3000


@pytest.mark.parametrize("engine_name", ["pandas", "duckdb"])
def test_an_engine_release_counts_its_cells_changed_through_its_lineage(tmp_path, engine_name):
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
        got = engine_release_utility(
            engine, source, out, report=made.report, plan=plan, lineage=made.lineage_path
        )
    finally:
        engine.close()
    rows = pd.read_parquet(made.lineage_path)[LINEAGE_COLUMN].to_numpy()
    expected = release_utility(
        df, pd.read_parquet(out), report=made.report, plan=plan, source_rows=rows
    )
    same(got.to_dict(), expected.to_dict())
    assert got.matched and any(c.changed for c in got.columns)


def test_a_released_column_named_as_duckdbs_row_number(tmp_path):
    # the release and its lineage are joined by DuckDB's row numbers, which it cannot rename:
    # a released column called file_row_number (or named as the join's own) is counted as data
    source = pd.DataFrame(
        {
            "x": [1, 2, 3, 4],
            "file_row_number": [10, 11, 12, 13],
            "__at": ["a", "b", "c", "d"],
            "__src": [5, 6, 7, 8],
        }
    )
    rows = [3, 1, 0, 2]
    released = pd.DataFrame(
        {
            "x": [4, 2, 9, 3],  # source row 0 released as 9: one change
            "file_row_number": [13, 11, 10, 99],  # source row 2 released as 99: one change
            "__at": ["d", "b", "a", "c"],  # none
            "__src": [8, 6, 5, 0],  # source row 2: one change
        }
    )
    paths = write(tmp_path, source, released, rows)
    got = measured("duckdb", *paths)
    changed = {c["column"]: c["changed"] for c in got["columns"]}
    assert changed == {"x": 1, "file_row_number": 1, "__at": 0, "__src": 1}
    expected = release_utility(source, released, report=REPORT, source_rows=rows).to_dict()
    same(got, expected)
