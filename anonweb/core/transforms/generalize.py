"""Generalization steps: fixed levels, the optimal lattice search, and Mondrian local recoding.

Step kinds:

* ``generalize`` — ``{"levels": {"age": 2, "zip": 3}}``: each column to a hierarchy level.
* ``optimal_generalization`` — ``{"k": 5, "suppression": 0.02, "metric": "loss",
  "aggregate": "geometric", "models": [{"model": "distinct_l", "sensitive": "disease", "l": 2}],
  "max_nodes": 10000, "time_limit": 60}``: the least-loss full-domain generalization of the
  plan's quasi-identifiers; suppressed records get ``*`` in every QI. ``metric`` and
  ``aggregate`` default to ARX's (Loss, geometric mean; see :mod:`anonweb.core.search.metrics`).
  The report's ``information_loss`` is the score minimised (``information_loss_measure`` says
  which), and ``model_checks`` gives each model checked again on the output table by the
  model's own check (suppressed records excluded).
* ``mondrian`` — ``{"k": 5, "columns": [...]}``: strict multidimensional partitioning of
  numeric quasi-identifiers (default: the plan's), each value replaced by its partition's range.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core import schema as sch
from anonweb.core.errors import HierarchyError, ParameterError
from anonweb.core.io.hierarchy import Hierarchy
from anonweb.core.io.hierarchy_builders import spec_is_fixed
from anonweb.core.models import KAnonymity, class_data, model_from_dict
from anonweb.core.models.base import require_int
from anonweb.core.models.population_table import POPULATION_COUNTED, sample_rows
from anonweb.core.models.schemas import MODEL_SCHEMA, MODEL_SCHEMAS
from anonweb.core.release.steps import (
    EVERY_ENGINE,
    IN_MEMORY,
    ROW_WISE,
    UNBOUNDED,
    Plan,
    PlanContext,
    StepContext,
    StepOutcome,
    hierarchy_height,
    hierarchy_problems,
    register_step,
    size_problems,
)
from anonweb.core.search.metrics import AGGREGATES, METRICS, check_objective
from anonweb.core.transforms.local_suppression import (
    apply_blanks,
    local_suppression,
    na_matching_counts,
)


def _check_levels(params: Mapping[str, Any]) -> None:
    levels = params.get("levels")
    if not isinstance(levels, Mapping) or not levels:
        raise ParameterError("'levels' must map columns to hierarchy levels")
    for col, lv in levels.items():
        if not isinstance(lv, int) or lv < 0:
            raise ParameterError(f"level for {col!r} must be a non-negative integer, got {lv!r}")


def _hierarchy(ctx: StepContext, column: str) -> Hierarchy:
    try:
        found: Hierarchy = ctx.hierarchies[column]
        return found
    except KeyError:
        raise HierarchyError(f"no hierarchy given for {column!r}") from None


def _generalize_stability(params: Mapping[str, Any], plan: Plan) -> int | None:
    """Row-wise when every hierarchy is fixed in advance (uploaded, or a builder that does not
    look at the data); a hierarchy built from the column's values moves with every row."""
    specs = plan.hierarchies
    fixed = all(spec_is_fixed(specs.get(col)) for col in params.get("levels") or {})
    return ROW_WISE if fixed else UNBOUNDED


def _levels_plan(params: Mapping[str, Any], ctx: PlanContext) -> list[str]:
    levels = params["levels"]
    return hierarchy_problems(list(levels), ctx, what="generalize") + _level_ranges(levels, ctx)


def _level_ranges(levels: Mapping[str, Any], ctx: PlanContext) -> list[str]:
    """Levels above a hierarchy's top (known for tables: inline, or uploaded and resolved)."""
    problems = []
    for col, level in levels.items():
        height = hierarchy_height(ctx.plan.hierarchies.get(col))
        if height is not None and level >= height:
            problems.append(
                f"level {level} for {col!r} is out of range (its hierarchy has levels 0..{height - 1})"
            )
    return problems


