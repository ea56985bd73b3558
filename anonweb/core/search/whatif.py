"""What-if: the risk and the information loss of one lattice node, chosen by hand.

A privacy officer picks a generalization level per quasi-identifier and a suppression limit and
sees at once what the release would look like: k, classes, records suppressed, l, t, δ,
prosecutor risk and information loss. Nothing here is a second definition: the classes come from
the search's :class:`~anonweb.core.search.lattice.EncodedTable` (grouping the distinct rows,
never the records), the figures from the risk profile's builders
(:mod:`anonweb.core.assessment.profile`), the privacy models' own ``passes`` and the search's
metrics (:mod:`anonweb.core.search.metrics`). :class:`WhatIfTable` encodes the table once; each
:meth:`WhatIfTable.evaluate` then touches only the distinct rows, so a caller that keeps the
object answers in well under a second for a million records.

Suppression follows the search's rule: at most ``floor(suppression * n)`` records, whole classes,
``*`` in every quasi-identifier (they stay in the file). Which classes go:

* with privacy models (``k`` or ``models``), the classes that fail one of them, if they fit the
  limit (``satisfied``); when they do not, nothing is suppressed and ``required`` says how many
  records the models would need;
* without, the limit is spent on the smallest classes: the largest k whose smaller classes fit
  the limit is reached, and the classes below it are suppressed.

The figures describe the records kept (suppressed records form no class), as the search's k and
the release's model checks do; t-closeness and δ-disclosure compare with the whole table's
distribution, as ARX does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.assessment.charts import homogeneity_histogram
from anonweb.core.assessment.profile import RiskProfile, SensitiveProfile, model_figures
from anonweb.core.engine.histogram import Histogram
from anonweb.core.errors import ParameterError
from anonweb.core.io.hierarchy import Hierarchy
from anonweb.core.models.base import PrivacyModel
from anonweb.core.models.closeness import t_closeness_of
from anonweb.core.models.counts import ClassData, SensitiveCounts, SensitiveDomain
from anonweb.core.models.diversity import DEFAULT_C, l_diversity_of
from anonweb.core.models.k_anonymity import KAnonymity, k_anonymity_of
from anonweb.core.risk.classes import EquivalenceClasses, json_value
from anonweb.core.risk.population import population_uniqueness
from anonweb.core.risk.reidentification import DEFAULT_THRESHOLDS, risk_of
from anonweb.core.search.lattice import EncodedTable
from anonweb.core.search.metrics import make_metric


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
        if isinstance(df, Histogram):
            # any engine's histogram: its memory is the cells', never the rows'
            if list(df.quasi_identifiers) != list(quasi_identifiers) or list(df.sensitive) != list(
                sensitive
            ):
                raise ParameterError(
                    "the histogram was counted over other quasi-identifiers or sensitive columns"
                )
            self.table = EncodedTable.from_histogram(df, hierarchies)
            columns = {s: pd.Series(df.labels[s], name=s) for s in sensitive}
        else:
            self.table = EncodedTable(df, list(quasi_identifiers), hierarchies, sensitive)
            columns = {s: df[s] for s in sensitive}
        del self.table.row_to_base  # only the distinct rows are needed from here on
        # a what-if groups each node from the distinct rows' codes (``group``): what the search
        # keeps besides, to roll nodes up and to group from the distinct QI rows alone, would
        # be most of the table's memory (10^8 records: 29.7 M distinct rows)
        t = self.table
        del t.row_codes, t.qi_codes, t.qi_weights, t.qi_first, t.base_to_qi, t.qi_rows
        self.quasi_identifiers = tuple(quasi_identifiers)
        self.sensitive = tuple(sensitive)
        self.metric = make_metric(metric, self.table, aggregate)
        self.population_size = population_size
        self.thresholds = tuple(thresholds)
        self.recursive_c = recursive_c
        self.disclosing_limit = disclosing_limit
        self.sa_hierarchies = {s: hierarchies.get(s) for s in sensitive}
        # an empty column of the same type: what picks the t-closeness distance
        self.sa_types = {s: columns[s].iloc[:0] for s in sensitive}
        self.domains = [
            SensitiveDomain(s, self.table.sa_values[j], self.table.sa_global(j).astype(np.int64))
            for j, s in enumerate(sensitive)
        ]

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
        inv, n_classes = t.group(node)
        sizes = np.bincount(inv, weights=t.weights, minlength=n_classes).astype(np.int64)
        data = ClassData(sizes, self._counts(inv, n_classes, None))
        if models:
            fail = np.zeros(n_classes, dtype=bool)
            for m in models:
                if m.per_class:
                    fail |= ~m.passes(data)
            required = int(sizes[fail].sum())
            satisfied = required <= max_out
            out = fail if satisfied else np.zeros(n_classes, dtype=bool)
            if satisfied:
                kept_data = data.select(~out)
                satisfied = all(m.satisfied(kept_data) for m in models if not m.per_class)
        else:
            out = _smallest_within(sizes, max_out)
            required, satisfied = int(sizes[out].sum()), None
        rep = np.empty(n_classes, dtype=np.int64)
        rep[inv] = np.arange(len(inv))
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
            profile=self._profile(sizes, inv, kept, node, rep) if kept.any() else None,
        )

    def _counts(
        self, inv: NDArray[Any], n_classes: int, rows: NDArray[Any] | None
    ) -> Callable[[str], SensitiveCounts]:
        """Sensitive value counts per class, sparse, from the distinct rows (``rows``: only
        those), each weighted by the records it stands for."""
        index = {s: j for j, s in enumerate(self.sensitive)}
        t = self.table

        def counts(name: str) -> SensitiveCounts:
            j = index[name]
            values = t.sa_codes[j] if rows is None else t.sa_codes[j][rows]
            weights = t.weights if rows is None else t.weights[rows]
            return SensitiveCounts.from_codes(
                self.domains[j], inv, values, n_classes, weights=weights.astype(float)
            )

        return counts

    def _profile(
        self,
        all_sizes: NDArray[Any],
        inv: NDArray[Any],
        kept: NDArray[Any],
        node: list[int],
        rep: NDArray[Any],
    ) -> RiskProfile:
        sizes = all_sizes[kept]
        kept_rep = rep[kept]
        rows = np.flatnonzero(kept[inv])  # distinct rows of kept classes
        renumber = np.cumsum(kept) - 1
        counts = self._counts(renumber[inv[rows]], len(sizes), rows)
        # one code per kept class, as the risk profile of a histogram has them: the risk
        # builders count records from the class sizes (a code per record would make the
        # what-if's memory grow with the rows)
        codes = np.arange(len(sizes), dtype=np.int64)
        ec = EquivalenceClasses(self.quasi_identifiers, codes, sizes)
        profiles = {}
        for name in self.sensitive:
            sc = counts(name)
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
                label = q.labels[lv][t.full_codes[i][lv][rep[j]]]
                qis[q.name] = json_value(label)
            out.append(
                {
                    "quasi_identifiers": qis,
                    "size": int(sc.sizes[j]),
                    "value": json_value(sc.values[v]),
                }
            )
        return tuple(out)


def _smallest_within(sizes: NDArray[Any], max_out: int) -> NDArray[Any]:
    """Classes to suppress so that the smallest kept class is as large as the limit allows:
    every class below the largest k whose smaller classes hold at most ``max_out`` records."""
    if max_out <= 0 or len(sizes) == 0:
        return np.zeros(len(sizes), dtype=bool)
    counts = np.bincount(sizes)
    present = np.flatnonzero(counts)
    below = np.cumsum(present * counts[present])  # records in classes of size <= present[i]
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
