"""What-if: the risk and the information loss of one lattice node, chosen by hand.

A privacy officer picks a generalization level per quasi-identifier and a suppression limit and
sees at once what the release would look like: k, classes, records suppressed, l, t, δ,
prosecutor risk and information loss. Nothing here is a second definition: the classes come from
the search's :class:`~anonweb.core.search.lattice.EncodedTable` (grouping the distinct
quasi-identifier rows, never the records; a histogram's cells are read only as each sensitive
column's per-value counts, :mod:`anonweb.core.engine.value_cells`), the figures from the risk profile's builders
(:mod:`anonweb.core.assessment.profile`), the privacy models' own ``passes`` and the search's
metrics (:mod:`anonweb.core.search.metrics`). :class:`WhatIfTable` encodes the table once; each
:meth:`WhatIfTable.evaluate` then touches only the distinct rows, so a caller that keeps the
object answers in well under a second for a million records.

Suppression follows the search's rule: at most ``floor(suppression * n)`` records, whole classes,
``*`` in every quasi-identifier (they stay in the file). Which classes go:

* with privacy models (``k`` or ``models``), the classes that fail one of them and, for
  table-wide models (average risk, population uniqueness), the fewest smallest classes that
  make them hold (:func:`~anonweb.core.models.table_wide.table_wide_suppression`, as the
  search decides), if they fit the limit (``satisfied``); when they do not, nothing is
  suppressed and ``required`` says how many records the models would need;
* without, the limit is spent on the smallest classes: the largest k whose smaller classes fit
  the limit is reached, and the classes below it are suppressed.

The figures describe the records kept (suppressed records form no class), as the search's k and
the release's model checks do; t-closeness and δ-disclosure compare with the whole table's
distribution, as ARX does.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.assessment.charts import homogeneity_histogram
from anonweb.core.assessment.profile import RiskProfile, SensitiveProfile, model_figures
from anonweb.core.engine.histogram import Histogram
from anonweb.core.engine.value_cells import (
    ValueCells,
    is_identity,
    qi_histogram,
    sensitive_cells,
    value_cells,
)
from anonweb.core.errors import ParameterError
from anonweb.core.io.hierarchy import Hierarchy
from anonweb.core.models.base import PrivacyModel
from anonweb.core.models.closeness import t_closeness_of
from anonweb.core.models.counts import ClassData, SensitiveCounts, SensitiveDomain
from anonweb.core.models.diversity import DEFAULT_C, l_diversity_of
from anonweb.core.models.k_anonymity import KAnonymity, k_anonymity_of
from anonweb.core.models.table_wide import table_wide_suppression
from anonweb.core.risk.classes import (
    EquivalenceClasses,
    class_dtype,
    code_dtype,
    json_value,
    size_counts,
)
from anonweb.core.risk.population import population_uniqueness
from anonweb.core.risk.reidentification import DEFAULT_THRESHOLDS, risk_of
from anonweb.core.search.lattice import EncodedTable, _sum_rows
from anonweb.core.search.metrics import make_metric
from anonweb.core.search.suppression_order import tie_keys

# nodes whose classes are kept for repeats and roll-ups, and the memory they may take
NODES_KEPT = 8
NODES_BYTES = 256 * 2**20
# a (classes x sensitive values) matrix is counted while no larger than the distinct rows, or
# than this
DENSE_MIN = 1 << 20


@dataclass(frozen=True)
class WhatIf:
    """One node's outcome. ``profile`` is None when every record is suppressed."""

    levels: dict[str, int]
    level_labels: dict[str, str]
    suppression: float
    suppression_limit: int
    suppressed: int
    required: int  # records the models' failing classes hold (what suppression would need)
    satisfied: bool | None  # None when no model was asked for
    models: tuple[str, ...]
    information_loss: float
    information_loss_measure: str
    loss_per_qi: dict[str, float]
    metric: str
    rows: int
    profile: RiskProfile | None = field(repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        """The risk profile's JSON (of the records kept) plus the node and its loss."""
        out: dict[str, Any] = {}
        if self.profile is not None:
            out.update(self.profile.to_dict())
            out["homogeneity"] = {
                str(name): homogeneity_histogram(*_top_share(sp.diversity.counts))
                for name, sp in self.profile.sensitive.items()
            }
        else:
            out.update({"quasi_identifiers": list(self.levels), "rows": 0, "classes": 0, "k": 0})
        out.update(
            {
                "levels": dict(self.levels),
                "level_labels": dict(self.level_labels),
                "suppression": self.suppression,
                "suppression_limit": self.suppression_limit,
                "suppressed": self.suppressed,
                "required_suppression": self.required,
                "satisfied": self.satisfied,
                "models": list(self.models),
                "information_loss": self.information_loss,
                "information_loss_measure": self.information_loss_measure,
                "loss_per_qi": dict(self.loss_per_qi),
                "metric": self.metric,
                "total_rows": self.rows,
            }
        )
        return out


class WhatIfTable:
    """A table encoded once for quick what-if questions (see the module's docstring).

    ``hierarchies`` must cover every quasi-identifier; a hierarchy given for a sensitive column
    makes its t-closeness hierarchical. ``metric``/``aggregate`` name the information loss
    reported (ARX's Loss, geometric mean, by default), the search's own metric objects.
    """

    def __init__(
        self,
        df: pd.DataFrame | Histogram,
        *,
        quasi_identifiers: Sequence[str],
        hierarchies: Mapping[str, Hierarchy],
        sensitive: Sequence[str] = (),
        population_size: int | None = None,
        metric: str = "loss",
        aggregate: str | None = None,
        thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
        recursive_c: float = DEFAULT_C,
        disclosing_limit: int = 20,
    ) -> None:
        sensitive = [s for s in sensitive if s not in quasi_identifiers]
        # A node's classes are unions of distinct quasi-identifier rows (the distinct rows
        # that differ only in their sensitive values fall in one class at every node), so a
        # what-if groups those (10^8 records: 8.9 M of them, against 29.7 M cells) and counts
        # sensitive values per class from each column's (row, value, count) entries.
        if isinstance(df, Histogram):
            # any engine's histogram: encoded over its quasi-identifier rows, so that nothing
            # built here grows with the cells but the sensitive columns' compact entries
            if list(df.quasi_identifiers) != list(quasi_identifiers) or list(df.sensitive) != list(
                sensitive
            ):
                raise ParameterError(
                    "the histogram was counted over other quasi-identifiers or sensitive columns"
                )
            self.table = EncodedTable.from_histogram(qi_histogram(df), hierarchies)
            t = self.table
            columns = {s: pd.Series(df.labels[s], name=s) for s in sensitive}
            self._sa_values = [df.labels[s] for s in sensitive]
            # the rows encoded are the histogram's classes, unless two of its values name
            # one hierarchy row (39 and '39'): then the entries are read through the merge
            merged = t.m < len(t.row_to_base) or not is_identity(t.row_to_base)
            self._cells = [
                sensitive_cells(df, s).through(t.row_to_base, t.m)
                if merged
                else sensitive_cells(df, s)
                for s in sensitive
            ]
            self._qi_codes, self._qi_weights = t.all_codes, t.weights
            self._qi_first: NDArray[Any] | None = None
        else:
            self.table = EncodedTable(df, list(quasi_identifiers), hierarchies, sensitive)
            t = self.table
            columns = {s: df[s] for s in sensitive}
            self._sa_values = list(t.sa_values)
            if t.base_to_qi is None:  # every distinct row has quasi-identifier values of its own
                self._qi_codes, self._qi_weights = t.all_codes, t.weights
                self._qi_first = None
                row_of = np.arange(t.m, dtype=np.int64)
            else:
                self._qi_codes, self._qi_weights = t.qi_codes, t.qi_weights
                self._qi_first = t.qi_first
                row_of = t.base_to_qi
            n_qi = len(self._qi_weights)
            self._cells = [
                value_cells(
                    row_of,
                    t.sa_codes[j],
                    t.weights,
                    len(t.sa_values[j]),
                    n_qi,
                    unique=len(sensitive) == 1,
                )
                for j in range(len(sensitive))
            ]
            del row_of
        # entries per sensitive column (the distinct rows the table was reduced to): what
        # decides between a dense (classes x values) count and sparse triples
        self._entries = max((c.entries for c in self._cells), default=t.m)
        del t.row_to_base  # only the distinct rows are needed from here on
        # what only a release reads: each quasi-identifier's hierarchy row per input row, and
        # the records per input row
        for q in t.qis:
            q.row_index = np.empty(0, dtype=np.int8)
        t.row_weights = None
        t.sa_codes = []
        del t.qi_codes, t.qi_weights, t.qi_first, t.base_to_qi, t.qi_rows
        # the grouping of the nodes asked for last (class of each quasi-identifier row, sizes,
        # sensitive counts): a repeat is answered from it, a coarser node rolled up from it
        self._nodes: OrderedDict[tuple[int, ...], _Node] = OrderedDict()
        self._nodes_lock = threading.Lock()
        self.quasi_identifiers = tuple(quasi_identifiers)
        self.sensitive = tuple(sensitive)
        self.metric = make_metric(metric, self.table, aggregate)
        if self._qi_codes is not t.all_codes:
            # the codes of every distinct row were read by the metric's set-up only; a class's
            # hierarchy codes are read from the per-level copy, built before they go
            assert t.full_codes
            del t.all_codes, t.codes
        else:
            # the hierarchy codes of a class's rows are read through the compacted codes the
            # grouping keeps: one code matrix over the rows, not two
            t.full_codes = []
        self.population_size = population_size
        self.thresholds = tuple(thresholds)
        self.recursive_c = recursive_c
        self.disclosing_limit = disclosing_limit
        self.sa_hierarchies = {s: hierarchies.get(s) for s in sensitive}
        # an empty column of the same type: what picks the t-closeness distance
        self.sa_types = {s: columns[s].iloc[:0] for s in sensitive}
        self.domains = [
            SensitiveDomain(s, self._sa_values[j], self._cells[j].totals())
            for j, s in enumerate(sensitive)
        ]
        # read as ``_qi_weights`` from here on
        if self._qi_weights is not t.weights:
            del t.weights

    @property
    def rows(self) -> int:
        return self.table.n

    @property
    def heights(self) -> dict[str, int]:
        """Levels per quasi-identifier (0 .. height - 1)."""
        return {q.name: q.height for q in self.table.qis}

    def level_names(self) -> dict[str, list[str]]:
        """A short example label per level of each quasi-identifier (for sliders)."""
        out = {}
        for q in self.table.qis:
            out[q.name] = [_example(lab) for lab in q.labels]
        return out

    def _levels(self, levels: Mapping[str, int]) -> list[int]:
        unknown = sorted(set(levels) - set(self.quasi_identifiers))
        if unknown:
            raise ParameterError(f"not a quasi-identifier: {', '.join(map(str, unknown))}")
        out = []
        for q in self.table.qis:
            lv = levels.get(q.name, 0)
            if isinstance(lv, bool) or not isinstance(lv, int | np.integer):
                raise ParameterError(f"the level of {q.name!r} must be an integer, got {lv!r}")
            if not 0 <= lv < q.height:
                raise ParameterError(
                    f"level {lv} of {q.name!r} is out of range (its hierarchy has levels "
                    f"0..{q.height - 1})"
                )
            out.append(int(lv))
        return out

    def evaluate(
        self,
        levels: Mapping[str, int],
        *,
        suppression: float = 0.0,
        k: int | None = None,
        models: Sequence[PrivacyModel] = (),
    ) -> WhatIf:
        """The node at ``levels`` (a missing column stays at level 0) under ``suppression``."""
        if isinstance(suppression, bool) or not isinstance(suppression, int | float):
            raise ParameterError(f"suppression must be a fraction of rows, got {suppression!r}")
        if not 0 <= suppression < 1:
            raise ParameterError(f"suppression is a fraction of rows in [0, 1), got {suppression}")
        node = self._levels(levels)
        models = list(models) + ([KAnonymity(k)] if k is not None else [])
        for m in models:
            if m.sensitive is not None and m.sensitive not in self.sensitive:
                raise ParameterError(f"{m.sensitive!r} is not a sensitive column of this table")
        t = self.table
        n = t.n
        max_out = math.floor(suppression * n + 1e-9)
        g = self._node(node)
        n_classes, sizes = g.n_classes, g.sizes
        data = ClassData(sizes, lambda name: self._all_counts(g, name))
        if models:
            fail = np.zeros(n_classes, dtype=bool)
            for m in models:
                if m.per_class:
                    fail |= ~m.passes(data)
            required, satisfied = self._table_wide(g, node, data, fail, models, max_out)
            out = fail if satisfied else np.zeros(n_classes, dtype=bool)
        else:
            out = _smallest_within(sizes, max_out)
            required, satisfied = int(sizes[out].sum()), None
        rep = g.rep
        if self.metric.per_qi:
            values = self.metric.actual(node, rep[out], sizes[out])
            per_qi = {q: float(v) for q, v in zip(self.quasi_identifiers, values)}
        else:
            values = self.metric.from_classes(sizes, out)
            per_qi = {}
        kept = ~out
        return WhatIf(
            levels=dict(zip(self.quasi_identifiers, node)),
            level_labels={q.name: _example(q.labels[lv]) for q, lv in zip(t.qis, node)},
            suppression=float(suppression),
            suppression_limit=max_out,
            suppressed=int(sizes[out].sum()),
            required=required,
            satisfied=satisfied,
            models=tuple(m.describe() for m in models),
            information_loss=self.metric.summary(values),
            information_loss_measure=self.metric.describe(),
            loss_per_qi=per_qi,
            metric=self.metric.name,
            rows=n,
            profile=self._profile(g, kept, node) if kept.any() else None,
        )

    def _table_wide(
        self,
        g: _Node,
        node: list[int],
        data: ClassData,
        fail: NDArray[Any],
        models: Sequence[PrivacyModel],
        max_out: int,
    ) -> tuple[int, bool]:
        """The records the models need suppressed and whether they fit the limit, with the
        classes the table-wide models suppress added to ``fail`` when they do; otherwise the
        records they would need with every kept class to spend."""
        required = int(g.sizes[fail].sum())
        table_wide = [m for m in models if not m.per_class]
        if not table_wide:
            return required, required <= max_out

        def ties(idx: NDArray[Any]) -> Sequence[NDArray[Any]]:
            return tie_keys(self.metric, self.table, node, g.rep[idx], g.sizes[idx])

        more = None
        if required <= max_out:
            more = table_wide_suppression(table_wide, data, fail, max_out - required, ties=ties)
        if more is not None:
            fail |= more
            return required + int(g.sizes[more].sum()), True
        spare = int(g.sizes[~fail].sum())
        need = table_wide_suppression(table_wide, data, fail, spare, ties=ties)
        return required + (int(g.sizes[need].sum()) if need is not None else 0), False

    def _node(self, node: list[int]) -> _Node:
        """The classes of ``node``: kept from an earlier call, rolled up from a kept finer node
        (every class of a finer node lies inside one class of a coarser one), or grouped from
        the distinct quasi-identifier rows."""
        key = tuple(node)
        with self._nodes_lock:
            if key in self._nodes:
                self._nodes.move_to_end(key)
                return self._nodes[key]
            finer = [
                g for levels, g in self._nodes.items() if all(a <= b for a, b in zip(levels, key))
            ]
        parent = min(finer, key=lambda g: g.n_classes, default=None)
        if (
            parent is not None
            and not parent.matrices
            and 2 * parent.n_classes > len(self._qi_weights)
        ):
            parent = None  # as many classes as rows: grouping the rows afresh costs no more
        g = self._rolled_up(node, parent) if parent is not None else self._grouped(node)
        with self._nodes_lock:
            self._nodes[key] = g
            self._nodes.move_to_end(key)
            while len(self._nodes) > 1 and (
                len(self._nodes) > NODES_KEPT
                or sum(x.nbytes for x in self._nodes.values()) > NODES_BYTES
            ):
                self._nodes.popitem(last=False)
        return g

    def _grouped(self, node: list[int]) -> _Node:
        inv, n_classes, sizes = self.table.group_sizes(node, None, self._qi_weights, self._qi_codes)
        assert sizes is not None
        rep = np.empty(n_classes, dtype=np.int64)
        rep[inv] = np.arange(len(inv))  # any row of a class represents it
        if self._qi_first is not None:
            rep = self._qi_first.take(rep)
        inv = inv.astype(code_dtype(n_classes), copy=False)
        return _Node(n_classes, np.rint(sizes).astype(np.int64), rep, built=inv)

    def _rolled_up(self, node: list[int], parent: _Node) -> _Node:
        """The classes of ``node`` from those of a finer node: one row per parent class is
        grouped, and the parent's sensitive counts (classes x values) summed per class."""
        t = self.table
        # the parent's classes' codes at this node, read from their representative rows
        codes = np.stack([t.level_codes(i, lv, parent.rep) for i, lv in enumerate(node)])
        cols = [c.astype(np.int64) for c in codes]
        cards = [int(c.max()) + 1 if len(c) else 1 for c in cols]
        space = math.prod(cards)
        if space < 2**62:  # one key of mixed radix
            key = np.zeros(parent.n_classes, dtype=np.int64)
            for c, card in zip(cols, cards):
                key *= card
                key += c
        else:  # too many combinations for one int64: column by column, renumbering
            key = np.zeros(parent.n_classes, dtype=np.int64)
            for c, card in zip(cols, cards):
                key = np.unique(key * card + c, return_inverse=True)[1].astype(np.int64)
            space = int(key.max()) + 1 if len(key) else 0
        # classes numbered in key order, as grouping the node afresh numbers them (the codes
        # are ordered as the compact codes are)
        if space <= 8 * len(key) + 1024:
            present = np.zeros(space, dtype=bool)
            present[key] = True
            ids = np.cumsum(present) - 1
            uniq = np.flatnonzero(present)
            up = ids.take(key)
        else:
            uniq, up = np.unique(key, return_inverse=True)
        n_classes = len(uniq)
        sizes = np.bincount(up, weights=parent.sizes, minlength=n_classes)
        rep = np.empty(n_classes, dtype=np.int64)
        rep[up] = parent.rep
        g = _Node.rolled_up(parent, up, n_classes, np.rint(sizes).astype(np.int64), rep)
        for name, matrix in parent.matrices.items():
            g.matrices[name] = np.rint(_sum_rows(matrix, up, n_classes)).astype(np.int64)
        return g

    def _matrix(self, g: _Node, name: str) -> NDArray[Any] | None:
        """Records per (class, sensitive value) of a node, counted once from the column's
        entries, a value at a time; None when the matrix would be larger than the distinct
        rows (then the counts are built sparse, see :meth:`_sparse_counts`)."""
        if name in g.matrices:
            return g.matrices[name]
        j = self.sensitive.index(name)
        cells = self._cells[j]
        nsa = cells.n_values
        if g.n_classes * nsa > max(self._entries, DENSE_MIN):
            return None
        matrix = np.zeros((g.n_classes, nsa), dtype=np.int64)
        inv = _wide(g.inv)
        for v in range(nsa):
            column = self._value_column(inv, g.n_classes, cells, v)
            if column is not None:
                matrix[:, v] = column
        g.matrices[name] = matrix
        return matrix

    @staticmethod
    def _value_column(
        inv: NDArray[Any], n_classes: int, cells: ValueCells, v: int
    ) -> NDArray[Any] | None:
        """Records of value ``v`` per class of a node whose rows are in classes ``inv``
        (None when no row holds it): the classes of the rows holding it, counted with their
        records (sums of whole numbers, exact in a double)."""
        rows, counts = cells.value(v)
        if not len(rows):
            return None
        summed = np.bincount(inv.take(rows), weights=counts, minlength=n_classes)
        return np.rint(summed).astype(np.int64)

    def _all_counts(self, g: _Node, name: str) -> SensitiveCounts:
        """Sensitive value counts of every class of a node (the models' checks)."""
        j = self.sensitive.index(name)
        matrix = self._matrix(g, name)
        if matrix is not None:
            return SensitiveCounts.from_histogram(self.domains[j], matrix)
        return self._sparse_counts(g, name, None)

    def _sparse_counts(self, g: _Node, name: str, kept: NDArray[Any] | None) -> SensitiveCounts:
        """Sensitive value counts as (class, value, count) triples of the classes present
        (of the ``kept`` classes only, renumbered): each value's counts per class, laid out
        class by class with the values in order inside (the order a dense count gives)."""
        j = self.sensitive.index(name)
        cells = self._cells[j]
        sizes = g.sizes if kept is None else g.sizes[kept]
        n_classes = len(sizes)
        found: list[tuple[int, NDArray[Any], NDArray[Any]]] = []
        per_class = np.zeros(n_classes, dtype=np.int64)  # values present in each class
        # a class per quasi-identifier row, and a value at most once per row: each entry is
        # a triple of its own, read without counting over the classes
        single = cells.unique and g.n_classes == len(self._qi_weights)
        renumber = None if kept is None or not single else np.cumsum(kept) - 1
        inv = g.inv if single else _wide(g.inv)
        for v in range(cells.n_values):
            if single:
                rows, counts = cells.value(v)
                where = inv.take(rows)
                if kept is not None and renumber is not None:
                    inside = kept.take(where)
                    where, counts = renumber.take(where[inside]), counts[inside]
                where = where.astype(class_dtype(n_classes), copy=False)
            else:
                column = self._value_column(inv, g.n_classes, cells, v)
                if column is None:
                    continue
                if kept is not None:
                    column = column[kept]
                where = np.flatnonzero(column).astype(class_dtype(n_classes))
                counts = column.take(where)
                del column
            found.append((v, where, counts))
            per_class[where] += 1
        total = int(per_class.sum())
        fill = np.cumsum(per_class) - per_class  # each class's first triple
        del per_class
        c = np.empty(total, dtype=class_dtype(n_classes))
        val = np.empty(total, dtype=code_dtype(cells.n_values))
        cnt = np.empty(total, dtype=class_dtype(self.table.n + 1))
        while found:
            v, where, counts = found.pop(0)
            dest = fill.take(where)
            c[dest], val[dest], cnt[dest] = where, v, counts
            fill[where] += 1
            del dest, where, counts
        del fill
        return SensitiveCounts.from_codes(
            self.domains[j], c, val, n_classes, weights=cnt, sizes=sizes
        )

    def _profile(self, g: _Node, kept: NDArray[Any], node: list[int]) -> RiskProfile:
        sizes = g.sizes[kept]
        kept_rep = g.rep[kept]
        everything = bool(kept.all())
        # one code per kept class, as the risk profile of a histogram has them: the risk
        # builders count records from the class sizes (a code per record would make the
        # what-if's memory grow with the rows)
        codes = np.arange(len(sizes), dtype=np.int64)
        ec = EquivalenceClasses(self.quasi_identifiers, codes, sizes)
        profiles = {}
        for j, name in enumerate(self.sensitive):
            matrix = self._matrix(g, name)
            if matrix is not None:
                sc = SensitiveCounts.from_histogram(
                    self.domains[j], matrix if everything else matrix[kept]
                )
            else:
                sc = self._sparse_counts(g, name, None if everything else kept)
            profiles[name] = SensitiveProfile(
                l_diversity_of(sc, recursive_c=self.recursive_c),
                t_closeness_of(
                    sc, self.sa_types[name], distance=None, hierarchy=self.sa_hierarchies[name]
                ),
                self._disclosing(sc, node, kept_rep),
                model_figures(sc),
            )
        pop = self.population_size
        if pop is not None and pop < int(sizes.sum()):
            pop = None  # a population smaller than the records kept is not one they come from
        return RiskProfile(
            quasi_identifiers=self.quasi_identifiers,
            anonymity=k_anonymity_of(ec),
            risk=risk_of(ec, thresholds=self.thresholds, population_size=pop),
            population=population_uniqueness(sizes, pop) if pop is not None else None,
            sensitive=profiles,
            classes=ec,
        )

    def _disclosing(
        self, sc: SensitiveCounts, node: list[int], rep: NDArray[Any]
    ) -> tuple[dict[Any, Any], ...]:
        """The largest classes whose records all share one sensitive value, described by
        their generalized quasi-identifier values (as the risk profile lists them)."""
        which = np.flatnonzero(sc.distinct == 1)
        which = which[np.argsort(-sc.sizes[which], kind="stable")][: self.disclosing_limit]
        t = self.table
        out = []
        for j, v in zip(which, sc.val[sc.starts[which]]):
            qis = {}
            for i, (q, lv) in enumerate(zip(t.qis, node)):
                label = q.labels[lv][t.level_codes(i, lv, rep[j : j + 1])[0]]
                qis[q.name] = json_value(label)
            out.append(
                {
                    "quasi_identifiers": qis,
                    "size": int(sc.sizes[j]),
                    "value": json_value(sc.values[v]),
                }
            )
        return tuple(out)


@dataclass
class _Node:
    """A node's classes: their sizes, a representative distinct row each, records per (class,
    sensitive value) once counted, and the class of each distinct quasi-identifier row
    (``inv``). A node rolled up from a finer one builds ``inv`` when first read (most take
    their counts from the finer node's and never read it): until then it holds the class of
    each class of the nearest grouped node, and that node's classes per row."""

    n_classes: int
    sizes: NDArray[Any]
    rep: NDArray[Any]
    matrices: dict[str, NDArray[Any]] = field(default_factory=dict)
    built: NDArray[Any] | None = None
    via: tuple[NDArray[Any], NDArray[Any]] | None = None

    @classmethod
    def rolled_up(
        cls, parent: _Node, up: NDArray[Any], n_classes: int, sizes: NDArray[Any], rep: NDArray[Any]
    ) -> _Node:
        """A coarser node whose classes hold the parent's (class ``up[c]`` holds the parent's
        class ``c``)."""
        if parent.via is not None:
            parent_up, rows = parent.via
            via = (up.take(parent_up), rows)
        else:
            assert parent.built is not None
            via = (up, parent.built)
        return cls(n_classes, sizes, rep, via=via)

    @property
    def inv(self) -> NDArray[Any]:
        if self.built is None:
            assert self.via is not None
            up, rows = self.via
            # two threads may both build it: the same array either way
            self.built = up.astype(code_dtype(self.n_classes)).take(rows)
            self.via = None
        return self.built

    @property
    def nbytes(self) -> int:
        held = self.built.nbytes if self.built is not None else 0
        if self.via is not None:  # the rows' classes of a grouped node, maybe let go there
            held += self.via[0].nbytes + self.via[1].nbytes
        return (
            held
            + self.sizes.nbytes
            + self.rep.nbytes
            + sum(m.nbytes for m in self.matrices.values())
        )


def _wide(inv: NDArray[Any]) -> NDArray[Any]:
    """Class numbers as ``bincount`` reads them (``intp``): widened once per node, not once
    per value for every entry gathered."""
    return inv.astype(np.intp, copy=False)


def _smallest_within(sizes: NDArray[Any], max_out: int) -> NDArray[Any]:
    """Classes to suppress so that the smallest kept class is as large as the limit allows:
    every class below the largest k whose smaller classes hold at most ``max_out`` records."""
    if max_out <= 0 or len(sizes) == 0:
        return np.zeros(len(sizes), dtype=bool)
    present, counts = size_counts(sizes)
    below = np.cumsum(present * counts)  # records in classes of size <= present[i]
    fits = below <= max_out
    if not fits.any():
        return np.zeros(len(sizes), dtype=bool)
    last = int(np.flatnonzero(fits)[-1])
    if last == len(present) - 1:  # everything would go: keep the largest classes
        last -= 1
        if last < 0:
            return np.zeros(len(sizes), dtype=bool)
    return np.asarray(sizes <= present[last])


def _example(labels: NDArray[Any]) -> str:
    for value in labels:
        if value is not None and not (isinstance(value, float) and np.isnan(value)):
            return str(value)
    return ""


def _top_share(sc: SensitiveCounts) -> tuple[NDArray[Any], NDArray[Any]]:
    """Per class: the share of its most frequent sensitive value, and its size."""
    return sc.cnt[sc.starts] / sc.sizes, sc.sizes