@register_step(
    "generalize",
    validate=_check_levels,
    stability=_generalize_stability,
    schema=sch.obj(
        {
            "levels": sch.mapping(
                sch.integer(minimum=0, maximum=100),
                "Column -> hierarchy level (0 keeps the value)",
                keys="writes",
                min_properties=1,
            )
        },
        required=["levels"],
        labels={
            "levels": "Hierarchy level per column",
        },
        title="Generalize to fixed levels",
    ),
    plan_check=_levels_plan,
    generalizes=lambda params, plan: [str(c) for c in params["levels"]],
    recodes=True,
    public_report=("levels",),
)
def generalize(df: pd.DataFrame, params: Mapping[str, Any], ctx: StepContext) -> StepOutcome:
    out = df.copy()
    for col, level in params["levels"].items():
        out[col] = _hierarchy(ctx, col).generalize(df[col], level)
    return StepOutcome(out, {"levels": dict(params["levels"])})


def _check_search(params: Mapping[str, Any]) -> None:
    require_int(params.get("k", 1), "k", minimum=1)
    s = params.get("suppression", 0.0)
    if isinstance(s, bool) or not isinstance(s, int | float) or not 0 <= s < 1:
        raise ParameterError(f"suppression is a fraction of rows in [0, 1), got {s!r}")
    check_objective(params.get("metric", "loss"), params.get("aggregate"))
    models = params.get("models", [])
    if not isinstance(models, list):
        raise ParameterError("'models' must be a list of privacy models")
    if params.get("local_suppression"):
        others = [
            m for m in models if not (isinstance(m, dict) and m.get("model") == "k_anonymity")
        ]
        if others:
            # blanking cells reaches k only; the classes another model rejects are not mended
            raise ParameterError(
                "local suppression replaces record suppression for k-anonymity only; "
                "remove the other privacy models or suppress records"
            )
    for spec in models:
        if isinstance(spec, dict) and spec.get("distance") == "hierarchical":
            continue  # needs the plan's hierarchies; checked when the step runs
        model_from_dict(spec)


def _search_columns(params: Mapping[str, Any]) -> list[str]:
    return [
        m["sensitive"] for m in params.get("models", []) if isinstance(m, dict) and "sensitive" in m
    ]


def _search_plan(params: Mapping[str, Any], ctx: PlanContext) -> list[str]:
    qis = list(ctx.plan.quasi_identifiers)
    if not qis:
        return ["the plan declares no quasi-identifiers to generalize"]
    problems = hierarchy_problems(qis, ctx, what="the search")
    for spec in params.get("models", []):
        if spec.get("distance") == "hierarchical" and spec["sensitive"] not in ctx.plan.hierarchies:
            problems.append(
                f"hierarchical t-closeness on {spec['sensitive']!r} needs a hierarchy for it"
            )
        if spec.get("sensitive") in qis:
            problems.append(f"{spec['sensitive']!r} is a quasi-identifier, not a sensitive column")
        if spec.get("model") == "k_anonymity":
            problems += size_problems(spec["k"], ctx)
        problems += _diversity_problems(spec, ctx)
    levels = params.get("levels") or {}
    others = [c for c in levels if c not in qis]
    if others:
        problems.append(
            f"fixed levels name {', '.join(map(repr, others))}, which the plan does not list as "
            "quasi-identifiers: give levels for the quasi-identifiers only"
        )
    problems += _level_ranges({c: v for c, v in levels.items() if c in qis}, ctx)
    return problems + size_problems(params.get("k", 1), ctx)


def _model_title(spec: Mapping[str, Any]) -> str:
    title: str = MODEL_SCHEMAS.get(str(spec.get("model")), {}).get("title", str(spec.get("model")))
    return title


