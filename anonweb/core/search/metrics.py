"""Information-loss metrics for full-domain generalization with suppression.

* ``loss`` — ARX's default "Loss" (``MetricMDNMLoss`` with generalization/suppression factor 0.5):
  per QI, each record costs the share of the domain its generalized value covers (leaves under
  it / hierarchy size), a suppressed record costs 1; the sum is normalized to [0, 1] between
  "no generalization" and "everything suppressed". Nodes are compared by ARX's default
  aggregate, the *rank*: per-QI losses sorted in descending order, compared lexicographically.
* ``entropy`` — non-uniform entropy (``MetricMDNUEntropy``): per record and QI,
  ``-log2(freq(original) / freq(generalized))``; suppressed records count as generalized to the
  root. Summed over QIs.
* ``discernibility`` — ``MetricSDNMDiscernability``: a kept class of size s costs s², a
  suppressed record costs n.

Each metric gives a lower bound computed without grouping (the loss ignoring suppression), which
never decreases when a node is generalized further; the search uses it to prune.
"""

from __future__ import annotations

import numpy as np

from anonweb.core.errors import ParameterError
from anonweb.core.search.lattice import EncodedTable

METRICS = ("loss", "entropy", "discernibility")
AGGREGATES = ("rank", "geometric", "arithmetic", "sum", "max")


class Metric:
    name = "metric"
    per_qi = True

    def __init__(self, table: EncodedTable, aggregate: str = "rank") -> None:
        if aggregate not in AGGREGATES:
            raise ParameterError(
                f"unknown aggregate {aggregate!r} (one of {', '.join(AGGREGATES)})"
            )
        self.table = table
        self.aggregate = aggregate
        self.cost: list[list[np.ndarray]] = []  # per QI, per level: cost per distinct row
        self.out_cost: list[np.ndarray] = []  # per QI: cost of a suppressed distinct row
        self.level_sums: list[np.ndarray] = []  # per QI: bound (sum of costs) per level

    def _finish(self) -> None:
        # plain multiply-and-sum: a BLAS dot product may spin threads on a busy machine
        w = self.table.weights.astype(float)
        self.level_sums = [np.array([float((w * c).sum()) for c in levels]) for levels in self.cost]

    def bounds(self, nodes: np.ndarray) -> np.ndarray:
        raw = np.column_stack([self.level_sums[i][nodes[:, i]] for i in range(nodes.shape[1])])
        return self.normalize(raw)

    def actual(self, levels, rep_out: np.ndarray, sizes_out: np.ndarray) -> np.ndarray:
        """Per-QI loss of a node whose suppressed classes have representatives ``rep_out``.

        The extra cost of suppressing a record depends only on its generalized value, so one
        representative row per suppressed class is enough.
        """
        raw = np.array([self.level_sums[i][lv] for i, lv in enumerate(levels)], dtype=float)
        if len(rep_out):
            w = sizes_out.astype(float)
            for i, lv in enumerate(levels):
                raw[i] += (w * (self.out_cost[i][rep_out] - self.cost[i][lv][rep_out])).sum()
        return self.normalize(raw[None, :])[0]

    def normalize(self, raw: np.ndarray) -> np.ndarray:
        return raw

    def key(self, values: np.ndarray) -> np.ndarray:
        """Sortable key (rows compared lexicographically; smaller is better)."""
        if self.aggregate == "rank":
            return -np.sort(-values, axis=1)
        if self.aggregate == "geometric":
            d = values.shape[1]
            return (np.prod(values + 1.0, axis=1) ** (1.0 / d) - 1.0)[:, None]
        if self.aggregate == "arithmetic":
            return values.mean(axis=1, keepdims=True)
        if self.aggregate == "max":
            return values.max(axis=1, keepdims=True)
        return values.sum(axis=1, keepdims=True)

    def summary(self, values: np.ndarray) -> float:
        """One number for reports: the mean over QIs (or the single value)."""
        return float(np.round(values.mean(), 10))


class LossMetric(Metric):
    name = "loss"

    def __init__(self, table: EncodedTable, aggregate: str = "rank") -> None:
        super().__init__(table, aggregate)
        n = table.n
        self.lo = np.array([n / len(q.hierarchy.rows) for q in table.qis])
        self.hi = float(n)
        for i, q in enumerate(table.qis):
            self.cost.append([q.shares[lv][table.full_codes[i][lv]] for lv in range(q.height)])
            self.out_cost.append(np.ones(table.m))
        self._finish()

    def normalize(self, raw: np.ndarray) -> np.ndarray:
        span = np.where(self.hi - self.lo > 0, self.hi - self.lo, 1.0)
        # rounded so that float noise cannot break ties differently from ARX
        return np.round(np.maximum((raw - self.lo) / span, 0.0), 12)


class EntropyMetric(Metric):
    name = "entropy"

    def __init__(self, table: EncodedTable, aggregate: str = "sum") -> None:
        super().__init__(table, "sum" if aggregate == "rank" else aggregate)
        w = table.weights
        logn = np.log2(table.n)
        for i in range(len(table.qis)):
            freqs = [
                np.bincount(c, weights=w, minlength=card)
                for c, card in zip(table.codes[i], table.cards[i])
            ]
            base = np.log2(freqs[0][table.codes[i][0]])
            self.cost.append([np.log2(f[c]) - base for f, c in zip(freqs, table.codes[i])])
            self.out_cost.append(logn - base)
        self._finish()

    def normalize(self, raw: np.ndarray) -> np.ndarray:
        return np.round(raw, 9)


class DiscernibilityMetric(Metric):
    name = "discernibility"
    per_qi = False

    def __init__(self, table: EncodedTable, aggregate: str = "sum") -> None:
        super().__init__(table, "sum")

    def bounds(self, nodes: np.ndarray) -> np.ndarray:
        # No cheap bound: every kept class costs at least its size, suppressed records more.
        return np.full((len(nodes), 1), float(self.table.n))

    def from_classes(self, sizes: np.ndarray, out_classes: np.ndarray) -> np.ndarray:
        kept = sizes[~out_classes].astype(float)
        value = float((kept**2).sum() + sizes[out_classes].sum() * float(self.table.n))
        return np.array([value])

    def summary(self, values: np.ndarray) -> float:
        return float(values[0])


def make_metric(name: str, table: EncodedTable, aggregate: str = "rank") -> Metric:
    if name == "loss":
        return LossMetric(table, aggregate)
    if name == "entropy":
        return EntropyMetric(table, aggregate)
    if name == "discernibility":
        return DiscernibilityMetric(table, aggregate)
    raise ParameterError(f"unknown metric {name!r} (one of {', '.join(METRICS)})")
