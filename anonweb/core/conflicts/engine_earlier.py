"""Earlier releases given as files in lineage form (their published columns plus the source's
record id column, as ``conflicts`` and ``anonymize --earlier`` read them), linked to a source
an engine reads without holding it: DuckDB numbers the source's rows as the engines' lineage
does (:meth:`~anonweb.core.engine.duckdb_engine.DuckDBEngine.numbered`) and joins the file's ids
to them, so the earlier release's records are source rows, as
:func:`~anonweb.core.conflicts.lineage.view_from_lineage_form` makes them in memory, with the
same checks and messages.

A release file whose numeric column is the mean of groups of records (what
:func:`~anonweb.core.conflicts.lineage.read_means` finds there) publishes aggregates, which the
check out of core does not solve (:mod:`.engine_check`): such a file is refused
(:class:`NotOutOfCore`) rather than checked without them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from itertools import count
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from numpy.typing import NDArray

from anonweb.core.conflicts.engine_cells import file_cells, text_sql
from anonweb.core.conflicts.engine_linkage import NotOutOfCore, in_order
from anonweb.core.conflicts.lineage import (
    check_release_counts,
    check_release_rows,
    check_source_ids,
    read_means,
    require_id_column,
    source_ids,
    view_from_lineage_form,
)
from anonweb.core.conflicts.release import EarlierRelease
from anonweb.core.engine.base import Source, fresh_name
from anonweb.core.engine.duckdb_engine import DuckDBEngine, literal, numbered_parquet, quote
from anonweb.core.engine.lineage import LINEAGE_COLUMN
from anonweb.core.io.arrow_cells import arrow_to_pandas, rewrite_parquet
from anonweb.core.io.frame import require_columns
from anonweb.core.io.ingest import READ_LIMITS, convert_to_parquet, format_of

_ids = count()

MEANS_NOT_OUT_OF_CORE = (
    "{label} publishes {columns} as the means of groups of records: exact inference and "
    "differencing solve those against every record's values in memory, which an engine does "
    "not do"
)


def check_source_ids_out_of_core(engine: DuckDBEngine, source: Source, id_column: str) -> None:
    """:func:`~.lineage.source_ids`' checks of the source's id column, counted by DuckDB on
    the ids as the in-memory check reads them (:func:`source_id_batches`)."""
    columns = engine.columns(source)
    require_columns(pd.DataFrame(columns=columns), [id_column], role="id column")
    if isinstance(source, pd.DataFrame):
        source_ids(source, id_column)
        return
    with _registered(engine, source_id_batches(source, id_column)) as ids:
        row = engine.con.execute(
            f"SELECT count(*) FILTER (WHERE id IS NULL), count(*) - count(DISTINCT id) FROM {ids}"
        ).fetchall()[0]
    empty_rows = int(row[0])
    check_source_ids(id_column, empty=empty_rows, repeated=0 if empty_rows else int(row[1]))


ID_BATCH_ROWS = 500_000


def source_id_batches(source: str | Path, id_column: str) -> Iterator[pa.RecordBatch]:
    """The record ids of the Parquet ``source`` (a file, or a folder of files read in name
    order) as the in-memory check matches release files' ids to them: each cell as
    :func:`~anonweb.core.io.frame.read_table` reads it
    (:func:`~anonweb.core.io.arrow_cells.arrow_to_pandas`) written as pandas writes the whole
    column (``astype(str)``; missing: null), with its row's number as the engines' lineage
    numbers it (``row``); a batch of rows at a time."""
    path = Path(str(source))
    files = sorted(path.glob("*.parquet")) if path.is_dir() else [path]
    # pandas writes a column of timestamps in the format its finest value needs: each batch
    # is written beside the column's finest values, so in the whole column's format
    finest = _finest_stamps(files, id_column)
    start = 0
    for file in files:
        parquet = pq.ParquetFile(file)
        for batch in parquet.iter_batches(batch_size=ID_BATCH_ROWS, columns=[id_column]):
            values = arrow_to_pandas(batch.column(0))
            both = pd.concat([values, finest], ignore_index=True) if len(finest) else values
            written = both.astype(str).iloc[: len(values)].where(values.notna().to_numpy(), None)
            text = pa.array(written.to_numpy(dtype=object), pa.string())
            rows = pa.array(np.arange(start, start + batch.num_rows, dtype=np.int64))
            start += batch.num_rows
            yield pa.RecordBatch.from_arrays([rows, text], names=["row", "id"])


def _finest_stamps(files: list[Path], column: str) -> pd.Series:
    """For a column of timestamps without a time zone, the values that decide the format
    pandas writes the whole column in: one not at midnight, one not on a whole second, on a
    whole millisecond, on a whole microsecond, where the column has such a value (pandas
    writes the dates alone, or to the second, or 3, 6 or 9 digits of the second). Empty for
    any other column."""
    found: dict[int, Any] = {}
    field = pq.read_schema(files[0]).field(column) if files else None
    if field is None or not pa.types.is_timestamp(field.type) or field.type.tz is not None:
        return pd.Series([], dtype=object)
    dtype = None
    for file in files:
        parquet = pq.ParquetFile(file)
        for batch in parquet.iter_batches(batch_size=ID_BATCH_ROWS, columns=[column]):
            values = arrow_to_pandas(batch.column(0)).dropna()
            dtype = values.dtype
            nanos = values.astype("datetime64[ns]").astype(np.int64).to_numpy()
            for level, unit in enumerate((86_400 * 10**9, 10**9, 10**6, 10**3)):
                off = np.flatnonzero(nanos % unit)
                if level not in found and off.size:
                    found[level] = values.iloc[int(off[0])]
    return pd.Series(list(found.values()), dtype=dtype if found else object)


@contextmanager
def _registered(engine: DuckDBEngine, batches: Iterator[pa.RecordBatch]) -> Iterator[str]:
    """The batches as a DuckDB relation, read once by the query run inside."""
    name = f"anonweb_source_ids_{next(_ids)}"
    schema = pa.schema([("row", pa.int64()), ("id", pa.string())])
    engine.con.register(name, pa.RecordBatchReader.from_batches(schema, batches))
    try:
        yield name
    finally:
        engine.con.unregister(name)


def earlier_out_of_core(
    engine: DuckDBEngine,
    source: Source,
    release: pd.DataFrame,
    *,
    label: str,
    id_column: str,
) -> EarlierRelease:
    """The release file ``release`` (in lineage form, ``id_column`` naming each record of
    ``source``) as an earlier release (status approved) whose ``rows`` are source rows as the
    engines' lineage numbers them. Raises :class:`~anonweb.core.errors.DataError` as
    :func:`~.lineage.view_from_lineage_form` does (no id column, an id not in the source, a
    record listed twice), and :class:`NotOutOfCore` when it publishes means of groups."""
    require_id_column(release, label=label, id_column=id_column)
    columns = engine.columns(source)
    if isinstance(source, pd.DataFrame):  # a table in memory: its ids as the check reads them
        view = view_from_lineage_form(
            source, release, label=label, id_column=id_column, ids=source_ids(source, id_column)
        )
        if view.aggregates:
            found = ", ".join(a.column for a in view.aggregates)
            raise NotOutOfCore(MEANS_NOT_OUT_OF_CORE.format(label=label, columns=found))
        return EarlierRelease(label, "approved", None, view.frame, view.rows)
    frame = release.drop(columns=[id_column]).reset_index(drop=True)
    shared = [str(c) for c in frame.columns if c in columns and c != id_column]
    numeric = [
        c for c in engine.numeric_columns(source, shared) if pd.api.types.is_numeric_dtype(frame[c])
    ]
    row_name = fresh_name("__row", columns)
    ids = f"anonweb_earlier_ids_{next(_ids)}"
    engine.con.register(
        ids,
        pd.DataFrame(
            {
                "id": release[id_column].astype(str).to_numpy(dtype=object),
                "pos": np.arange(len(release), dtype=np.int64),
            }
        ),
    )
    try:
        picked = ", ".join(["k.row", *(f"s.{quote(c)}" for c in numeric)])
        numbers = ""
        if numeric:  # the source's values beside each record, for the means
            numbers = (
                f"LEFT JOIN {engine.numbered(source, row_name)} AS s ON s.{quote(row_name)} = k.row"
            )
        with _registered(engine, source_id_batches(str(source), id_column)) as known:
            table = engine.con.sql(
                f"SELECT {picked} FROM {ids} AS r LEFT JOIN {known} AS k ON r.id = k.id "
                f"{numbers} ORDER BY r.pos"
            ).to_arrow_table()
    finally:
        engine.con.unregister(ids)
    rows = _int_array(table.column(0))
    check_release_rows(rows, label=label)
    at = np.arange(rows.size)
    means = [
        c
        for i, c in enumerate(numeric, 1)
        if read_means(arrow_to_pandas(table.column(i)), frame[c], at, label=label, column=c)
        is not None
    ]
    if means:
        raise NotOutOfCore(MEANS_NOT_OUT_OF_CORE.format(label=label, columns=", ".join(means)))
    return EarlierRelease(label, "approved", None, frame, rows)


def _int_array(column: Any) -> NDArray[np.int64]:
    """An Arrow column of source rows as int64, -1 where an id found no row."""
    return np.asarray(column.fill_null(-1).to_numpy(), dtype=np.int64)


def earlier_file_out_of_core(
    engine: DuckDBEngine,
    source: str | Path,
    path: str | Path,
    *,
    label: str,
    id_column: str,
    folder: str | Path,
    sep: str | None = None,
    decimal: str = ".",
) -> EarlierRelease:
    """:func:`earlier_out_of_core` of the release file at ``path`` (CSV, Excel or Parquet),
    never held in memory: converted to Parquet as :func:`~anonweb.core.io.frame.read_table`
    reads it (the upload's reading, in bounded memory), its ids matched to the source's rows
    by DuckDB, and its published columns and lineage written to ``folder``, where the check out
    of core reads them (``table_file``, ``rows_file``). The same checks and messages; the
    means of groups are looked for one numeric column at a time."""
    folder = Path(folder)
    n = next(_ids)
    staged, table, lineage = (folder / f"earlier-{n}{x}.parquet" for x in ("", "-table", "-rows"))
    if format_of(str(path)) == "parquet":  # its cells in their types, as read_table reads them
        names = rewrite_parquet(path, staged, batch_rows=ID_BATCH_ROWS)
    else:
        info = convert_to_parquet(
            path,
            staged,
            sep=sep,
            name=str(path),
            limits=READ_LIMITS,
            decimal=decimal,
            count_distinct=False,
        )
        names = [c.name for c in info.columns]
    require_id_column(pd.DataFrame(columns=names), label=label, id_column=id_column)
    con = engine.con
    pos = fresh_name("__pos", names)
    rel, ordered = numbered_parquet([str(staged)], pos, names)
    types = dict(
        (str(r[0]), str(r[1])) for r in con.execute(f"DESCRIBE SELECT * FROM {rel}").fetchall()
    )
    # each id as the in-memory check writes it (str of the value read_table gives)
    text = text_sql(
        file_cells(con, staged, {id_column: types[id_column]})[id_column], quote(id_column)
    )
    with _registered(engine, source_id_batches(source, id_column)) as known, in_order(con, ordered):
        con.execute(
            f"COPY (SELECT k.row AS {quote(LINEAGE_COLUMN)} FROM (SELECT {text} AS id, "
            f"{quote(pos)} AS pos FROM {rel}) AS r LEFT JOIN {known} AS k ON r.id = k.id "
            f"ORDER BY r.pos) TO {literal(str(lineage))} (FORMAT parquet)"
        )
    read = f"read_parquet({literal(str(lineage))})"
    unknown, listed, distinct = con.execute(
        f"SELECT count(*) FILTER (WHERE {quote(LINEAGE_COLUMN)} IS NULL), "
        f"count({quote(LINEAGE_COLUMN)}), count(DISTINCT {quote(LINEAGE_COLUMN)}) FROM {read}"
    ).fetchall()[0]
    check_release_counts(unknown=int(unknown), twice=int(listed) - int(distinct), label=label)
    _without(staged, table, id_column)
    columns = engine.columns(source)
    released = pq.read_schema(str(table))
    shared = [c for c in released.names if c in columns]
    numeric = [
        c
        for c in engine.numeric_columns(source, shared)
        if pa.types.is_integer(released.field(c).type)
        or pa.types.is_floating(released.field(c).type)
    ]
    means = [c for c in numeric if _means(engine, source, table, lineage, c, label=label)]
    if means:
        raise NotOutOfCore(MEANS_NOT_OUT_OF_CORE.format(label=label, columns=", ".join(means)))
    staged.unlink()
    return EarlierRelease(label, "approved", None, table_file=str(table), rows_file=str(lineage))


def _without(staged: Path, out: Path, column: str) -> None:
    """The Parquet file ``staged`` without ``column``, written to ``out`` a batch at a time,
    its pandas metadata kept for the others (which dtype pandas reads each in)."""
    import json

    parquet = pq.ParquetFile(staged)
    schema = parquet.schema_arrow
    meta = dict(schema.metadata or {})
    if b"pandas" in meta:
        pandas = json.loads(meta[b"pandas"])
        pandas["columns"] = [c for c in pandas.get("columns", []) if c.get("name") != column]
        meta[b"pandas"] = json.dumps(pandas).encode()
    kept = [n for n in schema.names if n != column]
    target = pa.schema([schema.field(n) for n in kept], metadata=meta)
    with pq.ParquetWriter(str(out), target) as writer:
        for batch in parquet.iter_batches(batch_size=ID_BATCH_ROWS, columns=kept):
            writer.write_batch(pa.RecordBatch.from_arrays(batch.columns, schema=target))


def _means(
    engine: DuckDBEngine, source: str | Path, table: Path, lineage: Path, column: str, *, label: str
) -> bool:
    """Whether the release file publishes ``column`` as the means of groups of records
    (:func:`~.lineage.read_means`, given the source's values of its records)."""
    row = fresh_name("__row", engine.columns(source))
    values = engine.con.sql(
        f"SELECT s.{quote(column)} FROM read_parquet({literal(str(lineage))}, "
        f"file_row_number = true) AS l JOIN {engine.numbered(source, row)} AS s "
        f"ON s.{quote(row)} = l.{quote(LINEAGE_COLUMN)} ORDER BY l.file_row_number"
    ).to_arrow_table()
    released = pq.read_table(str(table), columns=[column]).to_pandas()[column]
    at = np.arange(len(released))
    found = read_means(arrow_to_pandas(values.column(0)), released, at, label=label, column=column)
    return found is not None