def _diversity_problems(spec: Mapping[str, Any], ctx: PlanContext) -> list[str]:
    """Every l-diversity needs l different sensitive values in each class, so l above the
    column's number of values (a missing value counted as one) can never be met."""
    column, l_value = spec.get("sensitive"), spec.get("l")
    if (
        ctx.distinct is None
        or not isinstance(column, str)
        or not isinstance(l_value, int | float)
        or column not in ctx.distinct
    ):
        return []
    values = ctx.distinct[column] + (1 if column in ctx.has_missing else 0)
    if l_value <= values:
        return []
    return [
        f"{_model_title(spec)} asks for l = {l_value:g} different values of {column!r} in every class, "
        f"but {column!r} has only {values} different value(s): lower l to at most {values}"
    ]


# parameters a form keeps under "More options": the search works without them
ADVANCED = {"x-advanced": True}

# nodes on the Pareto front of loss against risk kept in the internal report (never published)
ALTERNATIVES = 40
SEARCH_REPORT = (
    "levels",
    "suppressed",
    "k",
    "classes",
    "information_loss",
    "information_loss_measure",
    "loss_per_qi",
    "metric",
    "aggregate",
    "models",
    "model_checks",
    "search",
    "quasi_identifiers",
    "local_suppression",
)


@register_step(
    "optimal_generalization",
    validate=_check_search,
    columns=_search_columns,
    stability=UNBOUNDED,
    schema=sch.obj(
        {
            "k": sch.integer("Smallest class size", minimum=1, maximum=sch.MAX_K, default=1),
            "suppression": sch.number(
                "Largest fraction of rows that may be suppressed",
                minimum=0,
                exclusive_maximum=1,
                default=0.0,
            ),
            "metric": sch.string("Information loss to minimise", enum=METRICS, default="loss"),
            "aggregate": sch.string(
                "How per-column losses combine (default: ARX's geometric mean)",
                enum=AGGREGATES,
            ),
            "models": sch.array(
                MODEL_SCHEMA, "Privacy models besides k-anonymity", max_items=50, default=[]
            ),
            "population_dataset": sch.integer(
                "The team's dataset that is the population the table was drawn from (k-map "
                "counts its classes, δ-presence compares with them)",
                minimum=1,
            )
            | ADVANCED,
            "max_nodes": sch.integer(
                "Stop after checking this many lattice nodes", minimum=1, maximum=100_000_000
            )
            | ADVANCED,
            "levels": sch.mapping(
                sch.integer(minimum=0, maximum=100),
                "Fixed levels (a node picked among the search's alternatives): no search",
                keys="reads",
                min_properties=1,
            )
            | ADVANCED,
            "time_limit": sch.number(
                "Stop after this many seconds", exclusive_minimum=0, maximum=86_400
            )
            | ADVANCED,
            "local_suppression": sch.obj(
                {
                    "importance": sch.mapping(
                        sch.number(minimum=0, maximum=1e6),
                        "Column -> importance (higher: more important, blanked last)",
                        keys="reads",
                    )
                },
                labels={"importance": "Importance per quasi-identifier"},
                title="Blank cells instead of suppressing records",
                description="Given (with an importance per column, or an empty one from the "
                "command line), the search blanks cells instead of suppressing records; an "
                "empty group asks for nothing",
            ),
        },
        labels={
            "k": "Smallest class size (k)",
            "suppression": "Suppression limit (share of rows)",
            "metric": "Information loss to minimise",
            "aggregate": "Combine the columns' losses by",
            "models": "Further privacy models",
            "max_nodes": "Most lattice nodes to check",
            "levels": "Fixed hierarchy levels (no search)",
            "time_limit": "Time limit (seconds)",
            "local_suppression": "Blank cells instead of suppressing records",
            "population_dataset": "Population dataset (for k-map and δ-presence)",
        },
        title="Optimal generalization (k-anonymity search)",
        **{"x-writes": "quasi_identifiers"},
    ),
    plan_check=_search_plan,
    generalizes=lambda params, plan: list(plan.quasi_identifiers),
    recodes=True,
    public_report=SEARCH_REPORT,
    # the search reads the engine's histogram and the engine writes its node; blanking cells
    # (local suppression) picks cells by looking at the other records of each class
    # local suppression blanks cells row by row, and a population table is counted in memory
    engines=lambda params: (
        IN_MEMORY
        if params.get("local_suppression") or params.get("population_dataset")
        else EVERY_ENGINE
    ),
)
def optimal_generalization_step(
    df: pd.DataFrame, params: Mapping[str, Any], ctx: StepContext
) -> StepOutcome:
    from anonweb.core.search.flash import optimal_generalization

    if not ctx.quasi_identifiers:
        raise ParameterError("the plan declares no quasi-identifiers to generalize")
    if params.get("population_dataset") and ctx.population is None:
        raise ParameterError("the step names a population dataset that was not supplied")
    models = search_models(params, ctx.hierarchies, len(df), population=ctx.population)
    # the population table, when a model reads it (a k-map given one counts it)
    population = next((m.population for m in models if m.population is not None), None)
    result = optimal_generalization(
        df,
        quasi_identifiers=list(ctx.quasi_identifiers),
        hierarchies=ctx.hierarchies,
        models=models,
        **search_options(params),
    )
    ctx.state["search"] = result
    ctx.state["models"] = models
    if params.get("local_suppression"):
        out, report = _with_local_suppression(df, result, params, ctx)
        return StepOutcome(out, report)
    out = result.apply(df)
    report = result.to_dict()
    # the output checked again by each model's own check: what the release shows
    data = class_data(
        out,
        quasi_identifiers=list(ctx.quasi_identifiers),
        sensitive=sorted({m.sensitive for m in models if m.sensitive is not None}),
        exclude=result.row_suppressed,
        population=_row_population(df, result.levels, ctx) if population is not None else None,
    )
    checked = checked_models(params, models)
    # a check counted in a population table says so: its figure is one of that table's counts,
    # which the published report leaves out (release.report.public_check)
    dicts = [
        {**m.check(data).to_dict(), **({POPULATION_COUNTED: True} if m.population else {})}
        for m in checked
    ]
    report["model_checks"] = dicts
    if population is not None:
        report["population"] = population.describe()
        ctx.state["population_table"] = population.describe()
        ctx.state["population_checks"] = [d for d in dicts if d.get(POPULATION_COUNTED)]
    return StepOutcome(out, report)


