"""Optimal full-domain generalization with a suppression limit.

The lattice has one node per combination of per-QI hierarchy levels. A node is *anonymous* when
the records in classes that violate a requested privacy model number at most
``floor(suppression * n)`` (ARX's rule); those records are then suppressed (``*`` in every QI),
and, while table-wide models (average risk) fail, the smallest classes too within the limit.
The search returns the anonymous node of least information loss (ARX's Loss by default).

How it stays fast (after Flash / OLA, Kohlmayer et al. 2012; El Emam et al. 2009):

* the monotonic part of the models (k-anonymity, distinct l-diversity — monotonic even with
  suppression) is decided for whole sublattices at once: a node that passes makes every
  generalization of it pass, a node that fails makes every specialization fail. Nodes are
  checked by binary search along paths from the bottom of the unknown region to its top;
* a model that is not monotonic may imply one that is (:meth:`PrivacyModel.implied`; e.g.
  t-closeness needs the values a class contains to cover enough of the table): the implied
  model joins the monotonic ones, so sublattices it rules out are settled without computing
  the model itself, and since a class failing it fails the model, no outcome changes. Such a
  model may also bound the records every specialization of a node must suppress in each class
  (:meth:`PrivacyModel.least_suppressed`: δ-disclosure's and β-likeness's caps on value shares,
  t-closeness's distance); a node whose bound passes the limit fails with its specializations;
* a table-wide model may say which nodes no suppression within the limit can satisfy, a
  condition merging classes keeps (:meth:`PrivacyModel.satisfiable_in_groups`: average risk
  is at least the fewest classes holding the records kept over the records): such a node
  fails with its specializations, unchecked;
* every metric has a lower bound (its value ignoring suppression) that only grows upwards, so
  once a solution of loss L is known, every node whose bound is not below L is discarded;
* grouping a node is one mixed-radix int64 key over the distinct rows and a bincount.

Beyond ``max_nodes`` checked nodes or ``time_limit`` seconds the search stops being exhaustive: it
returns the best node found so far, or descends greedily from the top node, and says so in
``search["optimal"] = False``.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.engine.histogram import Histogram
from anonweb.core.errors import ParameterError
from anonweb.core.io.hierarchy import Hierarchy
from anonweb.core.models.base import PrivacyModel
from anonweb.core.models.counts import ClassData, SensitiveCounts, SensitiveDomain
from anonweb.core.models.k_anonymity import KAnonymity
from anonweb.core.models.population_table import PopulationCounts
from anonweb.core.models.table_wide import (
    Ties,
    table_wide_suppression,
    table_wide_suppression_in_groups,
)
from anonweb.core.risk.classes import SUPPRESSED
from anonweb.core.search.lattice import (
    ClassTable,
    ClassTableCache,
    EncodedTable,
    pack_levels,
    packed_leq,
)
from anonweb.core.search.metrics import Metric, make_metric
from anonweb.core.search.suppression_order import tie_keys

MAX_LATTICE = 2_000_000
# binary searches of the tagging phase run side by side, their checks batched (measured on
# Adult: without suppression k=2 and k=5 check half the nodes, in half the time; with a 2%
# suppression limit about as many nodes are checked, in 10-30% less time, since a batch pays
# Python's overhead once for many nodes; not so with table-wide models, see _tag_phase)
TAG_PATHS = 16
# more paths side by side once this many checked nodes passed the monotonic models and failed
# the others (δ-disclosure, t-closeness): such nodes settle only what lies above them, so the
# search goes on through many of them whichever paths it takes, and a larger batch pays
# Python's overhead per node less often. Measured on Adult, CPU time of the search, in the
# same run as 16 paths throughout: δ-disclosure k=5 at 2 % 153 -> 138 ms (1,239 nodes
# checked either way), hierarchical t-closeness k=2 at 5 % 111 -> 109 ms; the runs meeting
# fewer such nodes keep 16 paths (with 32 throughout, the k-only runs, which find a solution
# within their first 17 checks, check more nodes: k=2 without suppression 134 -> 162)
WIDE_PATHS = 32
WIDEN_AFTER = 64
# where the tagging phase first looks along a path: this many nodes up from its start (or its
# top, if shorter), then, while nodes fail, twice as far each time (on Adult's paths of at
# most 17 nodes: the top of what is left), bisecting below the first node that passes (0:
# bisect from the start). A failing node lets every node above it on the path be rolled up
# from its classes; a passing one leaves the nodes below it to be grouped afresh. Measured on
# Adult against bisection: k=2 152 nodes checked instead of 247, k=5 84 / 113, k=5 with 2 %
# suppression 165 / 301 in about half the time, 10-map 157 / 286; no run checked 2 % more
# nodes than before
GALLOP = 8
# paths that run on past the nodes still in the running while the checks out of it have
# failed as often as passed (see _Search._reaching_out)
REACH_TRIAL = 2
# the finer nodes' classes one batch of checks rolls up at most (its memory: about a hundred
# bytes each); a node whose finer node holds more is checked in a batch of its own
BATCH_CLASSES = 1 << 20
# the models that are not monotonic judge first the classes holding more than 1/LARGE_CLASS
# of the records the suppression limit allows (see _Checker._judge_others)
LARGE_CLASS = 2


@dataclass(frozen=True)
class SearchResult:
    quasi_identifiers: tuple[str, ...]
    levels: dict[str, int]
    suppressed: int
    k: int
    classes: int
    information_loss: float  # exactly the score minimised (see information_loss_measure)
    loss_per_qi: dict[str, float]
    metric: str
    models: tuple[str, ...]
    search: dict[str, Any]
    row_suppressed: NDArray[Any] = field(repr=False, compare=False)
    table: EncodedTable = field(repr=False, compare=False)
    aggregate: str | None = None
    information_loss_measure: str = ""
    # other nodes that satisfy the models: the Pareto front of loss against risk
    # (:func:`pareto_alternatives`), when asked for
    alternatives: tuple[dict[str, Any], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "alternatives": list(self.alternatives),
            "quasi_identifiers": list(self.quasi_identifiers),
            "levels": dict(self.levels),
            "suppressed": self.suppressed,
            "k": self.k,
            "classes": self.classes,
            "information_loss": self.information_loss,
            "information_loss_measure": self.information_loss_measure,
            "loss_per_qi": dict(self.loss_per_qi),
            "metric": self.metric,
            "aggregate": self.aggregate,
            "models": list(self.models),
            "search": dict(self.search),
        }

    def apply(self, df: pd.DataFrame) -> pd.DataFrame:
        """The generalized table: QIs at the chosen levels, suppressed rows ``*`` in every QI.

        A generalized or suppressed column is text throughout (the hierarchy's labels; level 0
        is each value as the hierarchy writes it), so that numbers never share a column with
        ``*`` or interval labels and the table can be written to Parquet. A column left at
        level 0 with nothing suppressed keeps its type.
        """
        out = df.copy()
        suppressed = self.row_suppressed.any()
        for q, name in zip(self.table.qis, self.quasi_identifiers):
            level = self.levels[name]
            if level == 0 and not suppressed:
                continue
            labels = q.labels[level].copy()
            labels[pd.isna(labels)] = None  # a missing value stays missing, as None
            col = labels[q.level_codes[level][q.row_index]]
            col[self.row_suppressed] = SUPPRESSED
            out[name] = pd.Series(col, index=df.index, dtype=object)
        return out


@dataclass
class _Eval:
    mono_ok: bool
    ok: bool
    ct: ClassTable
    # classes outside the models (suppressed), for nodes the monotonic models accept: all of
    # them for a node that passes; for one that fails, enough to pass the limit
    out_classes: NDArray[Any] = field(default_factory=lambda: np.zeros(0, dtype=bool))


class _Checker:
    """A node's classes checked against every model, through the models' own checks.

    Per-class models decide which classes are suppressed (the monotonic ones first: if their
    failures alone exceed the limit, the node and all its specializations fail); table-wide
    models (average risk) then suppress the smallest of the classes kept while the limit allows
    (:func:`~anonweb.core.models.table_wide.table_wide_suppression`), classes of one size taken
    in the order of ``metric`` (:mod:`.suppression_order`).
    """

    def __init__(
        self,
        table: EncodedTable,
        models: Sequence[PrivacyModel],
        suppression: float,
        metric: Metric | None = None,
    ) -> None:
        self.table = table
        # what orders classes of one size for the table-wide models (height: by their values)
        self.metric = metric if metric is not None else make_metric("height", table)
        self.max_out = math.floor(suppression * table.n + 1e-9)
        # models that read only class sizes first (see check)
        # with the monotonic necessary conditions of the other models: a class that fails one
        # fails its model, so they change no outcome, but settle whole sublattices early
        implied = [i for m in models if m.per_class and not m.monotonic for i in m.implied()]
        self.mono = sorted(
            [*(m for m in models if m.per_class and m.monotonic), *implied],
            key=lambda m: not _sizes_only(m),
        )
        # for nodes already known to pass the monotonic models: the implied ones change no
        # outcome (a class failing one fails its model, which is checked), so they are skipped
        self.own_mono = [m for m in self.mono if not any(m is i for i in implied)]
        # every class kept holds at least this many records (see _least_suppressed)
        self.k = max((m.k for m in self.mono if isinstance(m, KAnonymity)), default=1)
        self.other = [m for m in models if m.per_class and not m.monotonic]
        self.table_wide = [m for m in models if not m.per_class]
        self.sa_index = {s: i for i, s in enumerate(table.sensitive)}
        self.domains = {
            s: SensitiveDomain(s, table.sa_values[i], table.sa_global(i).astype(np.int64))
            for s, i in self.sa_index.items()
        }
        self.only_mono = all(m.monotonic for m in models)
        self.populations = self._populations(models)

    def _populations(self, models: Sequence[PrivacyModel]) -> dict[int, PopulationCounts]:
        """The population tables the models read, encoded against the search's hierarchies,
        each checked to hold the table (ARX's research subset)."""
        found: dict[int, PopulationCounts] = {}
        hierarchies = {q.name: q.hierarchy for q in self.table.qis}
        for m in models:
            pop = m.population
            if pop is None or id(pop) in found:
                continue
            counts = pop.bind([q.name for q in self.table.qis], hierarchies)
            bottom = np.zeros(len(self.table.qis), dtype=np.int64)
            inv, n, sizes = self.table.group_sizes(bottom, None, self.table.weights)
            first = np.empty(n, dtype=np.int64)
            first[inv[::-1]] = np.arange(len(inv) - 1, -1, -1)
            assert sizes is not None
            counts.check_subset(self.table.qi_rows[first], sizes)
            found[id(pop)] = counts
        return found

    def _population(
        self, levels: Sequence[tuple[int, ...]], reps: Sequence[NDArray[Any]]
    ) -> Callable[[Any], NDArray[Any]] | None:
        """The population's size of each class of the nodes ``levels`` (classes represented
        by the distinct rows ``reps``, node after node), for the models that read one."""
        if not self.populations:
            return None

        def sizes(population: Any) -> NDArray[Any]:
            counts = self.populations[id(population)]
            parts = [counts.at(lv, self.table.qi_rows[r]) for lv, r in zip(levels, reps)]
            return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

        return sizes

    def _data(
        self,
        sizes: NDArray[Any],
        hist: Callable[[int], NDArray[Any]],
        population: Callable[[Any], NDArray[Any]] | None = None,
    ) -> ClassData:
        def counts(name: str) -> SensitiveCounts:
            return SensitiveCounts.from_histogram(self.domains[name], hist(self.sa_index[name]))

        def dense(name: str) -> tuple[SensitiveDomain, NDArray[Any]]:
            return self.domains[name], hist(self.sa_index[name])

        return ClassData(sizes, counts, dense, population)

    def check(
        self,
        levels: Sequence[int] | NDArray[Any],
        parent: ClassTable | None = None,
        settled: bool = False,
    ) -> _Eval:
        """The node's classes and verdict. ``settled``: the node is known to pass the monotonic
        models."""
        ct = self.table.classes(levels, parent, list(self.sa_index.values()), lazy=True)
        mono = self.own_mono if settled else self.mono
        fail = np.zeros(len(ct.sizes), dtype=bool)
        return self._decide(ct, fail, mono, bound=not settled)

    def _ties(self, ct: ClassTable) -> Ties:
        """The order among the classes of one size of ``ct`` for the table-wide models."""

        def keys(idx: NDArray[Any]) -> Sequence[NDArray[Any]]:
            return tie_keys(self.metric, self.table, ct.levels, ct.rep[idx], ct.sizes[idx])

        return keys

    def _out_of_reach(
        self, data: ClassData, groups: NDArray[Any] | None = None, n_groups: int = 1
    ) -> NDArray[Any]:
        """Per node (its classes assigned by ``groups``; None: one node): whether a table-wide
        model rules it out whichever classes are suppressed
        (:meth:`PrivacyModel.satisfiable_in_groups`), and with it every specialization: a
        monotonic condition, as the monotonic models' are."""
        if groups is None:
            groups = np.zeros(len(data), dtype=np.int64)
        out = np.zeros(n_groups, dtype=bool)
        for m in self.table_wide:
            can = m.satisfiable_in_groups(data, groups, n_groups, self.max_out)
            if can is not None:
                out |= ~can
        return out

    def _decide(
        self,
        ct: ClassTable,
        fail: NDArray[Any],
        mono: Sequence[PrivacyModel],
        bound: bool = True,
    ) -> _Eval:
        """The rest of :meth:`check` for classes ``ct``, of which ``fail`` already fail
        monotonic models (those not among ``mono``). ``bound``: the table-wide models'
        monotonic conditions are still to be asked (not for a node known to pass them)."""
        sizes = ct.sizes
        data = self._data(sizes, ct.hist, self._population([ct.levels], [ct.rep]))
        for m in mono:
            # one at a time, k-anonymity first: a node it rejects needs no value histograms
            fail |= ~m.passes(data)
            if sizes[fail].sum() > self.max_out:
                return _Eval(False, False, ct)
        if bound and self.table_wide and self._out_of_reach(data)[0]:
            return _Eval(False, False, ct)
        least = _least_suppressed(mono, data, fail, self.k)
        if least is not None and least.sum() > self.max_out:
            return _Eval(False, False, ct)
        self._judge_others(data, ct.hist, fail, np.zeros(len(sizes), dtype=np.int64))
        spare = self.max_out - int(sizes[fail].sum())
        ok = spare >= 0
        if ok and self.table_wide:
            more = table_wide_suppression(
                self.table_wide,
                data,
                fail,
                spare,
                ties=self._ties(ct),
            )
            ok = more is not None
            if more is not None:
                fail |= more
        return _Eval(True, ok, ct, fail)

    def check_few_histograms(
        self, nodes: NDArray[Any], parents: Sequence[ClassTable]
    ) -> list[_Eval]:
        """:meth:`check_many` for nodes most of which the models that read only class sizes
        (k-anonymity) reject: those decide the batch at once, and the value histograms are
        built only for the nodes they accept, as :meth:`check` would."""
        batch = self.table.classes_many(nodes, parents, [])
        sizes_only = [m for m in self.mono if _sizes_only(m)]
        rest = [m for m in self.mono if not _sizes_only(m)]
        data = ClassData(batch.sizes)
        fail = np.zeros(len(batch.sizes), dtype=bool)
        for m in sizes_only:
            fail |= ~m.passes(data)
        closed = batch.per_node(np.where(fail, batch.sizes, 0)) > self.max_out
        if self.table_wide:
            closed |= self._out_of_reach(data, batch.node_of, len(parents))
        accepted = np.flatnonzero(~closed)
        if rest and len(accepted) > 1:
            # the histograms are needed by several nodes: the models that read them decide
            # those nodes side by side, as one batch (the same outcome as one by one)
            many = self._decide_tables([batch.table(b) for b in accepted])
            decided = dict(zip(accepted.tolist(), many))
        else:
            decided = {}
        evals = []
        for b in range(len(parents)):
            if b in decided:
                evals.append(decided[b])
                continue
            ct = batch.table(b)
            if closed[b]:
                evals.append(_Eval(False, False, ct))
            else:
                lo, hi = batch.starts[b], batch.starts[b + 1]
                if rest or self.other or self.table_wide:
                    evals.append(self._decide(ct, fail[lo:hi].copy(), rest, bound=False))
                else:
                    # nothing else to ask: the classes failing the models that read sizes
                    # are within the limit (the node is not closed), as _decide would find
                    evals.append(_Eval(True, True, ct, fail[lo:hi].copy()))
        return evals

    def check_many(
        self, nodes: NDArray[Any], parents: Sequence[ClassTable], settled: bool = False
    ) -> list[_Eval]:
        """:meth:`check` for several nodes at once (each rolled up from its given finer node)."""
        batch = self.table.classes_many(nodes, parents, list(self.sa_index.values()))
        tables = [batch.table(b) for b in range(len(parents))]
        hists = batch.hists.__getitem__
        mono = self.own_mono if settled else self.mono
        return self._decide_many(
            tables, batch.sizes, batch.node_of, batch.starts, hists, mono, bound=not settled
        )

    def _decide_tables(self, tables: list[ClassTable]) -> list[_Eval]:
        """:meth:`check_many` for nodes whose classes are at hand, their histograms built node
        by node as they are read."""
        lens = [len(t) for t in tables]
        starts = np.concatenate(([0], np.cumsum(lens)))
        node_of = np.repeat(np.arange(len(tables)), lens)
        sizes = np.concatenate([t.sizes for t in tables])
        built: dict[int, NDArray[Any]] = {}

        def hists(j: int) -> NDArray[Any]:
            if j not in built:
                built[j] = np.concatenate([t.hist(j) for t in tables])
            return built[j]

        # only nodes the table-wide models' conditions leave open come here
        return self._decide_many(tables, sizes, node_of, starts, hists, self.mono, bound=False)

    def _decide_many(
        self,
        tables: list[ClassTable],
        sizes: NDArray[Any],
        node_of: NDArray[Any],
        starts: NDArray[Any],
        hists: Callable[[int], NDArray[Any]],
        mono: Sequence[PrivacyModel],
        bound: bool,
    ) -> list[_Eval]:
        """The outcome of each node of ``tables``, whose classes lie side by side (node ``b``
        owns ``starts[b]:starts[b+1]``), each model read once for them all. ``bound`` as for
        :meth:`_decide`."""
        reps = [t.rep for t in tables]
        population = self._population([t.levels for t in tables], reps)
        data = self._data(sizes, hists, population)

        def per_node(values: NDArray[Any]) -> NDArray[Any]:
            return np.bincount(node_of, weights=values, minlength=len(tables))

        fail = np.zeros(len(sizes), dtype=bool)
        for m in mono:
            fail |= ~m.passes(data)
        # the nodes whose failing classes alone pass the limit need no finer bound
        closed = per_node(np.where(fail, sizes, 0)) > self.max_out
        reach = np.ones(len(tables), dtype=bool)
        if bound and self.table_wide:
            reach = ~self._out_of_reach(data, node_of, len(tables))
            closed |= ~reach
        least = _least_suppressed(mono, data, fail | closed[node_of], self.k)
        mono_out = per_node(np.where(fail, sizes, 0) if least is None else least)
        open_nodes = (mono_out <= self.max_out) & reach
        if open_nodes.all():
            self._judge_others(data, hists, fail, node_of)
        elif self.other and open_nodes.any():
            # the other models only for the nodes the monotonic ones leave open (each class
            # is judged on its own, so the figures are those of the whole batch)
            rows = np.flatnonzero(open_nodes[node_of])
            kept_tables = [t for t, o in zip(tables, open_nodes) if o]
            open_hists = _rows_of(hists, rows)
            open_data = self._data(
                sizes[rows],
                open_hists,
                self._population([t.levels for t in kept_tables], [t.rep for t in kept_tables]),
            )
            open_data.keep_figures(data, rows)
            open_fail = fail[rows]
            self._judge_others(open_data, open_hists, open_fail, node_of[rows])
            fail[rows] = open_fail
        spare = self.max_out - per_node(np.where(fail, sizes, 0)).astype(np.int64)
        spare[mono_out > self.max_out] = -1  # failed already
        ok = spare >= 0
        if self.table_wide:
            more, ok = table_wide_suppression_in_groups(
                self.table_wide,
                data,
                fail,
                node_of,
                spare,
                ties=lambda b: self._ties(tables[b]),
            )
            fail |= more
        evals = []
        for b, ct in enumerate(tables):
            if not open_nodes[b]:
                evals.append(_Eval(False, False, ct))
            else:
                lo, hi = starts[b], starts[b + 1]
                evals.append(_Eval(True, bool(ok[b]), ct, fail[lo:hi]))
        return evals

    def _judge_others(
        self,
        data: ClassData,
        hists: Callable[[int], NDArray[Any]],
        fail: NDArray[Any],
        node_of: NDArray[Any],
    ) -> None:
        """Mark in ``fail`` the classes (of the nodes ``node_of`` says) that the other
        (per-class, not monotonic) models reject: every one of them in a node that ends within
        the suppression limit, and enough of them to put each other node over it (what a
        node rejected suppresses decides nothing: see :class:`_Eval`).

        Largest classes first: a node these models reject holds, on Adult, one or two classes
        that alone fail more records than the limit, among hundreds of small ones. So the
        classes holding more than a share of the limit (:data:`LARGE_CLASS`) are judged
        first, and the rest only in the nodes still within the limit. Each class is judged
        on its own (a per-class model's verdict on a class reads that class alone), so the
        verdicts are those of judging every class at once."""
        if not self.other:
            return
        sizes = data.sizes
        todo = ~fail  # a class failing already needs no other verdict
        if self.max_out > 0:
            large = todo & (sizes * LARGE_CLASS > self.max_out)
            first = np.flatnonzero(large)
            if 0 < len(first) < np.count_nonzero(todo):
                self._judge(data, hists, fail, first)
                out = np.bincount(node_of, weights=np.where(fail, sizes, 0))
                todo &= ~large
                todo &= (out <= self.max_out)[node_of]
        self._judge(data, hists, fail, np.flatnonzero(todo))

    def _judge(
        self,
        data: ClassData,
        hists: Callable[[int], NDArray[Any]],
        fail: NDArray[Any],
        rows: NDArray[Any],
    ) -> None:
        """``fail[rows] |=`` the verdicts of the other models on the classes ``rows``."""
        if not len(rows):
            return
        part = data
        if len(rows) < len(fail):
            population = None
            if self.populations:

                def population(table: Any) -> NDArray[Any]:
                    return np.asarray(data.population_sizes(table)[rows])

            part = self._data(data.sizes[rows], _rows_of(hists, rows), population)
            # figures the monotonic models computed for every class (t-closeness's
            # distances), for these classes
            part.keep_figures(data, rows)
        for m in self.other:
            fail[rows] |= ~m.passes(part)


def _rows_of(
    hists: Callable[[int], NDArray[Any]], rows: NDArray[Any]
) -> Callable[[int], NDArray[Any]]:
    """The histograms of the classes ``rows``, each taken once when first read."""
    taken: dict[int, NDArray[Any]] = {}

    def rows_of(j: int) -> NDArray[Any]:
        if j not in taken:
            taken[j] = hists(j)[rows]
        return taken[j]

    return rows_of


def _least_suppressed(
    mono: Sequence[PrivacyModel], data: ClassData, fail: NDArray[Any], k: int
) -> NDArray[Any] | None:
    """Per class, the most records that any of the monotonic models proves every
    specialization must suppress in it, at least those of the classes ``fail`` marks (failing
    them, or whose node fails already); None when none of them says more than which classes
    fail."""
    least = None
    for m in mono:
        got = m.least_suppressed(data, fail, k)
        if got is not None:
            least = np.maximum(np.where(fail, data.sizes, 0) if least is None else least, got)
    if least is not None and k > 1:
        # the records kept of a class are those of its parts that pass, k or more each (k
        # of k-anonymity): a class whose bound keeps fewer than k is suppressed whole. L' = n
        # where L > n - k is a bound too, and adds up over merges: with A suppressed whole,
        # L(A + B) <= n_A + L(B) <= n_A + n_B - k unless B is too
        least = np.where(least > data.sizes - k, data.sizes, least)
    return least


def _sizes_only(model: PrivacyModel) -> bool:
    """Whether the model reads nothing but the class sizes (k-anonymity, estimated k-map)."""
    return getattr(model, "sensitive", None) is None and model.population is None


def _lex_less(
    keys: NDArray[Any], ref: NDArray[Any], index: NDArray[Any], ref_index: int
) -> NDArray[Any]:
    """Row-wise ``(keys[i], index[i]) < (ref, ref_index)`` in lexicographic order: equal keys
    are ordered by ``index``, the node's place in the tie order (see ``_Search.tie``)."""
    if keys.shape[1] == 1:  # one number a key (every aggregate but rank): no running masks
        column, value = keys[:, 0], ref[0]
        less = column < value
        undecided = ~(less | (column > value))
        return np.asarray(less | (undecided & (index < ref_index)))
    result = np.zeros(len(keys), dtype=bool)
    undecided = np.ones(len(keys), dtype=bool)
    for col in range(keys.shape[1]):
        less, greater = keys[:, col] < ref[col], keys[:, col] > ref[col]
        result |= undecided & less
        undecided &= ~(less | greater)
    return result | (undecided & (index < ref_index))


def validate_search(
    rows: int,
    quasi_identifiers: Sequence[str],
    hierarchies: Mapping[str, Hierarchy],
    models: Sequence[PrivacyModel],
    suppression: float,
) -> None:
    if not 0 <= suppression < 1:
        raise ParameterError(
            f"the suppression limit is a fraction of rows in [0, 1), got {suppression}"
        )
    for m in models:
        if isinstance(m, KAnonymity) and m.k > rows:
            raise ParameterError(f"k={m.k} is larger than the table ({rows} rows)")
        sa = getattr(m, "sensitive", None)
        if sa is not None and sa in quasi_identifiers:
            raise ParameterError(f"{sa!r} cannot be both a quasi-identifier and sensitive")
    for q in quasi_identifiers:
        if q in hierarchies and not isinstance(hierarchies[q], Hierarchy):
            raise ParameterError(f"the hierarchy for {q!r} is not a Hierarchy")


def optimal_generalization(
    df: pd.DataFrame,
    *,
    quasi_identifiers: Sequence[str],
    hierarchies: Mapping[str, Hierarchy],
    models: Sequence[Any] = (),
    k: int | None = None,
    suppression: float = 0.0,
    metric: str = "loss",
    aggregate: str | None = None,
    max_nodes: int | None = None,
    time_limit: float | None = None,
    table: EncodedTable | None = None,
    levels: Mapping[str, int] | None = None,
    alternatives: int = 0,
) -> SearchResult:
    """Find the full-domain generalization of least loss meeting every model.

    ``models`` are instances from :mod:`anonweb.core.models.criteria`; ``k`` is a shortcut for
    ``KAnonymity(k)``. ``metric`` and ``aggregate`` name the objective (ARX's default, Loss
    aggregated by the geometric mean, when left out; see :mod:`anonweb.core.search.metrics`).
    Among nodes of equal score, the one with the lowest sum of levels wins (ARX's rule), then
    the lowest levels, first QI first, whatever the order nodes were checked in.
    ``max_nodes`` / ``time_limit`` bound the exhaustive search (then a heuristic, reported in
    ``search``). ``table`` reuses an :class:`EncodedTable` of ``df`` built with the same QIs and
    sensitive columns (to search several settings without re-encoding).
    ``levels`` fixes the node (a level per quasi-identifier; missing ones at 0): no search, the
    models decide what is suppressed, and a node they do not accept is refused. With
    ``alternatives`` > 0, up to that many other accepted nodes on the Pareto front of
    information loss against prosecutor risk are reported (:func:`pareto_alternatives`).
    Raises :class:`ParameterError` when no node satisfies the models.
    """
    started = time.perf_counter()
    models, sensitive = _search_models(
        models, k, len(df), list(quasi_identifiers), hierarchies, suppression
    )
    if table is None:
        table = EncodedTable(df, quasi_identifiers, hierarchies, sensitive)
    return _search_table(
        table,
        quasi_identifiers=quasi_identifiers,
        models=models,
        sensitive=sensitive,
        suppression=suppression,
        metric=metric,
        aggregate=aggregate,
        max_nodes=max_nodes,
        time_limit=time_limit,
        levels=levels,
        alternatives=alternatives,
        started=started,
    )


def _search_models(
    models: Sequence[Any],
    k: int | None,
    rows: int,
    qis: list[str],
    hierarchies: Mapping[str, Hierarchy],
    suppression: float,
) -> tuple[list[Any], list[str]]:
    """The search's models (``k`` as k-anonymity), each bound to the table's ``rows`` (a
    model whose check depends on the table's size, k-map), checked; and the sensitive columns
    they read. One preparation for a table and for a histogram."""
    bound = [m.for_table(rows) for m in [*models, *([KAnonymity(int(k))] if k is not None else [])]]
    validate_search(rows, qis, hierarchies, bound, suppression)
    return bound, sorted({m.sensitive for m in bound if getattr(m, "sensitive", None)})


def search_histogram(
    hist: Histogram,
    *,
    hierarchies: Mapping[str, Hierarchy],
    models: Sequence[Any] = (),
    k: int | None = None,
    suppression: float = 0.0,
    metric: str = "loss",
    aggregate: str | None = None,
    max_nodes: int | None = None,
    time_limit: float | None = None,
    levels: Mapping[str, int] | None = None,
    alternatives: int = 0,
) -> SearchResult:
    """:func:`optimal_generalization` of the table a :class:`Histogram` counts, from its cells
    (any engine's). ``row_suppressed`` in the result is then per cell of the histogram."""
    started = time.perf_counter()
    qis = list(hist.quasi_identifiers)
    models, sensitive = _search_models(models, k, hist.rows, qis, hierarchies, suppression)
    unknown = sorted(set(sensitive) - set(hist.sensitive))
    if unknown:
        raise ParameterError(
            f"the histogram does not count the sensitive column(s) {', '.join(unknown)}"
        )
    return _search_table(
        EncodedTable.from_histogram(hist, hierarchies),
        quasi_identifiers=qis,
        models=models,
        sensitive=sensitive,
        suppression=suppression,
        metric=metric,
        aggregate=aggregate,
        max_nodes=max_nodes,
        time_limit=time_limit,
        levels=levels,
        alternatives=alternatives,
        started=started,
    )


def _search_table(
    table: EncodedTable,
    *,
    quasi_identifiers: Sequence[str],
    models: list[PrivacyModel],
    sensitive: Sequence[str],
    suppression: float,
    metric: str,
    aggregate: str | None,
    max_nodes: int | None,
    time_limit: float | None,
    levels: Mapping[str, int] | None,
    alternatives: int,
    started: float,
) -> SearchResult:
    if [q.name for q in table.qis] != list(quasi_identifiers) or not set(sensitive) <= set(
        table.sensitive
    ):
        raise ParameterError(
            "the encoded table was built for other quasi-identifiers or sensitive columns"
        )
    scorer = make_metric(metric, table, aggregate)
    checker = _Checker(table, models, suppression, scorer)
    run = _Search(table, checker, scorer, max_nodes, time_limit, started)
    node, ev, values = run.solve() if levels is None else run.fixed(levels)
    if node is None or ev is None or values is None:
        described = ", ".join(m.describe() for m in models) or "the models"
        raise ParameterError(
            f"no generalization satisfies {described} with at most {checker.max_out} suppressed rows"
        )
    result = _result(table, checker, scorer, models, node, ev, values, run, started)
    if alternatives and levels is None and hasattr(run, "status"):
        front = pareto_alternatives(run, node, alternatives)
        result = dataclasses.replace(result, alternatives=front)
    return result


def _node_figures(run: _Search, node: tuple[int, ...], ev: _Eval) -> dict[str, Any]:
    sizes = ev.ct.sizes if ev.ct is not None else np.zeros(0, dtype=np.int64)
    out = ev.out_classes if ev.out_classes is not None else np.zeros(len(sizes), dtype=bool)
    kept = sizes[~out]
    values = run._values(np.asarray(node), ev)
    k = int(kept.min()) if len(kept) else 0
    return {
        "levels": {q.name: int(lv) for q, lv in zip(run.table.qis, node)},
        "information_loss": run.scorer.summary(values),
        "prosecutor_risk": 1.0 / k if k else 1.0,
        "suppressed": int(sizes[out].sum()),
        "classes": int(len(kept)),
        "k": k,
    }


def pareto_alternatives(
    run: _Search, optimum: tuple[int, ...], limit: int = 60
) -> tuple[dict[str, Any], ...]:
    """Nodes that satisfy the models on the Pareto front of information loss against
    prosecutor risk, the search's optimum marked ``optimal``.

    Candidates are the lowest nodes the monotonic models accept among those the search settled
    (every node above one of them passes those models too, and is coarser), nearest the bottom
    first, coarser accepted nodes spread over the rest, and the optimum; each is checked again by the models, suppression included, and
    scored by the search's metric. ARX's lattice view, reduced to the choices worth making.
    """
    status, nodes = run.status, run.nodes
    passing = np.flatnonzero(status == 1)
    minimal = [int(i) for i in passing if not (status[i - run.strides[nodes[i] > 0]] == 1).any()]
    minimal.sort(key=lambda i: (int(nodes[i].sum()), i))
    opt_index = int(np.dot(np.asarray(optimum, dtype=np.int64), run.strides))
    # and coarser nodes, spread over the passing ones: less detail, lower risk
    spread = passing[np.linspace(0, len(passing) - 1, min(len(passing), 2 * limit)).astype(int)]
    candidates = list(dict.fromkeys([opt_index, *minimal[: 4 * limit], *map(int, spread)]))
    rows = []
    for idx in candidates:
        node = tuple(int(x) for x in nodes[idx])
        ev = run.checker.check(node, run.cache.parent(run.packed[idx]))
        if ev.ok:
            fig = _node_figures(run, node, ev)
            fig["optimal"] = idx == opt_index
            rows.append(fig)
    rows.sort(key=lambda r: (r["information_loss"], r["prosecutor_risk"]))
    front: list[dict[str, Any]] = []
    best_risk = float("inf")
    for r in rows:
        if r["prosecutor_risk"] < best_risk or r["optimal"]:
            front.append(r)
            best_risk = min(best_risk, r["prosecutor_risk"])
    return tuple(front[:limit])


_Found = tuple[tuple[int, ...] | None, "_Eval | None", NDArray[Any] | None]


def _result(
    table: EncodedTable,
    checker: _Checker,
    scorer: Metric,
    models: Sequence[PrivacyModel],
    node: tuple[int, ...],
    ev: _Eval,
    values: NDArray[Any],
    run: _Search,
    started: float,
) -> SearchResult:
    qis = tuple(q.name for q in table.qis)
    # the classes as grouped from the distinct rows, to map suppression back to every record:
    # the node's own check when it grouped them so, else a regrouping, each of whose classes
    # is suppressed when the check's class it is (found by a representative row) was; the
    # models are not asked again (population uniqueness fits its model once per check)
    if not ev.out_classes.any():
        # nothing suppressed: no record needs its class (no regrouping, no pass per record)
        out_classes = ev.out_classes
        out_rows = np.zeros(len(table.row_to_base), dtype=bool)
    else:
        inv = ev.ct.row_classes()
        out_classes = ev.out_classes
        if inv is None:
            inv, n_classes = table.group(node)
            out_classes = np.zeros(n_classes, dtype=bool)
            out_classes[inv.take(ev.ct.rep[ev.out_classes])] = True
        # ``take``: several times cheaper than indexing, over a million records
        out_rows = out_classes.take(inv).take(table.row_to_base)
    kept = ev.ct.sizes[~ev.out_classes]
    per_qi = {q: float(v) for q, v in zip(qis, values)} if scorer.per_qi else {}
    search = {
        "nodes_total": int(run.nodes.shape[0]) if run.algorithm != "greedy" else None,
        "nodes_checked": run.checked,
        "seconds": round(time.perf_counter() - started, 4),
        "optimal": run.optimal,
        "algorithm": run.algorithm,
    }
    if run.note:
        search["note"] = run.note
    return SearchResult(
        quasi_identifiers=qis,
        levels={q: int(lv) for q, lv in zip(qis, node)},
        suppressed=int(
            out_rows.sum() if table.row_weights is None else table.row_weights[out_rows].sum()
        ),
        k=int(kept.min()) if len(kept) else 0,
        classes=int(len(kept)),
        information_loss=scorer.summary(values),
        loss_per_qi=per_qi,
        metric=scorer.name,
        aggregate=scorer.aggregate if scorer.per_qi else None,
        information_loss_measure=scorer.describe(),
        models=tuple(m.describe() for m in models),
        search=search,
        row_suppressed=out_rows,
        table=table,
    )


class _Search:
    def __init__(
        self,
        table: EncodedTable,
        checker: _Checker,
        scorer: Metric,
        max_nodes: int | None,
        time_limit: float | None,
        started: float,
    ) -> None:
        self.table, self.checker, self.scorer = table, checker, scorer
        self.max_nodes, self.time_limit, self.started = max_nodes, time_limit, started
        self.checked = 0
        # nodes checked that passed the monotonic models and failed the others
        self.mono_only = 0
        self.optimal = True
        self.algorithm = "flash-bound"
        self.note = ""
        self.best: tuple[Any, ...] | None = None  # (key, node, eval, values, tie place)
        self.nodes: NDArray[Any] = np.zeros((0, len(table.heights)), dtype=np.int16)

    def solve(self) -> _Found:
        heights = self.table.heights
        size = int(np.prod(heights))
        if size > MAX_LATTICE:
            self.optimal, self.algorithm = False, "greedy"
            self.note = f"the lattice has {size} nodes, more than {MAX_LATTICE}: greedy descent"
            return self._greedy()
        if heights.max() > 127:
            raise ParameterError(
                "a hierarchy has more than 127 levels; the search supports up to 127"
            )
        self.nodes = np.indices(tuple(heights)).reshape(len(heights), -1).T.astype(np.int16)
        self.packed = pack_levels(self.nodes)
        # nodes whose key space surely fits an int64 (a float product, with a margin), which
        # the batched checks need. A level holds no more values than the one below it, so
        # the bottom's space is the largest: when it fits, all do (the one product read)
        cards = self.table.all_cards
        if float(np.prod(cards[self.table.offsets].astype(float))) < 2.0**61:
            self.fits = np.ones(size, dtype=bool)
        else:
            spaces = cards[self.table.offsets + self.nodes].astype(float).prod(axis=1)
            self.fits = spaces < 2.0**61
        self.strides = np.array([int(np.prod(heights[i + 1 :])) for i in range(len(heights))])
        # each node's direct generalizations, one per QI (``size`` where the QI is at its top),
        # a QI at a time (a quarter of the time of one comparison of every level)
        numbers = np.arange(size)
        self.successors = np.empty((size, len(heights)), dtype=np.int64)
        for i, (h, stride) in enumerate(zip(heights.tolist(), self.strides.tolist())):
            self.successors[:, i] = np.where(self.nodes[:, i] < h - 1, numbers + stride, size)
        self.bkey = self.scorer.key(self.scorer.bounds(self.nodes))
        # ties of score go to the lowest sum of levels (as in ARX), then to the lowest levels,
        # first QI first: ``tie`` is each node's place in that order. The sums are small
        # (int16: sorted by a radix sort, a quarter of int64's time)
        sums = self.nodes.sum(axis=1, dtype=np.int16)
        by_tie = np.argsort(sums, kind="stable")
        self.tie = np.empty(size, dtype=np.int64)
        self.tie[by_tie] = numbers
        if self.bkey.shape[1] == 1:
            # equal bounds in tie order: the nodes in tie order, stably sorted by their
            # bounds (what the lexicographic sort below gives, in half its time)
            self.order = by_tie[np.argsort(self.bkey[:, 0].take(by_tie), kind="stable")]
        else:
            self.order = np.lexsort((self.tie, *self.bkey.T[::-1]))  # equal bounds in tie order
        self.rank = np.empty(size, dtype=np.int64)
        self.rank[self.order] = numbers
        # each node's successors in rank order (``size`` last): a path steps to the first of
        # them still a candidate, read off one row instead of ranking them at every step.
        # A node's successors have distinct ranks (only the entries past the top share one,
        # and all name ``size``), so their sorted ranks name them through ``order``
        ranked = np.append(self.rank, size).take(self.successors)
        self.successors = np.append(self.order, size).take(np.sort(ranked, axis=1))
        self.status = np.zeros(size, dtype=np.int8)
        self.grid = self.status.reshape(tuple(heights))  # the same array, an axis per QI
        self._open_ends = (None,) * len(heights)  # slices from a level to the top, per QI
        self.done = np.zeros(size, dtype=bool)
        self.alive = np.ones(size, dtype=bool)
        self.cache = ClassTableCache(len(heights))
        # paths start from the lowest unsettled node, cheapest bound first among equals
        # (the nodes in rank order, stably sorted by their sums of levels: a quarter of the
        # time of a lexicographic sort on both)
        self.start_order = self.order[np.argsort(sums[self.order], kind="stable")]
        try:
            if self._bottom_is_optimal():
                self.alive[:] = False  # nothing can beat it: both phases end at once
            self._tag_phase()
            self._bound_phase()
        except _Budget:
            self.optimal, self.algorithm = False, "flash-bound, then greedy"
            self.note = "node or time budget reached before the search was exhaustive"
            if self.best is None:
                return self._greedy()
        if self.best is None:
            return None, None, None
        _, node, ev, values, _ = self.best
        return node, ev, values

    def _bottom_is_optimal(self) -> bool:
        """Check the bottom node first; True when it is the optimum.

        The bottom node accepted with nothing suppressed (by any model: the classes a
        table-wide model suppresses count, ``out_classes`` holds them) is optimal under every
        metric, and wins every tie:

        * per-QI metrics (Loss, entropy, precision, height): a node's value on each QI is at
          least its bound, the value with nothing suppressed (a suppressed record costs the
          root's share, a level's code covers at least the leaves of the codes below it);
          the bounds grow with the levels, so the bottom's values, here its bounds, are the
          least on every QI, and every aggregate (geometric, arithmetic, sum, max, rank)
          grows with each of its values;
        * discernibility: a class of any node is a union of bottom classes, and
          (a + b)^2 >= a^2 + b^2; a suppressed record costs n, at least the size of its class;
        * AECS (n over the number of groups, the suppressed records one group): any node
          has at most as many classes as the bottom, and its groups are at most its classes;
        * ties go to the lowest sum of levels: the bottom's, 0, is the only one.

        Checked first, it ends the search at once on a table that needs no generalization (a
        large sample against k-map or population uniqueness: 64 checks before it was reached
        on Adult x 33). Otherwise its outcome is left out of the search, which runs as if it
        had not been checked (recorded, a bottom that passes the monotonic models settles them
        on every node, and the tagging phase's single path that finds a first solution early
        under a table-wide model gives way to batches of the bound phase: average risk on
        Adult checked 192 nodes instead of 151): one check wasted, about 0.4 ms on Adult's
        12,458 distinct rows, 6 ms where it fits population uniqueness's model.

        It is not tried when a distinct row of the quasi-identifiers holds fewer records than
        k, or only one (a sample unique: what every model but k = 1 alone guards against),
        which is where the bottom was never the answer on Adult's runs. This only decides
        whether the shortcut is tried: the search's outcome is the same either way.
        """
        if int(self.table.qi_weights.min()) < max(self.checker.k, 2):
            return False
        self._budget()
        ev = self.checker.check(self.nodes[0])  # node 0: every QI at level 0
        if ev.ok and not ev.out_classes.any():
            self._record(0, ev)
            return True
        self.checked += 1
        return False

    def fixed(self, levels: Mapping[str, int]) -> _Found:
        """The one node ``levels`` names, checked against the models (no search)."""
        qis = [q.name for q in self.table.qis]
        unknown = sorted(set(levels) - set(qis))
        if unknown:
            raise ParameterError(
                f"levels name columns that are not quasi-identifiers: {', '.join(unknown)}"
            )
        node = []
        for q, height in zip(qis, self.table.heights):
            lv = levels.get(q, 0)
            if isinstance(lv, bool) or not isinstance(lv, int | np.integer) or not 0 <= lv < height:
                raise ParameterError(
                    f"level {lv!r} for {q!r} is out of range (its hierarchy has levels "
                    f"0..{height - 1})"
                )
            node.append(int(lv))
        self.algorithm, self.note = "fixed levels", "levels chosen by hand: no search"
        ev = self.checker.check(node)
        self.checked = 1
        if not ev.ok:
            return None, None, None
        return tuple(node), ev, self._values(np.asarray(node), ev)

    def _budget(self) -> None:
        if self.max_nodes is not None and self.checked >= self.max_nodes:
            raise _Budget
        if self.time_limit is not None and time.perf_counter() - self.started > self.time_limit:
            raise _Budget

    def _check_batch(
        self,
        chunk: list[int],
        parents: list[ClassTable | None],
        few_histograms: bool = False,
        settled: bool = False,
    ) -> dict[int, _Eval]:
        """Check together the nodes of ``chunk`` that have a finer node's classes cached
        (``parents``, one per node, looked up in the cache as it is)."""
        if len(chunk) < 2:
            return {}  # nothing to batch: the caller checks the node
        batched = [
            j for j, (i, p) in enumerate(zip(chunk, parents)) if p is not None and self.fits[i]
        ]
        if len(batched) < 2:
            return {}
        out: dict[int, _Eval] = {}
        # a batch's arrays run over the classes of all its nodes' finer nodes: batches of at
        # most BATCH_CLASSES of them keep that memory fixed whatever the table (each node is
        # checked on its own classes, so how nodes are batched changes no result)
        part: list[int] = []
        held = 0
        for pos, j in enumerate(batched):
            part.append(j)
            held += len(parents[j])  # type: ignore[arg-type]
            last = pos == len(batched) - 1
            if last or held + len(parents[batched[pos + 1]]) > BATCH_CLASSES:  # type: ignore[arg-type]
                if len(part) == 1:
                    ev = self.checker.check(self.nodes[chunk[j]], parents[j], settled)
                    out[chunk[j]] = ev
                elif few_histograms:
                    got = self.checker.check_few_histograms(
                        self.nodes[[chunk[i] for i in part]],
                        [p for i in part if (p := parents[i]) is not None],
                    )
                else:
                    got = self.checker.check_many(
                        self.nodes[[chunk[i] for i in part]],
                        [p for i in part if (p := parents[i]) is not None],
                        settled,
                    )
                if len(part) > 1:
                    out.update({chunk[i]: ev for i, ev in zip(part, got)})
                part, held = [], 0
        return out

    def _evaluate_all(self, chunk: list[int]) -> None:
        """Check several nodes, in one batch where they can be, and record every one.

        What a check settles on the monotonic models is a fact about the node, and a solution
        is kept by the order-independent rule of :meth:`_offer`: the order of checks changes
        how many nodes are checked, never the result."""
        self._budget()
        if self.max_nodes is not None:
            chunk = chunk[: self.max_nodes - self.checked]
        parents = self.cache.parents(self.packed[chunk])
        evals = self._check_batch(chunk, parents, few_histograms=True)
        finer = self._finer(chunk, evals)
        for pos, (idx, parent) in enumerate(zip(chunk, parents)):
            ev = evals.get(idx)
            if ev is None:
                parent = self._parent(idx, parent, finer, pos)
                ev = self.checker.check(self.nodes[idx], parent)
            self._record(idx, ev)

    def _finer(self, chunk: list[int], evals: Mapping[int, _Eval]) -> NDArray[Any] | None:
        """Which nodes of ``chunk`` are finer than which (``[a, b]``: node a's levels are all
        at most node b's), compared once for the chunk; None when every node was checked in
        the batch (nothing is then looked up node by node)."""
        if len(chunk) < 2 or all(idx in evals for idx in chunk):
            return None
        packed = self.packed[chunk]
        return np.asarray(packed_leq(packed[:, None], packed[None, :]))

    def _parent(
        self, idx: int, looked_up: ClassTable | None, finer: NDArray[Any] | None, pos: int
    ) -> ClassTable | None:
        """The finer node's classes to roll node ``idx`` up from: those ``looked_up`` in the
        cache before the nodes ahead of it in its chunk (at ``pos``) were recorded, unless
        one of these is finer (``finer``, see :meth:`_finer`: one look at the whole cache
        per node costs about as much as a small node's grouping)."""
        if pos and finer is not None and finer[:pos, pos].any():
            return self.cache.parent(self.packed[idx])
        return looked_up

    def _evaluate_many(self, chunk: list[int]) -> bool:
        """Check several nodes in one batch, then record them in order, as checking them one
        at a time would; False once a node is no longer alive (a solution found earlier in the
        batch beats every later node)."""
        # the bound phase checks only nodes that pass the monotonic models
        parents = self.cache.parents(self.packed[chunk])
        evals = self._check_batch(chunk, parents, settled=True)
        finer = self._finer(chunk, evals)
        for pos, idx in enumerate(chunk):
            if not self.alive[idx]:
                self.checked += sum(1 for i in chunk[pos:] if i in evals)  # checked, not needed
                return False
            ev = evals.get(idx)
            if ev is None:
                parent = self._parent(idx, parents[pos], finer, pos)
                ev = self.checker.check(self.nodes[idx], parent, settled=True)
            self._record(idx, ev)
        return True

    def _record(self, idx: int, ev: _Eval) -> None:
        self.cache.add(self.packed[idx], ev.ct)
        self.checked += 1
        self.done[idx] = True
        # the generalizations of a node, and its specializations, are boxes of the lattice
        # laid out as an array with an axis per QI: tagged through views, in place
        levels = self.nodes[idx].tolist()
        if ev.mono_ok:
            self.mono_only += not ev.ok
            up = self.grid[tuple(map(slice, levels, self._open_ends))]
            up[up == 0] = 1
        else:
            self.grid[tuple(map(slice, [lv + 1 for lv in levels]))] = -1
        # a node out of the running has a bound, and so a score, no better than the best's
        # (ties included): offering it could not replace the best (on Adult, k=5, most of
        # the nodes found to pass are checked after a better one was found)
        if ev.ok and self.alive[idx]:
            self._offer(idx, ev)

    def _offer(self, idx: int, ev: _Eval) -> None:
        values = self._values(self.nodes[idx], ev)
        key = self.scorer.key(values[None, :])[0]
        tie = int(self.tie[idx])
        if self.best is None or (tuple(key), tie) < (tuple(self.best[0]), self.best[4]):
            self.best = (key, tuple(int(x) for x in self.nodes[idx]), ev, values, tie)
            self.alive &= _lex_less(self.bkey, key, self.tie, tie)

    def _values(self, node: Sequence[int] | NDArray[Any], ev: _Eval) -> NDArray[Any]:
        if not self.scorer.per_qi:
            return self.scorer.from_classes(ev.ct.sizes, ev.out_classes)
        out = ev.out_classes
        return self.scorer.actual(node, ev.ct.rep[out], ev.ct.sizes[out])

    def _tag_phase(self) -> None:
        """Settle the monotonic models on every node that could still beat the best.

        Binary searches run along up to ``TAG_PATHS`` disjoint paths at once, their midpoints
        checked as one batch (see :meth:`_evaluate_all`), unless table-wide models make each
        check costly.

        Without suppression, a path may run on past the nodes still in the running, through
        unsettled nodes out of it (see :meth:`_reaching_out`): a node found to fail there
        settles every node below it, and, higher up, is more often rolled up from a node
        already grouped. Such a search stops once the nodes left on its path are all out of
        the running."""
        size = len(self.nodes)
        place = np.empty(size, dtype=np.int64)  # each node's place in ``start_order``
        place[self.start_order] = np.arange(size)
        # the nodes out of the running that checks found to fail and to pass
        outside = [0, 0]
        while True:
            # one more entry, never a candidate: where ``successors`` points past the top
            cand = np.append((self.status == 0) & self.alive, False)
            if not cand.any():
                return
            searches: list[tuple[list[int], int, int, int, bool]] = []
            # a table-wide model (population uniqueness fits a model per node) makes each check
            # costly, and with suppression it is decided at every check: one search at a time
            # reaches a solution, which rules out the rest, after fewer checks (Adult, Pitman
            # at 2%: 4 nodes against 55)
            single = self.checker.max_out > 0 and self.checker.table_wide
            wide = self.mono_only >= WIDEN_AFTER
            paths = 1 if single else WIDE_PATHS if wide else TAG_PATHS
            reaching = self._reaching_out(outside, paths)
            unsettled = np.append(self.status == 0, False) if reaching else cand
            waiting = cand[self.start_order]
            first = 0
            while len(searches) < paths:
                # nodes only leave ``waiting``: the next start is at or after the last one
                first += int(np.argmax(waiting[first:]))
                if not waiting[first]:
                    break
                out = len(searches) < reaching
                path = self._path(int(self.start_order[first]), unsettled if out else cand)
                cand[path] = False
                unsettled[path] = False
                waiting[place[path]] = False
                searches.append((path, 0, len(path) - 1, GALLOP, out))
            while searches:
                # up the path while it fails, in growing steps (see GALLOP), then bisecting
                at = [
                    min(lo + step - 1, hi) if step else (lo + hi) // 2
                    for _, lo, hi, step, _ in searches
                ]
                mids = [path[a] for (path, *_), a in zip(searches, at)]
                chunk = list(dict.fromkeys(i for i in mids if self.status[i] == 0))
                if chunk:  # (every midpoint may have been settled by the last round's checks)
                    beyond = [i for i in chunk if not self.alive[i]]
                    self._evaluate_all(chunk)
                    failed = int(np.count_nonzero(self.status[beyond] == -1))
                    outside[0] += failed
                    outside[1] += len(beyond) - failed
                following = []
                for (path, lo, hi, step, out), mid, a in zip(searches, mids, at):
                    if self.status[mid] == 1:
                        hi, step = a - 1, 0
                    else:
                        lo, step = a + 1, 2 * step
                    if lo <= hi and (not out or self.alive[path[lo]]):
                        following.append((path, lo, hi, step, out))
                searches = following

    def _reaching_out(self, outside: list[int], paths: int) -> int:
        """How many of a round's paths run on past the nodes in the running (see
        :meth:`_tag_phase`): none with suppression (what a node suppresses decides it there,
        and its paths are left as they were); all while more of the nodes out of the
        running checked so far failed than passed, a trial of ``REACH_TRIAL`` while as many
        did, none otherwise. Measured on Adult: k=2 without suppression checks 134 nodes
        instead of 152, 18 of them grouped from the distinct rows instead of 61, in two
        thirds of the time; k=5, where the nodes just out of the running pass, one more."""
        if self.checker.max_out > 0:
            return 0
        failed, passed = outside
        if failed > passed:
            return paths
        return min(REACH_TRIAL, paths) if failed == passed else 0

    def _path(self, start: int, cand: NDArray[Any]) -> list[int]:
        """From ``start``, up through the candidate successor of least rank each time."""
        path = [int(start)]
        successors = self.successors
        while True:
            ups = successors[path[-1]]
            open_ups = cand.take(ups)
            first = int(open_ups.argmax())
            if not open_ups[first]:
                return path
            path.append(int(ups[first]))

    def _bound_phase(self) -> None:
        """Score the nodes passing the monotonic models, cheapest bound first."""
        exact = self.checker.only_mono and self.checker.max_out == 0
        if exact and self.scorer.per_qi:
            # the first node in bound order that passes and is unchecked, if no node before it
            # is out of the running (read off arrays, not node by node)
            alive = self.alive[self.order]
            head = self.order[: len(alive) if alive.all() else int(np.argmin(alive))]
            ready = np.flatnonzero((self.status[head] == 1) & ~self.done[head])
            if len(ready):
                idx = int(head[ready[0]])
                # nothing is suppressed, so the bound is the loss; grouping only for the report
                ev = self.checker.check(self.nodes[idx], self.cache.parent(self.packed[idx]))
                self.checked += 1
                self.done[idx] = True
                self._offer(idx, ev)
            return
        # Nodes are checked in batches that grow while no solution stops the scan; the
        # results are recorded in order, so the outcome is that of checking one at a time.
        pos, size = 0, 1
        while True:
            self._budget()
            if self.max_nodes is not None:
                size = min(size, self.max_nodes - self.checked)
            chunk: list[int] = []
            while pos < len(self.order) and len(chunk) < size:
                idx = int(self.order[pos])
                if not self.alive[idx]:
                    break  # bounds only grow along the order: nothing later can win
                pos += 1
                if self.status[idx] == 1 and not self.done[idx]:
                    chunk.append(idx)
            if not chunk or not self._evaluate_many(chunk):
                return
            size = min(2 * size, 64)

    def _greedy(self) -> _Found:
        """From the top node, step down while some predecessor still satisfies the models."""
        heights = self.table.heights
        node = np.array(heights - 1)
        ev = self.checker.check(node)
        self.checked += 1
        if not ev.ok:
            return None, None, None
        values = self._values(node, ev)
        while True:
            best = None
            for i in range(len(node)):
                if node[i] == 0:
                    continue
                cand = node.copy()
                cand[i] -= 1
                cev = self.checker.check(cand)
                self.checked += 1
                if cev.ok:
                    cval = self._values(cand, cev)
                    ckey = tuple(self.scorer.key(cval[None, :])[0])
                    if best is None or ckey < best[0]:
                        best = (ckey, cand, cev, cval)
            if best is None:
                return tuple(int(x) for x in node), ev, values
            _, node, ev, values = best


class _Budget(Exception):
    """The node or time budget of the search ran out."""
