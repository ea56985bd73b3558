"""Running a release plan: its steps in order on a copy of the table, and the report."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from anonweb.core.assessment.profile import assess_risk
from anonweb.core.errors import CoreError, ParameterError
from anonweb.core.io.hierarchy_builders import resolve_hierarchies
from anonweb.core.models.counts import class_data
from anonweb.core.release.plan import plan_costs, plan_total_cost, validate_plan
from anonweb.core.release.steps import STATISTIC_COLUMN, Plan, Step, StepContext
from anonweb.core.risk.classes import suppressed_records
from anonweb.core.transforms.local_suppression import na_matching_counts


@dataclass(frozen=True)
class PlanReport:
    steps: tuple[dict[str, Any], ...]
    risk_before: dict[str, Any] | None
    risk_after: dict[str, Any] | None
    privacy_cost: dict[str, float]
    rows_in: int
    rows_out: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": [dict(s) for s in self.steps],
            "risk_before": self.risk_before,
            "risk_after": self.risk_after,
            "privacy_cost": dict(self.privacy_cost),
            "rows_in": self.rows_in,
            "rows_out": self.rows_out,
        }


def _step_progress(
    progress: Callable[[float, str], None], step: int, steps: int
) -> Callable[[float, str], None]:
    """A step's own fraction as a fraction of the whole plan."""

    def report(fraction: float, what: str) -> None:
        progress((step - 1 + min(max(fraction, 0.0), 1.0)) / steps, f"step {step}: {what}")

    return report


def apply_plan(
    df: pd.DataFrame,
    plan: Plan,
    *,
    rng: np.random.Generator,
    secrets: Mapping[str, bytes] | None = None,
    measure_risk: bool = True,
    before_spending: Callable[[], None] | None = None,
    progress: Callable[[float, str], None] | None = None,
    population: Any = None,
) -> tuple[pd.DataFrame, PlanReport]:
    """Run the plan's steps in order on a copy of ``df``; returns the result and a report.

    ``before_spending`` is called once, just before the first step with a privacy cost reads the
    data (a budget ledger marks its reservation spent there; raising stops the plan). Several DP
    measurements in a row each read the table the steps before them produced; their outputs are
    stacked, each row labelled with its ``statistic``. ``population`` is the population
    table (:class:`~anonweb.core.models.population_table.PopulationTable`) the population-based
    models of the search read."""
    if not isinstance(rng, np.random.Generator):
        raise ParameterError("rng must be a numpy.random.Generator")
    specs = validate_plan(plan, [str(c) for c in df.columns])
    costs = {c.step: c for c in plan_costs(plan, specs)}
    ctx = StepContext(
        rng=rng,
        secrets=dict(secrets or {}),
        quasi_identifiers=tuple(plan.quasi_identifiers),
        sensitive=tuple(plan.sensitive),
        hierarchies=resolve_hierarchies(plan.hierarchies, df),
        population=population,
    )
    before = _risk(df, ctx) if measure_risk else None
    frame, reports = df, []
    measured: list[tuple[str, pd.DataFrame]] = []
    data: pd.DataFrame | None = None  # what the measurements read
    for i, (step, spec) in enumerate(zip(plan.steps, specs), 1):
        cost = costs.get(i)
        if cost and before_spending is not None:
            before_spending()
            before_spending = None
        ctx.distance = cost.distance if cost else 1
        if progress is not None:
            ctx.progress = _step_progress(progress, i, len(plan.steps))
        started = time.perf_counter()
        if spec.measurement and data is None:
            data = frame
        try:
            outcome = spec.func(data if spec.measurement else frame, step.params, ctx)
        except CoreError as exc:
            raise type(exc)(f"step {i} ({step.kind}): {exc}") from None
        if spec.measurement:
            measured.append((_statistic_label(i, step, outcome.report), outcome.frame))
            frame = _stack(measured)
        else:
            frame = one_type_per_column(outcome.frame)
        entry = {"step": i, "kind": step.kind, **outcome.report}
        entry["seconds"] = round(time.perf_counter() - started, 4)
        if cost:
            entry["privacy_cost"] = dict(cost.cost)
            if cost.distance != 1:
                entry["input_distance"] = cost.distance
        reports.append(entry)
    # The risk of a DP output's rows (counts, synthetic records) is not a re-identification risk.
    after = _risk(frame, ctx, after=True) if measure_risk and not measured else None
    total = plan_total_cost(list(costs.values()))
    report = PlanReport(tuple(reports), before, after, total, len(df), len(frame))
    return frame, report


