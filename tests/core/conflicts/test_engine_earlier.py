"""``--earlier`` files linked to a Parquet source out of core
(:mod:`anonweb.core.conflicts.engine_earlier`) name the same source rows as in memory
(:func:`~anonweb.core.conflicts.lineage.view_from_lineage_form`): both sides' ids are matched
as the in-memory run reads the source (``read_table``) and writes each id (``str``), whatever
the id column's type (a float32, a boolean, a timestamp with fractions of a second, where
DuckDB's own text differed), the file read from Parquet or CSV; an id the source lacks is
refused alike."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from anonweb.core.conflicts.engine_earlier import (
    check_source_ids_out_of_core,
    earlier_file_out_of_core,
    earlier_out_of_core,
)
from anonweb.core.conflicts.lineage import source_ids, view_from_lineage_form
from anonweb.core.engine.duckdb_engine import DuckDBEngine
from anonweb.core.engine.lineage import LINEAGE_COLUMN
from anonweb.core.errors import DataError
from anonweb.core.io.frame import read_table

N = 40
START = pd.Timestamp("2024-03-01 09:00:00")

IDS = {
    "int": lambda: np.arange(1000, 1000 + N, dtype=np.int64),
    "text": lambda: np.array([f"p{i:03d}" for i in range(N)], dtype=object),
    # float32, read as the float64 of its shortest text (0.1), as DuckDB writes it
    "float32": lambda: np.arange(N, dtype=np.float32) * np.float32(0.1) + np.float32(1e-3),
    # True and False, which DuckDB writes true and false
    "bool": lambda: np.array([True, False]),
    # to the millisecond: written 09:00:00.500 (the column's format), DuckDB's own 09:00:00.5
    "timestamp": lambda: np.array(
        [START + pd.Timedelta(seconds=i, milliseconds=500) for i in range(N)],
        dtype="datetime64[ns]",
    ),
    # all at midnight: written 2024-03-01 (the column's format), DuckDB's own 2024-03-01 00:00:00
    "dates": lambda: np.array(
        [START.normalize() + pd.Timedelta(days=i) for i in range(N)], dtype="datetime64[ns]"
    ),
}


@pytest.fixture(scope="module")
def duck():
    engine = DuckDBEngine(memory_limit="256MB")
    yield engine
    engine.close()


def _source(tmp_path, kind: str) -> tuple[str, pd.DataFrame]:
    ids = IDS[kind]()
    rng = np.random.default_rng(len(ids))
    df = pd.DataFrame({"id": ids, "age": rng.integers(20, 60, len(ids)), "sex": "F"})
    path = tmp_path / "source.parquet"
    df.to_parquet(path, index=False)
    return str(path), read_table(path)


def _rows(duck, path, source, release, label="earlier"):
    """The source rows of ``release``'s records, in memory and out of core."""
    memory = view_from_lineage_form(
        source, release, label=label, id_column="id", ids=source_ids(source, "id")
    ).rows
    check_source_ids_out_of_core(duck, path, "id")
    ours = earlier_out_of_core(duck, path, release, label=label, id_column="id").rows
    return memory, ours


@pytest.mark.parametrize("kind", list(IDS))
@pytest.mark.parametrize("suffix", ["parquet", "csv"])
def test_earlier_ids_name_the_source_rows_in_memory_and_out_of_core(tmp_path, duck, kind, suffix):
    path, source = _source(tmp_path, kind)
    order = np.random.default_rng(7).permutation(len(source))[: max(2, len(source) // 2)]
    earlier = source.iloc[order][["id", "age"]].assign(age=lambda f: f["age"] // 10 * 10)
    file = tmp_path / f"earlier.{suffix}"
    if suffix == "csv":
        earlier.to_csv(file, index=False)
    else:
        earlier.to_parquet(file, index=False)
    release = read_table(file)
    memory, ours = _rows(duck, path, source, release)
    assert list(memory) == list(order)
    assert list(ours) == list(memory)
    # ... and the file read out of core: its lineage and published columns as read in memory
    folder = tmp_path / "work"
    folder.mkdir()
    made = earlier_file_out_of_core(
        duck, path, file, label="earlier", id_column="id", folder=folder
    )
    assert made.frame is None and made.rows is None
    lineage = pd.read_parquet(made.rows_file)[LINEAGE_COLUMN]
    assert list(lineage) == list(memory)
    published = pd.read_parquet(made.table_file)
    pd.testing.assert_frame_equal(published, release.drop(columns=["id"]))


@pytest.mark.parametrize("kind", list(IDS))
def test_an_id_the_source_lacks_is_refused_alike(tmp_path, duck, kind):
    path, source = _source(tmp_path, kind)
    # the ids as the source writes them (a timestamp in its column's format), one unknown
    release = source[["id", "age"]].astype({"id": str}).copy()
    release.iloc[0, 0] = "nobody"
    with pytest.raises(DataError, match="earlier: 1 id\\(s\\) are not in the source"):
        view_from_lineage_form(
            source, release, label="earlier", id_column="id", ids=source_ids(source, "id")
        )
    with pytest.raises(DataError, match="earlier: 1 id\\(s\\) are not in the source"):
        earlier_out_of_core(duck, path, release, label="earlier", id_column="id")
    release.to_csv(tmp_path / "stranger.csv", index=False)
    with pytest.raises(DataError, match="earlier: 1 id\\(s\\) are not in the source"):
        earlier_file_out_of_core(
            duck, path, tmp_path / "stranger.csv", label="earlier", id_column="id", folder=tmp_path
        )
