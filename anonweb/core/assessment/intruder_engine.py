"""The maximum-knowledge intruder check (:mod:`.intruder`) on tables an engine reads, without
either table in memory.

The check reads a record only through its values: its ranks are counted from each column's
values and a record is linked by its ranks. So the records are read as the distinct pairs of
an original record's values and its anonymized counterpart's, with how many records are each
pair: DuckDB sets the two tables side by side, row for row, into one Parquet file (out of core)
and the engine counts its histogram over those columns; :func:`~.intruder.rank_cells` and
:func:`~.intruder.intruder_from_cells` then give the in-memory check's figures, the same to the
last bit, since both count the same cells in the same order.

The ``euclidean`` metric is not run here: it reverse-maps each anonymized value to the original
value of the same position in the sorted column, ties taken in the records' order, so a record's
coordinates depend on its neighbours and not on its values alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.engine.base import Engine, Source, fresh_name
from anonweb.core.engine.duckdb_engine import DuckDBEngine, literal, quote
from anonweb.core.errors import ParameterError
from anonweb.core.io.frame import require_columns
from anonweb.core.risk.intruder import (
    IntruderResult,
    check_options,
    intruder_from_cells,
    numeric_column,
    rank_cells,
    same_records,
)

EUCLIDEAN_IN_MEMORY = (
    "the euclidean metric reverse-maps tied anonymized values in the records' order, so it "
    "reads every record in memory: use --engine pandas, or the rank metric"
)


def side_by_side(
    duck: DuckDBEngine,
    original: Source,
    anonymized: Source,
    columns: Sequence[str],
    out: str | Path,
) -> tuple[list[str], list[str]]:
    """``columns`` of ``original`` and of ``anonymized``, row for row, written to the Parquet
    file ``out`` (DuckDB, out of core) as ``x0, x1, ...`` and ``y0, y1, ...``; their names.
    Refused as :func:`~.intruder.intruder_check` refuses them: a column missing, or tables of
    different numbers of rows."""
    for source in (original, anonymized):
        require_columns(pd.DataFrame(columns=duck.columns(source)), list(columns))
    same_records(duck.row_count(original), duck.row_count(anonymized))
    xs = [f"x{j}" for j in range(len(columns))]
    ys = [f"y{j}" for j in range(len(columns))]
    left = ", ".join(f"{quote(c)} AS {x}" for c, x in zip(columns, xs, strict=True))
    right = ", ".join(f"{quote(c)} AS {y}" for c, y in zip(columns, ys, strict=True))
    duck.con.execute("SET preserve_insertion_order = true")  # row for row: the tables' order
    try:
        duck.con.execute(
            f"COPY (SELECT * FROM (SELECT {left} FROM {duck.relation(original)}) POSITIONAL JOIN "
            f"(SELECT {right} FROM {duck.relation(anonymized)})) TO {literal(str(out))} "
            "(FORMAT parquet)"
        )
    finally:
        duck.con.execute("SET preserve_insertion_order = false")
    return xs, ys


def side_by_side_by_lineage(
    duck: DuckDBEngine,
    source: Source,
    released: str,
    lineage: str,
    columns: Sequence[str],
    out: str | Path,
) -> tuple[list[str], list[str]]:
    """As :func:`side_by_side`, for a release whose rows are in another order: each released
    row beside its source row, as its ``lineage`` file names it (the source numbered as the
    engines' lineage numbers it)."""
    row = fresh_name("__row", duck.columns(source))
    xs = [f"x{j}" for j in range(len(columns))]
    ys = [f"y{j}" for j in range(len(columns))]
    left = ", ".join(f"s.{quote(c)} AS {x}" for c, x in zip(columns, xs, strict=True))
    right = ", ".join(f"r.{quote(c)} AS {y}" for c, y in zip(columns, ys, strict=True))
    rel, src = duck.released_with_sources(released, lineage)
    duck.con.execute(
        f"COPY (SELECT {left}, {right} FROM {rel} AS r "
        f"JOIN {duck.numbered(source, row)} AS s ON s.{quote(row)} = r.{quote(src)}) "
        f"TO {literal(str(out))} (FORMAT parquet)"
    )
    return xs, ys


def intruder_check_on_engine(
    engine: Engine,
    duck: DuckDBEngine,
    original: Source,
    anonymized: Source,
    *,
    columns: list[str],
    rng: np.random.Generator,
    workdir: str | Path,
    metric: str = "rank",
    baseline: str = "records",
    n_baseline: int | None = None,
) -> IntruderResult:
    """:func:`~.intruder.intruder_check` of ``original`` and ``anonymized`` (files, the same
    records in the same order) with ``engine`` counting the records: the same result for the
    same ``rng``. ``duck`` sets the tables side by side in ``workdir``."""
    check_options(columns, metric, baseline)
    if metric != "rank":
        raise ParameterError(EUCLIDEAN_IN_MEMORY)
    paired = Path(workdir) / "intruder-pairs.parquet"
    xs, ys = side_by_side(duck, original, anonymized, columns, paired)
    return _from_pairs(engine, str(paired), xs, ys, columns, rng, baseline, n_baseline)


def intruder_check_of_release(
    engine: Engine,
    duck: DuckDBEngine,
    source: Source,
    released: str,
    lineage: str,
    *,
    columns: list[str],
    rng: np.random.Generator,
    workdir: str | Path,
) -> IntruderResult:
    """:func:`~.intruder.intruder_check` of a release an engine wrote (``released``, its rows
    in any order) against its ``source``, each record paired with its released row through the
    release's ``lineage``: what the in-memory release reports for the same ``rng``."""
    check_options(columns, "rank", "records")
    paired = Path(workdir) / "intruder-pairs.parquet"
    xs, ys = side_by_side_by_lineage(duck, source, released, lineage, columns, paired)
    return _from_pairs(engine, str(paired), xs, ys, columns, rng, "records", None)


def _from_pairs(
    engine: Engine,
    paired: str,
    xs: list[str],
    ys: list[str],
    columns: Sequence[str],
    rng: np.random.Generator,
    baseline: str,
    n_baseline: int | None,
) -> IntruderResult:
    """The check from the side-by-side file ``paired``, its records counted by ``engine``."""
    metric = "rank"
    hist = engine.histogram(paired, [*xs, *ys])
    counts = np.asarray(hist.counts, dtype=np.int64)

    def values(names: list[str], label: str) -> NDArray[Any]:
        return np.column_stack(
            [
                numeric_column(hist.column(n).reset_index(drop=True), c, label, counts)
                for n, c in zip(names, columns, strict=True)
            ]
        )

    cells = rank_cells(values(xs, "original"), values(ys, "anonymized"), counts)
    return intruder_from_cells(
        cells, columns=columns, rng=rng, metric=metric, baseline=baseline, n_baseline=n_baseline
    )
