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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from anonweb.core.dp.charts import needs_table, statistic_rows
from anonweb.core.dp.mechanisms import DPQuery
from anonweb.core.dp.statistic import Statistic, find_statistic, get_statistic
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
            plan = None
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
        elif (statistic := find_statistic(kind)) is not None and "noise" in entry:
            exact = None
            if plan is not None and source is not None and number == 1 and plan.steps:
                # the first step reads the source itself
                query = DPQuery.from_params(plan.steps[0].params)
                truth = get_statistic(query.kind).truth
                exact = truth(query, source) if truth is not None else None
            out += _central(statistic, entry, statistic_rows(table, number), exact)
    return out


def _central(
    statistic: Statistic,
    entry: Mapping[str, Any],
    part: pd.DataFrame,
    exact: Mapping[str, tuple[float, float]] | None,
) -> list[DPStatistic]:
    """The statistic's released figures (its declaration's ``figures``), each with its exact
    value on the source when that is known."""
    kind = str(entry["kind"])
    number = int(entry.get("step", 0))
    columns = tuple(str(c) for c in entry.get("columns") or [])

    def stat(
        label: str,
        value: Any,
        half: Any,
        interval: str,
        bounds: tuple[float, float] | None = None,
    ) -> DPStatistic:
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
            bounds=bounds,
        )

    if part.empty or statistic.figures is None:
        return []
    figures: list[DPStatistic] = statistic.figures(entry, part, stat)
    return figures


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
