"""The utility of a release: per column, the released distribution beside the source's; per
quasi-identifier, the information loss the search minimised; per DP statistic, its value with
its 95% interval.

Everything here is computed from the source, so it is internal (privacy officers and data
stewards), never part of the published report.

* **Columns** present in both tables are compared. A side whose values are numbers is shown as
  a histogram, over bins shared by both sides when both are numeric; otherwise as its most
  frequent values plus ``(other)``, written as :func:`~anonweb.core.dp.mechanisms.cell_labels`
  writes them (a generalized ``[20-30[`` or a suppressed ``*`` is a released category like any
  other; a blank is ``(missing)``). The total variation distance is taken over every value (or
  every shared bin, a blank being one more bin), not only the values shown. ``changed`` counts
  the cells that differ from their source row, when the caller knows which source row each
  released row comes from (``source_rows``; a shuffled release keeps it privately).
* **In memory or on an engine alike**: each side of a column is first counted (its distinct
  values, or its numbers' summary and then their counts in the shared bins:
  :mod:`anonweb.core.engine.columns`), and :func:`compare_counts` makes every figure from those
  counts. :func:`release_utility` counts the tables it holds as the pandas engine does;
  :func:`engine_release_utility` has an engine (DuckDB, Spark) count a release it wrote out of
  core and its source where they are, so the figures are the same and neither table is read
  into memory.
* **Information loss per quasi-identifier** is the search's own figure (its metric objects,
  :mod:`anonweb.core.search.metrics`), combined by the same aggregate the search minimised; for
  a generalization to fixed levels it is computed by the what-if table (the same metric
  objects, nothing suppressed).
* **DP statistics**: see :mod:`anonweb.core.utility.dp`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.dp.mechanisms import MISSING, cell_labels
from anonweb.core.engine.base import Engine, Source
from anonweb.core.engine.columns import (
    ColumnCounts,
    NumberSummary,
    bin_counts,
    finite_numbers,
    is_numeric,
    series_counts,
)
from anonweb.core.engine.duckdb_engine import DuckDBEngine
from anonweb.core.engine.histogram import Histogram
from anonweb.core.errors import ParameterError
from anonweb.core.io.hierarchy import Hierarchy
from anonweb.core.models.counts import SensitiveDomain
from anonweb.core.models.t_closeness import equal_distance_dense
from anonweb.core.release.plan import plan_from_dict
from anonweb.core.release.steps import Plan
from anonweb.core.risk.classes import SUPPRESSED, suppressed_records
from anonweb.core.search.metrics import aggregate_value
from anonweb.core.utility.changed import changed_count, engine_changed_cells
from anonweb.core.utility.dp import DPStatistic, aggregated, dp_statistics

OTHER = "(other)"
TOP = 12
GENERALIZED_TOP = 40  # intervals of a generalized number: enough to show its shape
BINS = 20


@dataclass(frozen=True)
class Distribution:
    """One side of a column: ``kind`` is ``categories`` (most frequent values, then ``(other)``)
    or ``histogram`` (``edges`` has one more entry than ``labels``; blanks in ``missing``)."""

    kind: str
    labels: tuple[str, ...]
    counts: tuple[int, ...]
    total: int
    missing: int = 0
    edges: tuple[float, ...] = ()
    distinct: int = 0  # distinct values (categories) before the top ones were kept

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "labels": list(self.labels),
            "counts": list(self.counts),
            "shares": [c / self.total if self.total else 0.0 for c in self.counts],
            "total": self.total,
            "missing": self.missing,
        }
        if self.kind == "histogram":
            out["edges"] = list(self.edges)
        else:
            out["distinct"] = self.distinct
        return out


@dataclass(frozen=True)
class ColumnUtility:
    column: str
    kind: str  # "numeric" when both sides are numbers, else "categorical"
    original: Distribution
    released: Distribution
    suppressed: int  # released cells reading "*"
    changed: int | None  # cells that differ from their source row (None: rows not matched)
    tvd: float | None  # total variation distance (None when one side is numbers, one text)
    mean: tuple[float, float] | None = None  # (source, released), numeric columns
    std: tuple[float, float] | None = None
    quasi_identifier: bool = False
    information_loss: float | None = None

    def to_dict(self) -> dict[str, Any]:
        rows = self.released.total
        out: dict[str, Any] = {
            "column": self.column,
            "kind": self.kind,
            "quasi_identifier": self.quasi_identifier,
            "original": self.original.to_dict(),
            "released": self.released.to_dict(),
            "suppressed": self.suppressed,
            "suppressed_share": self.suppressed / rows if rows else 0.0,
            "changed": self.changed,
            "changed_share": None if self.changed is None or not rows else self.changed / rows,
            "tvd": self.tvd,
            "information_loss": self.information_loss,
        }
        if self.mean is not None and self.std is not None:
            out["mean"] = {"original": self.mean[0], "released": self.mean[1]}
            out["mean_shift"] = self.mean[1] - self.mean[0]
            out["std"] = {"original": self.std[0], "released": self.std[1]}
            out["std_shift"] = self.std[1] - self.std[0]
        return out


@dataclass(frozen=True)
class LossSummary:
    """Per-QI information loss and its aggregate (``aggregate_value`` is recomputed from the
    per-QI values with the search's aggregate; ``reported`` is the report's figure)."""

    step: int
    metric: str
    aggregate: str | None
    measure: str
    per_qi: dict[str, float]
    aggregate_value: float | None
    reported: float | None
    source: str  # "search" or "fixed levels"

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "metric": self.metric,
            "aggregate": self.aggregate,
            "measure": self.measure,
            "per_qi": dict(self.per_qi),
            "aggregate_value": self.aggregate_value,
            "reported": self.reported,
            "source": self.source,
        }


@dataclass(frozen=True)
class ReleaseUtility:
    rows_original: int
    rows_released: int
    records_suppressed: int
    columns: tuple[ColumnUtility, ...]
    loss: LossSummary | None
    dp: tuple[DPStatistic, ...] = field(default=())
    matched: bool = False  # released rows matched to source rows (cells compared)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows_original": self.rows_original,
            "rows_released": self.rows_released,
            "records_suppressed": self.records_suppressed,
            "matched": self.matched,
            "columns": [c.to_dict() for c in self.columns],
            "information_loss": None if self.loss is None else self.loss.to_dict(),
            "dp": [s.to_dict() for s in self.dp],
        }


def release_utility(
    source: pd.DataFrame,
    released: pd.DataFrame,
    *,
    report: Mapping[str, Any],
    plan: Plan | Mapping[str, Any] | None = None,
    hierarchies: Mapping[str, Hierarchy] | None = None,
    source_rows: Sequence[int] | NDArray[Any] | None = None,
    top: int = TOP,
    bins: int = BINS,
) -> ReleaseUtility:
    """The utility of ``released`` against ``source`` (neither is modified).

    ``report`` is the release's internal report (``apply_plan``'s). ``plan`` lets DP
    statistics show their exact value and names the quasi-identifiers; ``hierarchies`` (resolved
    for the source) let a generalization to fixed levels report its loss. ``source_rows[j]`` is
    the source row of released row ``j``, for cell-by-cell changes."""
    if top < 1 or bins < 1:
        raise ParameterError("top and bins must be at least 1")
    plan_obj = plan if isinstance(plan, Plan) or plan is None else plan_from_dict(plan)
    steps = [dict(s) for s in report.get("steps") or []]
    measured = aggregated(steps, plan_obj)
    qis = _quasi_identifiers(report, plan_obj)
    loss = _loss([str(c) for c in source.columns], lambda qis: source, steps, hierarchies)
    per_qi = loss.per_qi if loss is not None else {}
    columns: list[ColumnUtility] = []
    matched = False
    if not measured:
        aligned = _aligned(source, released, source_rows)
        matched = aligned is not None
        for col in [c for c in released.columns if c in source.columns]:
            columns.append(
                column_utility(
                    source[col],
                    released[col],
                    aligned=None if aligned is None else aligned[col],
                    top=top,
                    bins=bins,
                    quasi_identifier=col in qis,
                    information_loss=per_qi.get(str(col)),
                )
            )
    present = [q for q in qis if q in released.columns]
    return ReleaseUtility(
        rows_original=len(source),
        rows_released=len(released),
        records_suppressed=0 if measured else int(suppressed_records(released, present).sum()),
        columns=tuple(columns),
        loss=loss,
        dp=tuple(dp_statistics(steps, released, source=source, plan=plan_obj)),
        matched=matched,
    )


def engine_release_utility(
    engine: Engine,
    source: Source,
    released: Source,
    *,
    report: Mapping[str, Any],
    plan: Plan | Mapping[str, Any] | None = None,
    hierarchies: Mapping[str, Hierarchy] | None = None,
    top: int = TOP,
    bins: int = BINS,
    lineage: str | None = None,
) -> ReleaseUtility:
    """The utility of a release an engine wrote (``released``, a Parquet file or folder) against
    its ``source``, neither read into memory: what :func:`release_utility` measures, from what
    ``engine`` counts of each column (distinct values, number summaries, numbers in bins: one
    pass or one grouping per column over each table) and the released quasi-identifiers'
    histogram (its suppressed records). The measures are :func:`compare_counts`', as in
    memory. With the release's ``lineage`` file (the source row of each row of a ``released``
    file), DuckDB matches released rows to source rows and the cells changed are counted
    (:func:`~anonweb.core.utility.changed.engine_changed_cells`), as in memory with
    ``source_rows``. A release of figures (DP statistics), which an engine does not make, is
    refused."""
    if top < 1 or bins < 1:
        raise ParameterError("top and bins must be at least 1")
    plan_obj = plan if isinstance(plan, Plan) or plan is None else plan_from_dict(plan)
    steps = [dict(s) for s in report.get("steps") or []]
    if aggregated(steps, plan_obj):
        raise ParameterError("a release of DP statistics is measured in memory")
    qis = _quasi_identifiers(report, plan_obj)
    source_columns, released_columns = engine.columns(source), engine.columns(released)
    loss = _loss(source_columns, lambda names: engine.histogram(source, names), steps, hierarchies)
    per_qi = loss.per_qi if loss is not None else {}
    names = [c for c in released_columns if c in source_columns]
    numeric_o = set(engine.numeric_columns(source, names))
    numeric_r = set(engine.numeric_columns(released, names))
    need = {c: counts_needed(c in numeric_o, c in numeric_r) for c in names}
    counted_o = engine.column_counts(
        source,
        values=[c for c in names if need[c].original_values],
        numbers=[c for c in names if need[c].original_numbers],
    )
    counted_r = engine.column_counts(
        released,
        values=[c for c in names if need[c].released_values],
        numbers=[c for c in names if need[c].released_numbers],
    )
    changed = (
        _changed_out_of_core(
            engine, source, str(released), lineage,
            {c: counted_o[c].numeric and counted_r[c].numeric for c in names},
        )
        if lineage is not None
        else {}
    )  # fmt: skip
    edges = {c: column_edges(counted_o[c], counted_r[c], bins) for c in names}
    binned = {c: e for c, e in edges.items() if e is not None}
    bins_o = engine.bin_counts(source, binned)
    bins_r = engine.bin_counts(released, {c: binned[c] for c in binned if need[c].released_numbers})
    columns = tuple(
        compare_counts(
            str(c),
            counted_o[c],
            counted_r[c],
            edges=edges[c],
            original_bins=bins_o.get(c),
            released_bins=bins_r.get(c),
            top=top,
            changed=changed.get(c),
            quasi_identifier=c in qis,
            information_loss=per_qi.get(str(c)),
        )
        for c in names
    )
    present = [q for q in qis if q in released_columns]
    suppressed = 0
    if present:
        hist = engine.histogram(released, present)
        suppressed = int(hist.class_sizes[hist.suppressed_classes(present)].sum())
    return ReleaseUtility(
        rows_original=engine.row_count(source),
        rows_released=engine.row_count(released),
        records_suppressed=suppressed,
        columns=columns,
        loss=loss,
        dp=(),
        matched=lineage is not None,
    )


def _changed_out_of_core(
    engine: Engine, source: Source, released: str, lineage: str, numeric: Mapping[str, bool]
) -> dict[str, int]:
    """The cells changed per column, counted by DuckDB (the engine itself, or one of its own)."""
    if isinstance(engine, DuckDBEngine):
        return engine_changed_cells(engine, source, released, lineage, numeric)
    duck = DuckDBEngine()
    try:
        return engine_changed_cells(duck, source, released, lineage, numeric)
    finally:
        duck.close()


def _quasi_identifiers(report: Mapping[str, Any], plan: Plan | None) -> list[str]:
    if plan is not None:
        return [str(q) for q in plan.quasi_identifiers]
    for key in ("risk_before", "risk_after"):
        found = (report.get(key) or {}).get("quasi_identifiers")
        if found:
            return [str(q) for q in found]
    return []


def _aligned(
    source: pd.DataFrame, released: pd.DataFrame, source_rows: Sequence[int] | NDArray[Any] | None
) -> pd.DataFrame | None:
    if source_rows is None:
        return None
    rows = np.asarray(source_rows, dtype=np.int64)
    if len(rows) != len(released) or (len(rows) and (rows.min() < 0 or rows.max() >= len(source))):
        raise ParameterError("source_rows must give a source row for every released row")
    return source.iloc[rows].reset_index(drop=True)


# -- columns -----------------------------------------------------------------------------------


def edges_of(sides: Sequence[NumberSummary], bins: int) -> NDArray[Any]:
    """At most ``bins`` equal-width bins over the range of the finite numbers of every side: on
    whole numbers, bins of whole-number width starting at the smallest value (ages read
    [18, 22[, not [18, 21.55[); one bin when the range is a point."""
    present = [s for s in sides if s.finite]
    if not present:
        return np.array([0.0, 1.0])
    lo, hi = min(s.low for s in present), max(s.high for s in present)
    if all(s.whole for s in present) and hi - lo < 1e15:
        width = max(1, math.ceil((hi - lo + 1) / bins))
        count = math.ceil((hi - lo + 1) / width)
        return np.asarray(lo + width * np.arange(count + 1), dtype=float)
    if lo == hi:
        return np.array([lo - 0.5, hi + 0.5])
    return np.linspace(lo, hi, bins + 1)


def _histogram(side: ColumnCounts, edges: NDArray[Any], counts: NDArray[np.int64]) -> Distribution:
    """A numeric side as its histogram: ``counts`` of its finite numbers in the bins of
    ``edges``, its other cells (blanks, NaN, infinities) missing."""
    finite = side.numbers.finite if side.numbers is not None else 0
    last = len(edges) - 2  # numpy's last bin holds its right edge
    labels = tuple(
        f"[{lo:.6g}, {hi:.6g}{']' if i == last else '['}"
        for i, (lo, hi) in enumerate(zip(edges[:-1], edges[1:]))
    )
    return Distribution(
        kind="histogram",
        labels=labels,
        counts=tuple(int(c) for c in counts),
        total=side.rows,
        missing=side.rows - finite,
        edges=tuple(float(e) for e in edges),
    )


_LEADING_NUMBER = re.compile(r"^[\[(<>=≤≥\s]*(-?\d+(?:\.\d+)?)")


def _by_value(labels: Sequence[str]) -> list[str]:
    """Labels of generalized numbers (intervals, ``<18``, ``>=65``) in the order of their first
    number; others (``*``, ``(missing)``) after them."""

    def key(label: str) -> tuple[int, float, str]:
        found = _LEADING_NUMBER.match(label)
        return (0, float(found.group(1)), label) if found else (1, 0.0, label)

    return sorted(labels, key=key)


def label_counts(side: ColumnCounts) -> pd.Series:
    """A side's cells counted by their label as :func:`cell_labels` writes them (each distinct
    value labelled once; blanks ``(missing)``): most frequent first, ties by label, so that
    the same data gives the same chart."""
    if side.values is None:
        raise ValueError("the column's distinct values were not counted")
    named = cell_labels(pd.Series(np.asarray(side.values.index, dtype=object), dtype=object))
    counts = pd.Series(side.values.to_numpy(dtype=np.int64), index=named.to_numpy(dtype=object))
    if side.missing:
        counts = pd.concat([counts, pd.Series([side.missing], index=[MISSING], dtype=np.int64)])
    counts = counts.groupby(level=0, sort=False).sum()
    keys = np.asarray([str(v) for v in counts.index], dtype=object)
    order = np.lexsort((keys, -counts.to_numpy()))
    return counts.iloc[order]


def _categories(counts: pd.Series, total: int, top: int, *, by_value: bool = False) -> Distribution:
    shown = counts.iloc[:top]
    labels = [str(v) for v in shown.index]
    if by_value:
        labels = _by_value(labels)
    values = [int(counts[lab]) for lab in labels]
    rest = int(counts.iloc[top:].sum())
    if rest:
        labels.append(OTHER)
        values.append(rest)
    missing = int(counts.get(MISSING, 0)) if len(counts) else 0
    return Distribution(
        kind="categories",
        labels=tuple(labels),
        counts=tuple(values),
        total=total,
        missing=missing,
        distinct=len(counts),
    )


def total_variation(p: Mapping[Any, float], q: Mapping[Any, float]) -> float:
    """½ Σ |p(x) − q(x)| over the union of both supports, counts normalised first: t-closeness'
    equal-distance EMD (:func:`~anonweb.core.models.t_closeness.equal_distance_dense`), the
    released distribution ``q`` against the source's ``p``."""
    sp, sq = float(sum(p.values())), float(sum(q.values()))
    if sp <= 0 or sq <= 0:
        return 0.0 if sp == sq else 1.0
    keys = list(dict.fromkeys([*p, *q]))
    domain = SensitiveDomain(
        "", pd.Index(keys, dtype=object), np.array([p.get(k, 0) for k in keys], dtype=float)
    )
    released = np.array([[q.get(k, 0) for k in keys]], dtype=float)
    return float(equal_distance_dense(domain, released)[0])


@dataclass(frozen=True)
class CountsNeeded:
    """What a column comparison reads of each side: distinct values (``*_values``) or the
    number summary (``*_numbers``; then bins), from whether each side holds numbers."""

    original_values: bool
    original_numbers: bool
    released_values: bool
    released_numbers: bool


def counts_needed(original_numeric: bool, released_numeric: bool) -> CountsNeeded:
    both = original_numeric and released_numeric
    return CountsNeeded(
        original_values=not original_numeric,
        original_numbers=original_numeric,
        released_values=not both,
        released_numbers=both,
    )


def column_edges(original: ColumnCounts, released: ColumnCounts, bins: int) -> NDArray[Any] | None:
    """The bins a comparison counts numbers in: over both sides when both hold numbers, over
    the source's alone when only it does (its numbers released as text), else none."""
    if not original.numeric or original.numbers is None:
        return None
    if released.numeric and released.numbers is not None:
        return edges_of([original.numbers, released.numbers], bins)
    return edges_of([original.numbers], bins)


def compare_counts(
    name: str,
    original: ColumnCounts,
    released: ColumnCounts,
    *,
    edges: NDArray[Any] | None,
    original_bins: NDArray[np.int64] | None,
    released_bins: NDArray[np.int64] | None,
    top: int = TOP,
    changed: int | None = None,
    quasi_identifier: bool = False,
    information_loss: float | None = None,
) -> ColumnUtility:
    """One column compared from what was counted of each side (:func:`counts_needed`; numbers
    counted in the bins of :func:`column_edges`), in memory or by an engine alike.
    ``changed`` is the count of cells that differ from their source row, when known."""
    mean = std = None
    if original.numeric and released.numeric:
        assert edges is not None and original_bins is not None and released_bins is not None
        assert original.numbers is not None and released.numbers is not None
        suppressed = 0  # a numeric column holds no "*"
        orig = _histogram(original, edges, original_bins)
        rel = _histogram(released, edges, released_bins)
        p = dict(enumerate(orig.counts)) | {"missing": orig.missing}
        q = dict(enumerate(rel.counts)) | {"missing": rel.missing}
        tvd: float | None = total_variation(p, q)
        kind = "numeric"
        a, b = original.numbers, released.numbers
        if a.finite and b.finite:
            mean = (a.mean, b.mean)
            std = (a.std, b.std)  # population standard deviations
    else:
        kind = "categorical"
        rel_counts = label_counts(released)
        suppressed = int(rel_counts.get(SUPPRESSED, 0))
        if original.numeric:
            # numbers released as text (intervals, "*"): the source stays a histogram, the
            # released intervals are shown in the order of their values
            assert edges is not None and original_bins is not None
            orig = _histogram(original, edges, original_bins)
            rel = _categories(rel_counts, released.rows, max(top, GENERALIZED_TOP), by_value=True)
            tvd = None
        else:
            rel = _categories(rel_counts, released.rows, top)
            orig_counts = label_counts(original)
            orig = _categories(orig_counts, original.rows, top)
            tvd = total_variation(orig_counts.to_dict(), rel_counts.to_dict())
    return ColumnUtility(
        column=name,
        kind=kind,
        original=orig,
        released=rel,
        suppressed=suppressed,
        changed=changed,
        tvd=tvd,
        mean=mean,
        std=std,
        quasi_identifier=quasi_identifier,
        information_loss=information_loss,
    )


def column_utility(
    original: pd.Series,
    released: pd.Series,
    *,
    aligned: pd.Series | None = None,
    top: int = TOP,
    bins: int = BINS,
    quasi_identifier: bool = False,
    information_loss: float | None = None,
) -> ColumnUtility:
    """One column compared in memory (``aligned``: the source values of the released rows, in
    order): each side counted as the pandas engine counts it, then :func:`compare_counts`."""
    if aligned is not None and len(aligned) != len(released):
        raise ParameterError("the aligned source column must have one value per released row")
    need = counts_needed(is_numeric(original), is_numeric(released))
    o = series_counts(original, distinct=need.original_values, numbers=need.original_numbers)
    r = series_counts(released, distinct=need.released_values, numbers=need.released_numbers)
    edges = column_edges(o, r, bins)
    o_bins = r_bins = None
    if edges is not None:
        o_bins = bin_counts(finite_numbers(original), edges)
        if need.released_numbers:
            r_bins = bin_counts(finite_numbers(released), edges)
    changed = None
    if aligned is not None:
        changed = changed_count(
            aligned.reset_index(drop=True),
            released.reset_index(drop=True),
            numeric=o.numeric and r.numeric,
        )
    return compare_counts(
        str(original.name if original.name is not None else released.name),
        o,
        r,
        edges=edges,
        original_bins=o_bins,
        released_bins=r_bins,
        top=top,
        changed=changed,
        quasi_identifier=quasi_identifier,
        information_loss=information_loss,
    )


# -- information loss --------------------------------------------------------------------------


def _loss(
    columns: Sequence[str],
    table: Callable[[list[str]], pd.DataFrame | Histogram],
    steps: Sequence[Mapping[str, Any]],
    hierarchies: Mapping[str, Hierarchy] | None,
) -> LossSummary | None:
    """The loss the search reported, or for a generalization to fixed levels the what-if
    table's at those levels, on ``table(quasi_identifiers)`` (the source in memory, or the
    histogram an engine counts)."""
    for entry in steps:
        if entry.get("kind") == "optimal_generalization" and entry.get("loss_per_qi"):
            per_qi = {str(k): float(v) for k, v in entry["loss_per_qi"].items()}
            how = entry.get("aggregate")
            combined = None
            if how:
                values = np.array([list(per_qi.values())], dtype=float)
                combined = float(aggregate_value(values, str(how))[0])
            reported = entry.get("information_loss")
            return LossSummary(
                step=int(entry.get("step", 0)),
                metric=str(entry.get("metric", "")),
                aggregate=None if how is None else str(how),
                measure=str(entry.get("information_loss_measure", "")),
                per_qi=per_qi,
                aggregate_value=combined,
                reported=None if reported is None else float(reported),
                source="search",
            )
    for entry in steps:
        levels = entry.get("levels")
        if (
            entry.get("kind") == "generalize"
            and isinstance(levels, Mapping)
            and hierarchies
            and set(levels) <= set(hierarchies) & set(columns)
        ):
            qis = [str(c) for c in levels]
            return _fixed_levels_loss(table(qis), int(entry.get("step", 0)), levels, hierarchies)
    return None


def _fixed_levels_loss(
    source: pd.DataFrame | Histogram,
    step: int,
    levels: Mapping[str, Any],
    hierarchies: Mapping[str, Hierarchy],
) -> LossSummary:
    from anonweb.core.search.whatif import WhatIfTable

    qis = [str(c) for c in levels]
    table = WhatIfTable(source, quasi_identifiers=qis, hierarchies=hierarchies)
    node = table.evaluate({q: int(levels[q]) for q in qis})
    values = np.array([[node.loss_per_qi[q] for q in qis]], dtype=float)
    return LossSummary(
        step=step,
        metric=node.metric,
        aggregate=table.metric.aggregate,
        measure=node.information_loss_measure,
        per_qi=dict(node.loss_per_qi),
        aggregate_value=float(aggregate_value(values, table.metric.aggregate)[0]),
        reported=node.information_loss,
        source="fixed levels",
    )
