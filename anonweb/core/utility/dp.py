"""DP statistics of a release with their 95% intervals, and (internal) their exact values.

The noisy value is read from the released table and the half-width from its step's report,
which the mechanism computed from its noise scale with OpenDP's accuracy helpers
(:func:`anonweb.core.dp.accounting.laplace_ci95`): one definition of the interval. ``interval``
says whether it is the mechanism's own (OpenDP's accuracy; for range counts, the error
distribution of the consistent tree, :mod:`anonweb.core.dp.accuracy`) or an approximation (a
mean, local DP). With the plan at hand, the value on the source is shown beside it when the statistic read
the source as it is (the plan's first step, no contribution bound).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from anonweb.core.dp.charts import needs_table, statistic_rows
from anonweb.core.dp.mechanisms import (
    COUNT_COLUMN,
    KEY_SEP,
    KINDS,
    DPQuery,
    histogram_cells,
    histogram_keys,
    numeric_values,
    range_edges,
)
from anonweb.core.errors import CoreError
from anonweb.core.release.plan import get_step
from anonweb.core.release.steps import Plan


@dataclass(frozen=True)
class DPStatistic:
    step: int
    kind: str
    columns: tuple[str, ...]
    label: str
    value: float
    halfwidth: float | None
    interval: str  # "exact" (OpenDP's accuracy), "approximate" or "none"
    exact: float | None = None  # the value on the source, when it can be stated
    # How far the source's figure can exceed what the mechanism counted, because contribution
    # bounding dropped rows (a source figure: internal only); the interval widens upwards by it.
    shortfall: float = 0.0
    # An interval that is not symmetric about the value (a quantile's), when there is one.
    bounds: tuple[float, float] | None = None

    @property
    def low(self) -> float | None:
        if self.bounds is not None:
            return self.bounds[0]
        return None if self.halfwidth is None else self.value - self.halfwidth

    @property
    def high(self) -> float | None:
        if self.bounds is not None:
            return self.bounds[1] + self.shortfall
        return None if self.halfwidth is None else self.value + self.halfwidth + self.shortfall

    def to_dict(self) -> dict[str, Any]:
        half, low, high = self.halfwidth, self.low, self.high
        covered = None
        if low is not None and high is not None and self.exact is not None:
            covered = low <= self.exact <= high
        return {
            "step": self.step,
            "kind": self.kind,
            "columns": list(self.columns),
            "label": self.label,
            "value": self.value,
            "ci95_halfwidth": half,
            "shortfall_bound": self.shortfall,
            "low": low,
            "high": high,
            "interval": self.interval,
            "exact": self.exact,
            "exact_in_interval": covered,
        }


def aggregated(steps: Sequence[Mapping[str, Any]], plan: Plan | None = None) -> bool:
    """Whether the released table holds figures rather than records: a step of the plan outputs
    an aggregate, or (without the plan) a report entry is a central DP statistic, as
    :func:`anonweb.core.dp.charts.needs_table` tells them. Synthetic records are records."""
    if plan is not None:
        try:
            return any(get_step(s.kind).output == "aggregate" for s in plan.steps)
        except CoreError:  # a kind no longer registered: judge by the report
            pass
    return needs_table(steps)


def _float(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def dp_statistics(
    steps: Sequence[Mapping[str, Any]],
    table: pd.DataFrame,
    *,
    source: pd.DataFrame | None = None,
    plan: Plan | None = None,
) -> list[DPStatistic]:
    """Each released DP figure with its 95% interval (see the module's notes)."""
    out: list[DPStatistic] = []
    for entry in steps:
        kind = str(entry.get("kind"))
        number = int(entry.get("step", 0))
        if kind == "ldp_randomized_response":
            out += _local(entry, number)
        elif kind in KINDS and "noise" in entry:
            exact = None
            if plan is not None and source is not None and number == 1 and plan.steps:
                # the first step reads the source itself
                exact = _exact(DPQuery.from_params(plan.steps[0].params), source)
            out += _central(entry, statistic_rows(table, number), exact)
    return out


def _central(
    entry: Mapping[str, Any], part: pd.DataFrame, exact: Mapping[str, tuple[float, float]] | None
) -> list[DPStatistic]:
    kind = str(entry["kind"])
    number = int(entry.get("step", 0))
    columns = tuple(str(c) for c in entry.get("columns") or [])

    def stat(label: str, value: Any, half: Any, interval: str) -> DPStatistic:
        h = _float(half)
        truth, shortfall = (exact or {}).get(label, (None, 0.0))
        return DPStatistic(
            step=number,
            kind=kind,
            columns=columns,
            label=label,
            value=float(value),
            halfwidth=h,
            interval=interval if h is not None else "none",
            exact=truth,
            shortfall=shortfall,
        )

    if part.empty:
        return []
    if kind == "count" and COUNT_COLUMN in part.columns:
        return [stat("count", part[COUNT_COLUMN].iloc[0], entry.get("ci95_halfwidth"), "exact")]
    if kind == "sum" and "noisy_sum" in part.columns:
        return [stat("sum", part["noisy_sum"].iloc[0], entry.get("ci95_halfwidth"), "exact")]
    if kind == "mean" and "noisy_mean" in part.columns:
        half = entry.get("mean_ci95_halfwidth_approx")
        return [stat("mean", part["noisy_mean"].iloc[0], half, "approximate")]
    if kind == "histogram" and set(columns) <= set(part.columns) and COUNT_COLUMN in part:
        labels = part[list(columns)].astype(str).agg(" · ".join, axis=1)
        half = entry.get("ci95_halfwidth")
        return [
            stat(str(lab), v, half, "exact")
            for lab, v in zip(labels, part[COUNT_COLUMN].to_numpy())
        ]
    if kind == "range" and {"bin_lo", "bin_hi", COUNT_COLUMN} <= set(part.columns):
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
    if kind == "quantile" and {"alpha", "quantile"} <= set(part.columns):
        intervals = list(entry.get("quantile_ci95") or [])
        out = []
        for i, (a, v) in enumerate(zip(part["alpha"], part["quantile"])):
            if _float(v) is None:
                continue
            if i < len(intervals):
                lo, hi = (float(x) for x in intervals[i])
                half = max(float(v) - lo, hi - float(v))
                s = replace(stat(f"quantile {a:g}", v, half, "exact"), bounds=(lo, hi))
            else:  # a release made before quantiles had intervals
                s = stat(f"quantile {a:g}", v, None, "none")
            out.append(s)
        return out
    return []


def range_label(lo: float, hi: float, *, last: bool) -> str:
    return f"[{lo:g}, {hi:g}{']' if last else '['}"


def cumulative_label(hi: float, *, last: bool) -> str:
    return f"{'≤' if last else '<'} {hi:g} (cumulative)"


def _local(entry: Mapping[str, Any], number: int) -> list[DPStatistic]:
    estimated, sd = entry.get("estimated_counts"), _float(entry.get("estimate_sd"))
    if not isinstance(estimated, Mapping):
        return []
    per_category = entry.get("estimate_ci95_halfwidth")
    out = []
    for k, v in estimated.items():
        if isinstance(per_category, Mapping) and k in per_category:
            half = _float(per_category[k])
        else:  # a release made before: the worst case over categories
            half = None if sd is None else 1.96 * sd
        out.append(
            DPStatistic(
                step=number,
                kind="local DP count",
                columns=(str(entry.get("column", "")),),
                label=str(k),
                value=float(v),
                halfwidth=half,
                interval="approximate" if half is not None else "none",
            )
        )
    return out


def _exact(query: DPQuery, source: pd.DataFrame) -> dict[str, tuple[float, float]] | None:
    """The statistic on the source, for a first step (it reads the source itself): each label's
    exact figure and how far it can exceed what the mechanism counted because contribution
    bounding dropped rows. Counts are figures of rows; a sum or mean with a contribution bound
    is not stated (the rows dropped could move it either way)."""
    if query.kind == "count":
        cells = pd.Series(["count"] * len(source), index=source.index)
        return _counted(query, source, cells, ["count"])
    if query.kind == "histogram" and query.categories is not None:
        keys = pd.Series(histogram_keys(source, query), index=source.index)
        # every declared cell, those no record falls in included
        labels = {cell: cell.replace(KEY_SEP, " · ") for cell in histogram_cells(query)}
        out = _counted(query, source, keys, list(labels))
        return {labels[k]: v for k, v in out.items()}
    if query.kind in ("sum", "mean") and query.bounds is not None:
        if query.identifier is not None:
            return None
        values = np.asarray(numeric_values(source, query.columns[0]), dtype=float)
        clamped = np.clip(values, query.bounds[0], query.bounds[1])
        if query.kind == "sum":
            return {"sum": (float(clamped.sum()), 0.0)}
        return {"mean": (float(clamped.mean()), 0.0)} if len(clamped) else None
    if query.kind == "range" and query.bounds is not None:
        return _exact_range(query, source)
    if query.kind == "quantile" and query.bounds is not None and query.identifier is None:
        return _exact_quantiles(query, numeric_values(source, query.columns[0]))
    return None


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
