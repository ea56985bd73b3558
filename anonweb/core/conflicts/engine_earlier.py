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

from itertools import count
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.conflicts.engine_linkage import NotOutOfCore
from anonweb.core.conflicts.lineage import (
    check_release_rows,
    check_source_ids,
    read_means,
    require_id_column,
)
from anonweb.core.conflicts.release import EarlierRelease
from anonweb.core.engine.base import Source, fresh_name
from anonweb.core.engine.duckdb_engine import DuckDBEngine, quote
from anonweb.core.io.frame import require_columns

_ids = count()

MEANS_NOT_OUT_OF_CORE = (
    "{label} publishes {columns} as the means of groups of records: exact inference and "
    "differencing solve those against every record's values in memory, which an engine does "
    "not do"
)


def check_source_ids_out_of_core(engine: DuckDBEngine, source: Source, id_column: str) -> None:
    """:func:`~.lineage.source_ids`' checks of the source's id column, counted by DuckDB."""
    columns = engine.columns(source)
    require_columns(pd.DataFrame(columns=columns), [id_column], role="id column")
    rel = engine.numbered(source, fresh_name("__row", columns))
    col = quote(id_column)
    empty = f"{col} IS NULL"
    if engine.numeric_columns(source, [id_column]):
        empty += f" OR isnan(CAST({col} AS DOUBLE))"  # pandas reads NaN as missing
    row = engine.con.execute(
        f"SELECT count(*) FILTER (WHERE {empty}), "
        f"count(*) - count(DISTINCT CAST({col} AS VARCHAR)) FROM {rel}"
    ).fetchone() or (0, 0)
    empty_rows = int(row[0])
    check_source_ids(id_column, empty=empty_rows, repeated=0 if empty_rows else int(row[1]))


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
    frame = release.drop(columns=[id_column]).reset_index(drop=True)
    shared = [str(c) for c in frame.columns if c in columns and c != id_column]
    numeric = [
        c for c in engine.numeric_columns(source, shared) if pd.api.types.is_numeric_dtype(frame[c])
    ]
    row_name = fresh_name("__row", columns)
    sid = fresh_name("__sid", [*columns, row_name])
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
        picked = ", ".join(f"s.{quote(c)}" for c in [row_name, *numeric])
        table = engine.con.sql(
            f"SELECT {picked} FROM {ids} AS r LEFT JOIN (SELECT CAST({quote(id_column)} AS "
            f"VARCHAR) AS {quote(sid)}, * FROM {engine.numbered(source, row_name)}) AS s "
            f"ON r.id = s.{quote(sid)} ORDER BY r.pos"
        ).to_arrow_table()
    finally:
        engine.con.unregister(ids)
    rows = _int_array(table.column(0))
    check_release_rows(rows, label=label)
    at = np.arange(rows.size)
    means = [
        c
        for i, c in enumerate(numeric, 1)
        if read_means(pd.Series(table.column(i).to_pandas()), frame[c], at, label=label, column=c)
        is not None
    ]
    if means:
        raise NotOutOfCore(MEANS_NOT_OUT_OF_CORE.format(label=label, columns=", ".join(means)))
    return EarlierRelease(label, "approved", None, frame, rows)


def _int_array(column: Any) -> NDArray[np.int64]:
    """An Arrow column of source rows as int64, -1 where an id found no row."""
    return np.asarray(column.fill_null(-1).to_numpy(), dtype=np.int64)
