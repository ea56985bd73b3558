"""The conflict check of a new record-level release against the earlier live releases of its
source, out of core.

A release an engine writes keeps its lineage in a private Parquet file beside it (one column,
:data:`~anonweb.core.engine.lineage.LINEAGE_COLUMN`: the source row of each released row, in
the release's row order). :func:`engine_release_conflicts` reads each record-level release from
its files (or tables in memory) as they are, has DuckDB join and count each pair
(:mod:`.engine_linkage`, whose findings the in-memory check's own functions decide and word), and
ends as the in-memory check does (:func:`~.release.finish_check`): the same findings, in the same
order, with the same figures.

Not out of core: exact inference and differencing solve the aggregates releases publish
against every record's values in memory (:mod:`.inference`), so an earlier live release that
publishes aggregates stops the check (:class:`NotOutOfCore`, naming those kinds), as does an
earlier release whose lineage cannot be read.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.conflicts.check import ConflictReport, sorted_findings
from anonweb.core.conflicts.engine_linkage import (
    NotOutOfCore,
    TableRelease,
    drop_tables,
    l_alone,
    literal,
    load,
    pair_findings_out_of_core,
    relation,
    scalar,
)
from anonweb.core.conflicts.findings import Finding

__all__ = ["LINEAGE_COLUMN", "NotOutOfCore", "TableRelease", "engine_release_conflicts"]
from anonweb.core.conflicts.release import (
    DEFAULT_K,
    DEFAULT_L,
    NEW_LABEL,
    ConflictCheck,
    EarlierRelease,
    finish_check,
    shown_qis,
)
from anonweb.core.engine.lineage import LINEAGE_COLUMN

__all__ = ["LINEAGE_COLUMN", "NotOutOfCore", "TableRelease", "engine_release_conflicts"]

AGGREGATES_NOT_OUT_OF_CORE = (
    "exact inference and differencing (the aggregates {releases} publish are solved against "
    "every record's values in memory, which an engine does not do)"
)


@contextmanager
def _tables(con: Any) -> Iterator[list[str]]:
    names: list[str] = []
    try:
        yield names
    finally:
        drop_tables(con, *names)


def _earlier_table(other: EarlierRelease) -> TableRelease | None:
    table = other.frame if other.frame is not None else other.table_file
    rows = other.rows if other.rows is not None else other.rows_file
    if table is None or rows is None:
        return None
    return TableRelease(other.label, table, rows, other.quasi_identifiers)


def _max_row(con: Any, rows: str | Path | NDArray[Any]) -> int:
    if isinstance(rows, np.ndarray):
        return int(rows.max()) if rows.size else -1
    lineage, _ = relation(con, rows, LINEAGE_COLUMN)  # the greatest row whatever the order
    least = scalar(con, f"SELECT max(__row) FROM {lineage}")
    return -1 if least is None else int(least)


def engine_release_conflicts(
    con: Any,
    new: TableRelease,
    *,
    earlier: Sequence[EarlierRelease],
    source_rows: int,
    source_columns: Sequence[str],
    quasi_identifiers: Sequence[str] = (),
    sensitive: Sequence[str] = (),
    k: int | None = None,
    l: int | None = None,  # noqa: E741 (the literature's letter)
) -> ConflictCheck:
    """:func:`~.release.release_conflicts` of a record-level release ``new`` (labelled
    :data:`~.release.NEW_LABEL`; ``new.quasi_identifiers`` its plan's) against the ``earlier``
    live releases of a source of ``source_rows`` rows with ``source_columns``, counted by the
    DuckDB connection ``con``: the same findings, in the same order, with the same figures.
    Raises :class:`NotOutOfCore` when an earlier release asks for a part that is not counted
    out of core (see the module's note)."""
    k = DEFAULT_K if k is None else k
    l = DEFAULT_L if l is None else l  # noqa: E741
    sensitive = [s for s in dict.fromkeys(sensitive) if s in source_columns]
    tagged = list(quasi_identifiers)
    out = ConflictCheck()
    out.ids = {NEW_LABEL: None}
    out.statuses[NEW_LABEL] = "new"
    others: list[TableRelease] = []
    labels = [NEW_LABEL]
    dp: list[str] = []
    aggregated: list[str] = []
    for other in earlier:
        if other.error is not None:
            raise NotOutOfCore(
                f"the lineage of {other.label} cannot be read ({other.error}), so this release "
                "cannot be checked against it"
            )
        table = _earlier_table(other)
        rows = table.rows if table is not None else None
        if rows is not None and _max_row(con, rows) >= source_rows:
            continue  # made from another upload of the data: rows do not align
        if other.aggregates and other.aggregates[0].groups.size != source_rows:
            continue
        if other.aggregates and not other.dp:
            aggregated.append(other.label)
        out.ids[other.label] = other.id
        out.statuses[other.label] = other.status
        labels.append(other.label)
        if other.id is not None:
            out.checked.append(other.id)
        if other.dp:
            dp.append(other.label)
        elif table is not None:
            others.append(table)
    if aggregated:
        raise NotOutOfCore(AGGREGATES_NOT_OUT_OF_CORE.format(releases=", ".join(aggregated)))
    if len(labels) == 1:
        return out
    notes = tuple(
        f"{label} is differentially private: its noise is counted in the privacy budget, "
        "not in this check"
        for label in dp
    )
    findings: list[Finding] = []
    alone: dict[tuple[str, str], int] = {}
    with _tables(con) as names:
        mine = load(con, new, shown_qis(new.quasi_identifiers, _columns(con, new), tagged))
        names.append(mine.name)
        alone |= l_alone(con, mine, sensitive)
        for other_table in others:
            qis = shown_qis(other_table.quasi_identifiers, _columns(con, other_table), tagged)
            theirs = load(con, other_table, qis)
            names.append(theirs.name)
            alone |= l_alone(con, theirs, sensitive)
            findings += pair_findings_out_of_core(
                con, mine, theirs, sensitive=sensitive, k=k, l=l, unlinked_k=False
            )
    report = ConflictReport(tuple(sorted_findings(findings)), (), tuple(labels), notes)
    return finish_check(out, report, alone)


def _columns(con: Any, release: TableRelease) -> list[str]:
    if isinstance(release.table, pd.DataFrame):
        return [str(c) for c in release.table.columns]
    read = f"read_parquet({literal(str(release.table))})"
    return [str(r[0]) for r in con.execute(f"DESCRIBE SELECT * FROM {read}").fetchall()]
