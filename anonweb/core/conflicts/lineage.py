"""Lineage: which source record each released row describes, and what a release published about
numeric columns over groups of records.

The web keeps a release's lineage privately when it makes the release (the row mapping, the
microaggregation groups, the groups of an aggregate table). On the command line a release file
carries it in its id column (the *lineage form* of a release: the published columns plus the
record id), and the aggregates are read off the values:

* a quasi-identifier column is read as its generalized classes, as published;
* a numeric column whose rows share a value is read as that group's mean, when it is one: the
  source's values over those rows average to it (to within the released precision) and they are
  not all equal to it (then the column is simply published as it is, or rounded). Noisy or
  row-by-row rounded columns therefore add no equation, and nothing is assumed that the data
  contradict. A mean is only as exact as it is printed: a column of means with two decimals
  stands for intervals of ± 0.005 (:func:`printed_precision`), and the check solves with them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.conflicts.check import ReleaseView
from anonweb.core.conflicts.inference import Aggregate
from anonweb.core.errors import DataError
from anonweb.core.io.frame import require_columns


def source_ids(source: pd.DataFrame, id_column: str) -> pd.Index:
    """The source's record ids (as text), checked unique and present."""
    require_columns(source, [id_column], role="id column")
    ids = source[id_column]
    index = pd.Index(ids.astype(str))
    check_source_ids(id_column, empty=int(ids.isna().sum()), repeated=int(index.duplicated().sum()))
    return index


def check_source_ids(id_column: str, *, empty: int, repeated: int) -> None:
    """The source's id column can name each record: no id ``empty``, none ``repeated``."""
    if empty:
        raise DataError(f"the id column {id_column!r} is empty in {empty} row(s)")
    if repeated:
        raise DataError(f"the id column {id_column!r} is not unique ({repeated} repeated id(s))")


def check_release_rows(rows: NDArray[Any], *, label: str) -> None:
    """A release file's records, as source rows (-1 for an id not in the source), each a
    record of the source listed once."""
    unknown = int((rows < 0).sum())
    check_release_counts(
        unknown=unknown, twice=0 if unknown else rows.size - np.unique(rows).size, label=label
    )


def check_release_counts(*, unknown: int, twice: int, label: str) -> None:
    """A release file names no record the source lacks (``unknown`` ids) and none ``twice``."""
    if unknown:
        raise DataError(f"{label}: {unknown} id(s) are not in the source")
    if twice:
        raise DataError(f"{label}: lists {twice} record(s) twice")


def require_id_column(release: pd.DataFrame, *, label: str, id_column: str) -> None:
    if id_column not in release.columns:
        raise DataError(f"{label}: has no id column {id_column!r} (the lineage form carries it)")


def view_from_lineage_form(
    source: pd.DataFrame,
    release: pd.DataFrame,
    *,
    label: str,
    id_column: str,
    ids: pd.Index,
    quasi_identifiers: Sequence[str] = (),
) -> ReleaseView:
    """A release file in lineage form (published columns plus the id column) as a view."""
    require_id_column(release, label=label, id_column=id_column)
    rows = ids.get_indexer(release[id_column].astype(str))
    check_release_rows(rows, label=label)
    frame = release.drop(columns=[id_column]).reset_index(drop=True)
    aggregates = tuple(
        agg
        for col in frame.columns
        if col in source.columns and col != id_column
        for agg in [read_means(source[col], frame[col], rows, label=label, column=str(col))]
        if agg is not None
    )
    qis = tuple(q for q in quasi_identifiers if q in frame.columns)
    return ReleaseView(label, frame, rows.astype(np.int64), aggregates, qis)


def read_means(
    source_col: pd.Series,
    released: pd.Series,
    rows: NDArray[Any],
    *,
    label: str,
    column: str,
    precision: float | None = None,
) -> Aggregate | None:
    """The groups of rows sharing a released value that is the mean of their source values.

    ``precision`` is half a unit in the last place of the released figures when the release
    declares it (0: published exactly); by default it is read from how the column is printed
    (:func:`printed_precision`)."""
    if not (pd.api.types.is_numeric_dtype(source_col) and pd.api.types.is_numeric_dtype(released)):
        return None
    v = pd.to_numeric(released, errors="coerce").to_numpy(dtype=float)
    truth = pd.to_numeric(source_col, errors="coerce").to_numpy(dtype=float)[rows]
    ok = np.isfinite(v) & np.isfinite(truth)
    codes, uniques = pd.factorize(np.where(ok, v, np.nan))
    if not uniques.size:
        return None
    half = printed_precision(np.asarray(uniques, dtype=float)) if precision is None else precision
    inside = codes >= 0
    size = np.bincount(codes[inside], minlength=uniques.size)
    total = np.bincount(codes[inside], weights=truth[inside], minlength=uniques.size)
    spread = np.zeros(uniques.size)
    np.maximum.at(spread, codes[inside], np.abs(truth[inside] - v[inside]))
    tol = np.maximum(half, 1e-9 * np.maximum(1.0, np.abs(np.asarray(uniques, dtype=float))))
    mean = total / np.maximum(size, 1)
    accepted = (size >= 2) & (np.abs(mean - uniques) <= tol) & (spread > tol)
    if not accepted.any():
        return None
    remap = np.full(uniques.size, -1, dtype=np.int64)
    remap[accepted] = np.arange(int(accepted.sum()))
    groups = np.full(source_col.size, -1, dtype=np.int64)
    member = inside & accepted[np.maximum(codes, 0)]
    groups[rows[member]] = remap[codes[member]]
    return Aggregate(
        label, column, groups, np.asarray(uniques, dtype=float)[accepted], precision=half
    )


def printed_precision(values: NDArray[Any]) -> float:
    """Half a unit in the last decimal place a column's figures are printed with: 47.33 and
    35.75 -> 0.005, 43.0 and 81.0 -> 0.5. A column printed in full (some figure with 12 or more
    decimals, as a computer writes 47.333333333333336) is exact: 0."""
    most = 0
    for value in values.tolist():
        text = repr(float(value))
        if "e" in text or "inf" in text or "nan" in text:
            return 0.0
        decimals = len(text.split(".")[1].rstrip("0"))
        if decimals >= 12:
            return 0.0
        most = max(most, decimals)
    return 0.5 * 10.0**-most


def microaggregated(
    source: pd.DataFrame,
    released: pd.DataFrame,
    rows: NDArray[Any],
    *,
    columns: Sequence[str],
    label: str,
) -> tuple[Aggregate, ...]:
    """What a release published about ``columns`` as microaggregated means: for each column, the
    groups of records shown their group's mean (``released`` row ``j`` is source row
    ``rows[j]``). This is the lineage a release keeps privately when it is made: the means are
    as the release publishes them, unrounded, so they are exact figures."""
    rows = np.asarray(rows, dtype=np.int64)
    out = []
    for col in dict.fromkeys(columns):
        if col not in source.columns or col not in released.columns:
            continue
        agg = read_means(
            source[col],
            released[col].reset_index(drop=True),
            rows,
            label=label,
            column=str(col),
            precision=0.0,
        )
        if agg is not None:
            out.append(agg)
    return tuple(out)


def relabel(aggregate: Aggregate, label: str) -> Aggregate:
    """The same figures under another release label."""
    return Aggregate(
        label,
        aggregate.column,
        aggregate.groups,
        aggregate.figures,
        aggregate.statistic,
        aggregate.table,
        aggregate.precision,
    )
