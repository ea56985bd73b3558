"""Each DP statistic's released figures, labelled, and the same figures on the source.

The released figures are read from the released table and their half-widths from the step's
report (computed by the mechanism from its noise scale, without data). The figures on the source
are what the mechanism would release without noise, for the utility table's "exact" column: a
source figure, internal only. The declarations in :mod:`anonweb.core.dp.kinds` name these
functions; :mod:`anonweb.core.utility.dp` calls them through the registry.

A figure function takes the report entry, the released rows of its step and ``stat(label,
value, half, interval, bounds=None)``, which makes one labelled figure (the utility table's row).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from anonweb.core.dp.mechanisms import (
    COUNT_COLUMN,
    KEY_SEP,
    DPQuery,
    histogram_cells,
    histogram_keys,
    numeric_values,
    range_edges,
)

Stat = Callable[..., Any]
Truth = dict[str, tuple[float, float]]


def value_figures(
    column: str, key: str = "ci95_halfwidth", interval: str = "exact"
) -> Callable[[Mapping[str, Any], pd.DataFrame, Stat], list[Any]]:
    """A statistic released as one noisy value in ``column``, labelled with its kind, with the
    half-width under ``key`` of its report entry (``interval``: "exact" when it is the
    mechanism's own, "approximate" otherwise)."""

    def figures(entry: Mapping[str, Any], part: pd.DataFrame, stat: Stat) -> list[Any]:
        if part.empty or column not in part.columns:
            return []
        return [stat(str(entry["kind"]), part[column].iloc[0], entry.get(key), interval)]

    return figures


def histogram_figures(entry: Mapping[str, Any], part: pd.DataFrame, stat: Stat) -> list[Any]:
    columns = [str(c) for c in entry.get("columns") or []]
    if part.empty or not set(columns) <= set(part.columns) or COUNT_COLUMN not in part:
        return []
    labels = part[columns].astype(str).agg(" · ".join, axis=1)
    half = entry.get("ci95_halfwidth")
    return [
        stat(str(lab), v, half, "exact") for lab, v in zip(labels, part[COUNT_COLUMN].to_numpy())
    ]


def range_figures(entry: Mapping[str, Any], part: pd.DataFrame, stat: Stat) -> list[Any]:
    if part.empty or not {"bin_lo", "bin_hi", COUNT_COLUMN} <= set(part.columns):
        return []
    half = entry.get("ci95_halfwidth")
    last = len(part) - 1
    bins = [
        stat(range_label(lo, hi, last=i == last), v, half, "exact")
        for i, (lo, hi, v) in enumerate(
            zip(part["bin_lo"], part["bin_hi"], part[COUNT_COLUMN].to_numpy())
        )
    ]
    cumulative = list(entry.get("cumulative_ci95_halfwidth") or [])
    if "noisy_cumulative" not in part.columns or len(cumulative) != len(part):
        return bins
    return bins + [
        stat(cumulative_label(hi, last=i == last), v, h, "exact")
        for i, (hi, v, h) in enumerate(
            zip(part["bin_hi"], part["noisy_cumulative"].to_numpy(), cumulative)
        )
    ]


def quantile_figures(entry: Mapping[str, Any], part: pd.DataFrame, stat: Stat) -> list[Any]:
    if part.empty or not {"alpha", "quantile"} <= set(part.columns):
        return []
    intervals = list(entry.get("quantile_ci95") or [])
    out = []
    for i, (a, v) in enumerate(zip(part["alpha"], part["quantile"])):
        value = float(v)
        if not math.isfinite(value):
            continue
        if i < len(intervals):
            lo, hi = (float(x) for x in intervals[i])
            half = max(value - lo, hi - value)
            out.append(stat(f"quantile {a:g}", v, half, "exact", bounds=(lo, hi)))
        else:  # a release made before quantiles had intervals
            out.append(stat(f"quantile {a:g}", v, None, "none"))
    return out


def range_label(lo: float, hi: float, *, last: bool) -> str:
    return f"[{lo:g}, {hi:g}{']' if last else '['}"


def cumulative_label(hi: float, *, last: bool) -> str:
    return f"{'≤' if last else '<'} {hi:g} (cumulative)"


# -- the figures on the source (a first step reads the source itself) ------------------------
# Each maps a label to its exact figure and how far it can exceed what the mechanism counted
# because contribution bounding dropped rows. Counts are figures of rows; a sum or mean with a
# contribution bound is not stated (the rows dropped could move it either way).


def count_truth(query: DPQuery, source: pd.DataFrame) -> Truth | None:
    cells = pd.Series(["count"] * len(source), index=source.index)
    return _counted(query, source, cells, ["count"])


def histogram_truth(query: DPQuery, source: pd.DataFrame) -> Truth | None:
    if query.categories is None:
        return None
    keys = pd.Series(histogram_keys(source, query), index=source.index)
    # every declared cell, those no record falls in included
    labels = {cell: cell.replace(KEY_SEP, " · ") for cell in histogram_cells(query)}
    out = _counted(query, source, keys, list(labels))
    return {labels[k]: v for k, v in out.items()}


def _clamped(query: DPQuery, source: pd.DataFrame) -> np.ndarray[Any, Any] | None:
    if query.bounds is None or query.identifier is not None:
        return None
    values = np.asarray(numeric_values(source, query.columns[0]), dtype=float)
    return np.clip(values, query.bounds[0], query.bounds[1])


def sum_truth(query: DPQuery, source: pd.DataFrame) -> Truth | None:
    clamped = _clamped(query, source)
    return None if clamped is None else {"sum": (float(clamped.sum()), 0.0)}


def mean_truth(query: DPQuery, source: pd.DataFrame) -> Truth | None:
    clamped = _clamped(query, source)
    if clamped is None or not len(clamped):
        return None
    return {"mean": (float(clamped.mean()), 0.0)}


def quantile_truth(query: DPQuery, source: pd.DataFrame) -> Truth | None:
    if query.bounds is None or query.identifier is not None:
        return None
    return _exact_quantiles(query, numeric_values(source, query.columns[0]))


def range_truth(query: DPQuery, source: pd.DataFrame) -> Truth | None:
    if query.bounds is None:
        return None
    return _exact_range(query, source)


def _exact_quantiles(query: DPQuery, values: list[float]) -> dict[str, tuple[float, float]] | None:
    """Each quantile as the mechanism reads it, without the noise: from the source's counts in
    the public bins, linear within a bin. What lies between that and the quantile of the raw
    values depends on how values spread inside a bin, which no bin count tells (the report's
    statement gives the bin width for it)."""
    if not values:
        return None
    edges = range_edges(query)
    clamped = np.clip(np.asarray(values, dtype=float), edges[0], edges[-1])
    counts = np.bincount(np.searchsorted(edges[1:-1], clamped, side="right"), minlength=query.bins)
    cumulative = np.concatenate([[0.0], np.cumsum(counts)])
    return {
        f"quantile {a:g}": (float(np.interp(a * cumulative[-1], cumulative, edges)), 0.0)
        for a in query.alphas
    }


def _counted(
    query: DPQuery, source: pd.DataFrame, cells: pd.Series, labels: Sequence[Hashable]
) -> dict[Any, tuple[float, float]]:
    """Row counts per cell (``cells``: the cell of each row of ``source`` the statistic counts),
    and the rows of each cell bounding can drop: a person over the bound loses ``rows − bound``
    of all their rows, at most as many in a cell as they have there."""
    counts = cells.value_counts()
    short: pd.Series = pd.Series(0.0, index=list(labels))
    if query.identifier is not None:
        ids = source[query.identifier].astype(object)
        everyone = ids.where(ids.notna(), "")  # missing identifiers: one person, as bounded
        excess = (everyone.value_counts() - query.max_contributions).clip(lower=0)
        person = everyone.loc[cells.index]
        over = person.map(excess) > 0
        if over.any():
            held = pd.crosstab(person[over], cells[over])
            lost = np.minimum(held.to_numpy(), excess.loc[held.index].to_numpy()[:, None])
            short = short.add(pd.Series(lost.sum(axis=0), index=held.columns), fill_value=0)
    return {c: (float(counts.get(c, 0)), float(short.get(c, 0.0))) for c in labels}


def _exact_range(query: DPQuery, source: pd.DataFrame) -> dict[str, tuple[float, float]]:
    """Each bin's count and each cumulative count, binned as the mechanism bins (OpenDP's
    ``find_bin``: a value on an inner edge goes to the bin above it). Rows with no value are
    not counted by the mechanism either."""
    edges = range_edges(query)
    values = pd.to_numeric(source[query.columns[0]], errors="coerce")
    present = source[values.notna()]
    clamped = np.clip(values[values.notna()].to_numpy(dtype=float), edges[0], edges[-1])
    bins = pd.Series(np.searchsorted(edges[1:-1], clamped, side="right"), index=present.index)
    per_bin = _counted(query, source, bins, list(range(query.bins)))
    last = query.bins - 1
    out = {}
    for i, (lo, hi) in enumerate(zip(edges[:-1], edges[1:])):
        out[range_label(lo, hi, last=i == last)] = per_bin[i]
        below = bins <= i
        total = float(below.sum())
        shortfall = _counted(query, source, below.map({True: "in", False: "out"}), ["in"])
        out[cumulative_label(hi, last=i == last)] = (total, shortfall["in"][1])
    return out