def search_models(
    params: Mapping[str, Any],
    hierarchies: Mapping[str, Hierarchy],
    rows: int,
    *,
    population: Any = None,
) -> list[Any]:
    """The step's privacy models (besides its ``k``), bound to a table of ``rows`` records and,
    for the population-based ones, to the population table when one is given."""
    return [
        model_from_dict(m, hierarchies).for_table(rows).with_population(population)
        for m in params.get("models", [])
    ]


def search_options(params: Mapping[str, Any]) -> dict[str, Any]:
    """The search's settings from the step's parameters: one reading for a table in memory
    (:func:`~anonweb.core.search.flash.optimal_generalization`) and for an engine's histogram
    (:func:`~anonweb.core.search.flash.search_histogram`)."""
    return {
        "k": params.get("k", 1),
        "suppression": float(params.get("suppression", 0.0)),
        "metric": params.get("metric", "loss"),
        "aggregate": params.get("aggregate"),
        "max_nodes": params.get("max_nodes"),
        "time_limit": params.get("time_limit"),
        "levels": params.get("levels"),
        "alternatives": 0 if params.get("levels") else ALTERNATIVES,
    }


def checked_models(params: Mapping[str, Any], models: list[Any]) -> list[Any]:
    """What the output is checked by again: the step's k and each of its models."""
    return [KAnonymity(int(params.get("k", 1))), *models]


