"""Information-loss metrics for full-domain generalization with suppression (ARX's quality
models, with ARX's defaults).

Per quasi-identifier metrics, aggregated over the QIs (``aggregate``):

* ``loss`` — ARX's default "Loss" (``MetricMDNMLoss``, generalization/suppression factor 0.5):
  per QI, each kept record costs the share of the domain its generalized value covers (leaves
  under it / hierarchy size), a suppressed record costs 1; the sum is normalized to [0, 1]
  between "no generalization" and "everything suppressed". Aggregated by the **geometric
  mean**, prod(1 + v_i)^(1/d) - 1, ARX's default since version 3.3.0.
* ``entropy`` — non-uniform entropy (``MetricMDNUEntropy``): per record and QI,
  ``-log2(freq(original) / freq(generalized))``; suppressed records count as generalized to the
  root. Aggregated by the sum.
* ``precision`` — Sweeney's precision (``MetricMDNMPrecision``): per QI, level / height for a
  kept record, 1 for a suppressed one, averaged over records. Aggregated by the arithmetic mean.
* ``height`` — the generalization levels (``MetricMDHeight``); suppression is free. Summed.

Whole-table metrics: ``discernibility`` (``MetricSDNMDiscernability``: a kept class of size s
costs s², a suppressed record costs n) and ``aecs`` (``MetricSDAECS``: the average class size,
the suppressed records forming one class).

Aggregates: ``geometric``, ``arithmetic``, ``sum``, ``max``, and ``rank`` (per-QI values sorted
in descending order, compared lexicographically: ARX's default before 3.3.0).

As ARX does, each per-QI value keeps 10 decimals (the rest cut off), so that float noise cannot
break ties; Loss and precision are computed from exact integers before that cut. The aggregate
compared is rounded to 12 decimals, so that the same values in another order tie exactly; ties
are then decided by the node (see :mod:`anonweb.core.search.flash`).

Each metric gives a lower bound computed without grouping (the loss ignoring suppression),
which never decreases when a node is generalized further; the search uses it to prune.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from anonweb.core.errors import ParameterError
from anonweb.core.search.lattice import EncodedTable

METRICS = ("loss", "entropy", "precision", "height", "discernibility", "aecs")
AGGREGATES = ("geometric", "rank", "arithmetic", "sum", "max")
DEFAULT_AGGREGATE = {"loss": "geometric", "entropy": "sum", "precision": "arithmetic"}
_AGGREGATE_TEXT = {
    "geometric": "geometric mean over the quasi-identifiers",
    "arithmetic": "arithmetic mean over the quasi-identifiers",
    "sum": "sum over the quasi-identifiers",
    "max": "largest value over the quasi-identifiers",
    "rank": (
        "rank: per-QI values sorted, largest first, compared in that order "
        "(the largest is reported)"
    ),
}
_DIGITS = 10**10


def floor10(values: NDArray[Any]) -> NDArray[Any]:
    """Keep 10 decimals, cutting the rest off (ARX's ``Metric.round``)."""
    return np.asarray(np.floor(np.asarray(values, dtype=float) * _DIGITS) / _DIGITS)


def exact_floor10(num: int, den: int) -> float:
    """num / den with 10 decimals kept, computed on integers (no float noise)."""
    if den <= 0 or num <= 0:
        return 0.0
    return (num * _DIGITS // den) / _DIGITS


def aggregate_value(values: NDArray[Any], how: str) -> NDArray[Any]:
    """The aggregate of each row of per-QI values (rank: its largest value)."""
    if how == "geometric":
        d = values.shape[1]
        return np.asarray(np.prod(values + 1.0, axis=1) ** (1.0 / d) - 1.0)
    if how == "arithmetic":
        return np.asarray(values.mean(axis=1))
    if how == "sum":
        return np.asarray(values.sum(axis=1))
    return np.asarray(values.max(axis=1))  # max, and rank's leading value


class Metric:
    name: ClassVar[str] = "metric"
    title: ClassVar[str] = "metric"
    per_qi: ClassVar[bool] = True

    def __init__(self, table: EncodedTable, aggregate: str | None = None) -> None:
        aggregate = aggregate or DEFAULT_AGGREGATE.get(self.name, "sum")
        if aggregate not in AGGREGATES:
            raise ParameterError(
                f"unknown aggregate {aggregate!r} (one of {', '.join(AGGREGATES)})"
            )
        self.table = table
        self.aggregate = aggregate if self.per_qi else "sum"
        self.level_values: list[NDArray[Any]] = []  # per QI: the value per level, nothing out

    def bounds(self, nodes: NDArray[Any]) -> NDArray[Any]:
        """Per-QI lower bounds of each node (its values if nothing were suppressed)."""
        return np.column_stack([self.level_values[i][nodes[:, i]] for i in range(nodes.shape[1])])

    def actual(
        self, levels: Sequence[int] | NDArray[Any], rep_out: NDArray[Any], sizes_out: NDArray[Any]
    ) -> NDArray[Any]:
        """Per-QI values of a node whose suppressed classes have representatives ``rep_out``
        (one distinct row each) and sizes ``sizes_out``."""
        raise NotImplementedError

    def from_classes(self, sizes: NDArray[Any], out_classes: NDArray[Any]) -> NDArray[Any]:
        """For a whole-table metric: its value from the node's classes."""
        raise NotImplementedError

    def class_values(
        self, levels: Sequence[int] | NDArray[Any], rep: NDArray[Any], sizes: NDArray[Any]
    ) -> NDArray[Any] | None:
        """Per class (representatives ``rep``, sizes ``sizes``) and QI, the class's own
        information loss, as ARX weighs classes of one size against each other when it
        suppresses the smallest for a table-wide model; None for the metrics ARX leaves out
        there (it then takes them in record order)."""
        return None

    def key(self, values: NDArray[Any]) -> NDArray[Any]:
        """Sortable key (rows compared lexicographically; smaller is better)."""
        if self.aggregate == "rank":
            return -np.sort(-values, axis=1)
        return np.asarray(np.round(aggregate_value(values, self.aggregate), 12)[:, None])

    def summary(self, values: NDArray[Any]) -> float:
        """The score minimised, as one number for reports (rank: the largest per-QI value)."""
        return float(aggregate_value(np.asarray(values, dtype=float)[None, :], self.aggregate)[0])

    def describe(self) -> str:
        """What ``information_loss`` is, in words."""
        if not self.per_qi:
            return self.title
        return f"{self.title}, {_AGGREGATE_TEXT[self.aggregate]}"


class LossMetric(Metric):
    name = "loss"
    title = "ARX's Loss (share of each value's domain covered, suppressed records cost 1)"

    def __init__(self, table: EncodedTable, aggregate: str | None = None) -> None:
        super().__init__(table, aggregate)
        n = table.n
        self.leaves: list[list[NDArray[Any]]] = []  # per QI, per level: leaves per level code
        self.size: list[int] = []  # per QI: hierarchy size (leaves under the root)
        self.level_sums: list[list[int]] = []  # per QI, per level: sum of leaves over records
        for q, records in zip(table.qis, table.row_records):
            size = len(q.hierarchy.rows)
            per_level = [np.rint(share * size).astype(np.int64) for share in q.shares]
            # the sums are taken over the hierarchy's rows, not over the records
            self.leaves.append(per_level)
            self.size.append(size)
            self.level_sums.append(
                [
                    int((records * leaves[codes]).sum())
                    for leaves, codes in zip(per_level, q.level_codes)
                ]
            )
        self.level_values = [
            np.array([self._normalize(i, s) for s in sums])
            for i, sums in enumerate(self.level_sums)
        ]
        self.n = n

    def _normalize(self, i: int, raw: int) -> float:
        # (raw / size - n / size) / (n - n / size), multiplied through by size
        n, size = self.table.n, self.size[i]
        return exact_floor10(raw - n, n * (size - 1))

    def actual(
        self, levels: Sequence[int] | NDArray[Any], rep_out: NDArray[Any], sizes_out: NDArray[Any]
    ) -> NDArray[Any]:
        out = np.empty(len(levels))
        w = sizes_out.astype(np.int64)
        for i, lv in enumerate(levels):
            raw = self.level_sums[i][lv]
            if len(rep_out):
                leaves = self.leaves[i][lv][self.table.level_codes(i, lv, rep_out)]
                raw += int((w * (self.size[i] - leaves)).sum())
            out[i] = self._normalize(i, raw)
        return out

    def class_values(
        self, levels: Sequence[int] | NDArray[Any], rep: NDArray[Any], sizes: NDArray[Any]
    ) -> NDArray[Any] | None:
        # ARX's MetricMDNMLoss per class: records x the share of the domain its value covers
        out = np.empty((len(rep), len(levels)))
        w = np.asarray(sizes, dtype=float)
        for i, lv in enumerate(levels):
            leaves = self.leaves[i][lv][self.table.level_codes(i, int(lv), rep)]
            out[:, i] = w * leaves / self.size[i]
        return out


class PrecisionMetric(Metric):
    name = "precision"
    title = "precision (level / height per record, suppressed records cost 1)"

    def __init__(self, table: EncodedTable, aggregate: str | None = None) -> None:
        super().__init__(table, aggregate)
        self.heights = [max(q.height - 1, 0) for q in table.qis]
        self.level_values = [
            np.array([exact_floor10(lv, h) if h else 0.0 for lv in range(h + 1)])
            for h in self.heights
        ]

    def actual(
        self, levels: Sequence[int] | NDArray[Any], rep_out: NDArray[Any], sizes_out: NDArray[Any]
    ) -> NDArray[Any]:
        n, out_n = self.table.n, int(sizes_out.sum())
        values = []
        for lv, h in zip(levels, self.heights):
            if h == 0:
                values.append(exact_floor10(out_n, n))
            else:
                values.append(exact_floor10((n - out_n) * int(lv) + out_n * h, n * h))
        return np.array(values)


class HeightMetric(Metric):
    name = "height"
    title = "generalization height (levels; suppression is free)"

    def __init__(self, table: EncodedTable, aggregate: str | None = None) -> None:
        super().__init__(table, aggregate)
        self.level_values = [np.arange(q.height, dtype=float) for q in table.qis]

    def actual(
        self, levels: Sequence[int] | NDArray[Any], rep_out: NDArray[Any], sizes_out: NDArray[Any]
    ) -> NDArray[Any]:
        return np.asarray(levels, dtype=float)


class EntropyMetric(Metric):
    name = "entropy"
    title = "non-uniform entropy (bits lost per record)"

    def __init__(self, table: EncodedTable, aggregate: str | None = None) -> None:
        super().__init__(table, aggregate)
        w = table.weights
        logn = np.log2(table.n)
        wf = w.astype(float)
        self.cost: list[list[NDArray[Any]]] = []
        self.out_cost: list[NDArray[Any]] = []
        for i in range(len(table.qis)):
            freqs = [
                np.bincount(c, weights=w, minlength=card)
                for c, card in zip(table.codes[i], table.cards[i])
            ]
            base = np.log2(freqs[0][table.codes[i][0]])
            self.cost.append([np.log2(f[c]) - base for f, c in zip(freqs, table.codes[i])])
            self.out_cost.append(logn - base)
        # plain multiply-and-sum: a BLAS dot product may spin threads on a busy machine
        self.level_sums = [np.array([float((wf * c).sum()) for c in lv]) for lv in self.cost]
        self.level_values = [floor10(s) for s in self.level_sums]

    def actual(
        self, levels: Sequence[int] | NDArray[Any], rep_out: NDArray[Any], sizes_out: NDArray[Any]
    ) -> NDArray[Any]:
        raw = np.array([self.level_sums[i][lv] for i, lv in enumerate(levels)], dtype=float)
        if len(rep_out):
            w = sizes_out.astype(float)
            for i, lv in enumerate(levels):
                raw[i] += (w * (self.out_cost[i][rep_out] - self.cost[i][lv][rep_out])).sum()
        return floor10(raw)


class DiscernibilityMetric(Metric):
    name = "discernibility"
    title = "discernibility (sum of squared class sizes, suppressed records cost n each)"
    per_qi = False

    def bounds(self, nodes: NDArray[Any]) -> NDArray[Any]:
        # No cheap bound: every kept class costs at least its size, suppressed records more.
        return np.full((len(nodes), 1), float(self.table.n))

    def from_classes(self, sizes: NDArray[Any], out_classes: NDArray[Any]) -> NDArray[Any]:
        kept = sizes[~out_classes].astype(float)
        value = float((kept**2).sum() + sizes[out_classes].sum() * float(self.table.n))
        return np.array([value])


class AECSMetric(Metric):
    name = "aecs"
    title = "average equivalence class size (the suppressed records forming one class)"
    per_qi = False

    def bounds(self, nodes: NDArray[Any]) -> NDArray[Any]:
        # a node has at most as many classes as the table has distinct rows
        return np.full((len(nodes), 1), floor10(np.array(self.table.n / self.table.m)))

    def from_classes(self, sizes: NDArray[Any], out_classes: NDArray[Any]) -> NDArray[Any]:
        groups = int((~out_classes).sum()) + (1 if out_classes.any() else 0)
        return floor10(np.array([self.table.n / max(groups, 1)]))


_METRIC_CLASSES: dict[str, type[Metric]] = {
    m.name: m
    for m in (
        LossMetric,
        EntropyMetric,
        PrecisionMetric,
        HeightMetric,
        DiscernibilityMetric,
        AECSMetric,
    )
}


def make_metric(name: str, table: EncodedTable, aggregate: str | None = None) -> Metric:
    """The metric ``name`` over ``table``; ``aggregate`` None takes ARX's default for it."""
    try:
        cls = _METRIC_CLASSES[name]
    except KeyError:
        raise ParameterError(f"unknown metric {name!r} (one of {', '.join(METRICS)})") from None
    return cls(table, aggregate)


def check_objective(metric: object, aggregate: object) -> None:
    """Raise :class:`ParameterError` for an unknown metric or aggregate (before any data)."""
    if metric not in METRICS:
        raise ParameterError(f"unknown metric {metric!r} (one of {', '.join(METRICS)})")
    if aggregate is not None and aggregate not in AGGREGATES:
        raise ParameterError(f"unknown aggregate {aggregate!r} (one of {', '.join(AGGREGATES)})")