def one_type_per_column(df: pd.DataFrame) -> pd.DataFrame:
    """The table with every column holding values of one type.

    A step that writes text into part of a numeric column (``*`` for a suppressed cell, a
    codebook's label, an interval) leaves numbers and text side by side; such a column becomes
    text throughout, each number written as it reads (``47677``, not ``47677.0``), so that the
    table can be stored (Parquet refuses mixed columns) and equal cells look equal. Missing
    values stay missing; other columns are returned as they are."""
    mixed = [
        c
        for c in df.columns
        if df[c].dtype == object
        and pd.api.types.infer_dtype(df[c], skipna=True) in ("mixed", "mixed-integer")
    ]
    if not mixed:
        return df
    out = df.copy()
    for c in mixed:
        out[c] = df[c].map(as_text, na_action="ignore").astype(object)
    return out


def as_text(value: Any) -> str:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _statistic_label(i: int, step: Step, report: Mapping[str, Any]) -> str:
    what = report.get("kind") or step.kind
    columns = report.get("columns") or step.params.get("columns") or []
    if isinstance(columns, str):
        columns = [columns]
    return f"{i}: {what}" + (f" of {', '.join(map(str, columns))}" if columns else "")


def _stack(measured: list[tuple[str, pd.DataFrame]]) -> pd.DataFrame:
    """One measurement: its table. Several: their tables one under the other, labelled."""
    if len(measured) == 1:
        return measured[0][1]
    parts = [t.assign(**{STATISTIC_COLUMN: label}) for label, t in measured]
    stacked = pd.concat(parts, ignore_index=True, sort=False)
    return stacked[[STATISTIC_COLUMN] + [c for c in stacked.columns if c != STATISTIC_COLUMN]]


def population_after(models: Sequence[Any], released: int) -> tuple[list[Any], int | None]:
    """The search's population-based models, measured again on the released table, and the
    population size its uniqueness estimates take (None for a population smaller than the
    ``released`` records: no estimate to give)."""
    # models judged against a population table were checked on the released table by the
    # search step, which knows the levels to count the population at: their checks are kept
    population = [
        m
        for m in models
        if hasattr(m, "population_size") and getattr(m, "population", None) is None
    ]
    size = population[0].population_size if population else None
    if size is not None and size < released:
        size = None
    return population, size


def _risk(df: pd.DataFrame, ctx: StepContext, *, after: bool = False) -> dict[str, Any] | None:
    """Risk profile from :func:`anonweb.core.assessment.profile.assess_risk`, when QIs are declared.

    After the steps, suppressed records (``*`` in every quasi-identifier) are left out of the
    classes, as the search leaves them out (ARX's outlier handling): k after is the search's k,
    and ``suppressed`` says how many records were left out."""
    qis = [q for q in ctx.quasi_identifiers if q in df.columns]
    if not qis:
        return None
    sensitive = tuple(s for s in ctx.sensitive if s in df.columns)
    exclude = suppressed_records(df, qis) if after else None
    if not after:
        return assess_risk(df, quasi_identifiers=qis, sensitive=sensitive).to_dict()
    population, size = population_after(
        ctx.state.get("models", ()), len(df) - int(np.asarray(exclude).sum())
    )
    risk = assess_risk(
        df, quasi_identifiers=qis, sensitive=sensitive, exclude=exclude, population_size=size
    ).to_dict()
    if population:
        data = class_data(df, quasi_identifiers=qis, exclude=exclude)
        risk["population_models"] = [m.check(data).to_dict() for m in population]
    if ctx.state.get("population_checks"):
        risk.setdefault("population_models", []).extend(ctx.state["population_checks"])
        risk["population_table"] = ctx.state["population_table"]
    if "cells_blanked" in ctx.state:
        # local suppression's own k: a blank matches every value (sdcMicro's rule)
        counts = na_matching_counts(df[~np.asarray(exclude)], quasi_identifiers=qis)
        risk["k_blanks_matching"] = int(counts.min()) if len(counts) else None
        risk["cells_blanked"] = int(ctx.state["cells_blanked"])
    return risk