def model_checks(data: Any, params: Mapping[str, Any], models: list[Any]) -> list[dict[str, Any]]:
    """k and each model checked again, by its own check, on the released classes ``data``."""
    return [m.check(data).to_dict() for m in checked_models(params, models)]


def _row_population(
    df: pd.DataFrame, levels: Mapping[str, int], ctx: StepContext
) -> Callable[[Any], NDArray[Any]]:
    """The population's size of each row's class at the chosen levels (rows of the input, in
    the output's order: the search keeps every row)."""
    qis = list(ctx.quasi_identifiers)
    rows = sample_rows(df, qis, ctx.hierarchies)

    def sizes(population: Any) -> NDArray[Any]:
        counts = population.bind(qis, ctx.hierarchies)
        return np.asarray(counts.at([levels[q] for q in qis], rows))

    return sizes


def _with_local_suppression(
    df: pd.DataFrame, result: Any, params: Mapping[str, Any], ctx: StepContext
) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The search's node without record suppression, k reached by blanking cells instead
    (sdcMicro's local suppression, :mod:`anonweb.core.transforms.local_suppression`): the
    records the search would suppress keep their other values."""
    qis = list(ctx.quasi_identifiers)
    whole = dataclasses.replace(result, row_suppressed=np.zeros(len(df), dtype=bool))
    generalized = whole.apply(df)
    k = int(params.get("k", 1))
    importance = (params.get("local_suppression") or {}).get("importance") or {}
    blanks = local_suppression(generalized, quasi_identifiers=qis, k=k, importance=importance)
    out = apply_blanks(generalized, blanks)
    ctx.state["cells_blanked"] = ctx.state.get("cells_blanked", 0) + blanks.cells
    report = result.to_dict()
    # what was blanked, never how many records the source held in small classes
    report["local_suppression"] = blanks.to_dict()
    report["suppressed"] = 0
    counts = na_matching_counts(out, quasi_identifiers=qis)
    report["k"] = int(counts.min()) if len(counts) else 0
    report["model_checks"] = []
    return out, report


def _check_mondrian(params: Mapping[str, Any]) -> None:
    k = params.get("k")
    if not isinstance(k, int) or k < 1:
        raise ParameterError(f"k must be a positive integer, got {k!r}")


def _mondrian_plan(params: Mapping[str, Any], ctx: PlanContext) -> list[str]:
    if not params.get("columns") and not ctx.plan.quasi_identifiers:
        return ["mondrian needs columns (or the plan's quasi-identifiers)"]
    return size_problems(params["k"], ctx)


@register_step(
    "mondrian",
    validate=_check_mondrian,
    stability=UNBOUNDED,
    schema=sch.obj(
        {
            "k": sch.integer("Smallest partition size", minimum=1, maximum=sch.MAX_K),
            "columns": sch.columns(
                "Numeric columns to partition (default: the plan's quasi-identifiers)",
                numeric=True,
            ),
        },
        required=["k"],
        labels={
            "k": "Smallest partition size (k)",
            "columns": "Columns",
        },
        title="Mondrian (multidimensional partitioning)",
        **{"x-writes": "quasi_identifiers"},
    ),
    plan_check=_mondrian_plan,
    recodes=True,
    public_report=(
        "quasi_identifiers",
        "k",
        "partitions",
        "smallest_partition",
        "information_loss",
    ),
)
def mondrian_step(df: pd.DataFrame, params: Mapping[str, Any], ctx: StepContext) -> StepOutcome:
    from anonweb.core.search.mondrian import mondrian

    columns = list(params.get("columns") or ctx.quasi_identifiers)
    if not columns:
        raise ParameterError("mondrian needs columns (or the plan's quasi-identifiers)")
    result = mondrian(df, quasi_identifiers=columns, k=params["k"])
    return StepOutcome(result.apply(df), result.to_dict())
