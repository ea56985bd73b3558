"""The registry of step kinds: what a step is given, what it returns, what it declares.

A step module (:mod:`anonweb.core.transforms.mask`, :mod:`anonweb.core.dp.mechanisms`, ...)
registers its kinds with :func:`register_step` on import. This module imports no step module;
:mod:`anonweb.core.release.catalog` is the one list of the built-in ones, and
:func:`anonweb.core.release.plan.get_step` looks a kind up with all of them registered.
The plan document (:class:`Plan`, :class:`Step`) is here too, since a step's declarations read it.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from anonweb.core import schema as sch
from anonweb.core.errors import ParameterError

PLAN_VERSION = 1
# The column that labels each DP measurement's rows when a plan stacks several of them.
STATISTIC_COLUMN = "statistic"


@dataclass
class StepContext:
    """What a step may use besides its parameters.

    ``hierarchies`` holds resolved :class:`~anonweb.core.io.hierarchy.Hierarchy` objects by column.
    ``state`` lets a step leave facts for the plan report (e.g. levels chosen, rows suppressed).
    """

    rng: np.random.Generator
    secrets: Mapping[str, bytes] = field(default_factory=dict)
    quasi_identifiers: tuple[str, ...] = ()
    sensitive: tuple[str, ...] = ()
    hierarchies: Mapping[str, Any] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)
    # the population the table was drawn from (a PopulationTable), for the models that read
    # one (k-map counted, δ-presence)
    population: Any = None
    # Rows of this step's input that one person's row can change (1 after row-wise steps): a DP
    # step states its cost at this distance.
    distance: int = 1
    # A long step reports how far it is (a fraction of itself, and what it is doing).
    progress: Callable[[float, str], None] = field(default=lambda fraction, what: None)
    # An engine runs a row-wise step on the table a part at a time: ``row_positions`` are the
    # positions of the part's rows in the whole table, and ``row_seed`` the seed of the step's
    # per-row draws (drawn from ``rng`` on the first part and kept for the others), so each
    # row's draw is the one it gets when the step runs on the whole table at once (see
    # :mod:`anonweb.core.transforms.rowdraws`). None: the frame is the whole table.
    row_positions: Any = None
    row_seed: int | None = None

    def secret(self, name: str) -> bytes:
        """The secret called ``name``; a clear error if the caller did not supply it."""
        try:
            value = self.secrets[name]
        except KeyError:
            raise ParameterError(
                f"the plan needs the secret {name!r}, which was not supplied"
            ) from None
        return value.encode() if isinstance(value, str) else bytes(value)


@dataclass
class StepOutcome:
    frame: pd.DataFrame
    report: dict[str, Any] = field(default_factory=dict)


StepFunc = Callable[[pd.DataFrame, Mapping[str, Any], StepContext], StepOutcome]

# Stability: how many rows of a step's output one row of its input can change (OpenDP's
# stability map, in rows). A row-wise map (drop, a keyed token, a regex, a fixed hierarchy level,
# noise drawn for each row on its own) changes one output row per input row. A step whose output
# for one row depends on the other rows (rare-value suppression, the optimal search, Mondrian,
# microaggregation, swapping) is unbounded: one person can change every row of its output.
ROW_WISE = 1
UNBOUNDED = None
Stability = int | None
StabilityDecl = Stability | Callable[[Mapping[str, Any], "Plan"], Stability]
CostFunc = Callable[..., Mapping[str, float] | None]

# Where a step can run (see :mod:`anonweb.core.engine`): in memory only (the default: a step that
# needs every row at once, or one not yet written for an engine), or on every engine, out of
# core included (a step an engine runs row by row: it removes columns, or it is the generalization
# search, which reads the engine's histogram and has the engine write its node).
IN_MEMORY: tuple[str, ...] = ("pandas",)
EVERY_ENGINE: tuple[str, ...] = ("pandas", "duckdb", "spark")
# A row-wise step that computes each row's output in Python (a keyed hash, a per-row draw, a
# pattern): DuckDB streams the table through it a part at a time in the table's order. Spark does
# not yet: its partitions do not say which rows of the table they hold, which the per-row draws
# are keyed by.
ROW_ENGINES: tuple[str, ...] = ("pandas", "duckdb")
EnginesDecl = tuple[str, ...] | Callable[[Mapping[str, Any]], tuple[str, ...]]


@dataclass(frozen=True)
class PlanContext:
    """What is known about the table a plan is checked against (each part optional)."""

    plan: Plan
    columns: tuple[str, ...] | None = None
    types: Mapping[str, str] | None = None  # column -> "numeric" | "text"
    rows: int | None = None
    # column -> distinct non-missing values, and columns with a missing value (from the table's
    # profile): what decides whether an l-diversity can be met at all
    distinct: Mapping[str, int] | None = None
    has_missing: frozenset[str] = frozenset()


@dataclass(frozen=True)
class StepSpec:
    """A step kind and what it declares about itself (see :func:`register_step`)."""

    kind: str
    func: StepFunc
    validate: Callable[[Mapping[str, Any]], None] | None = None
    privacy_cost: CostFunc | None = None
    columns: Callable[[Mapping[str, Any]], list[str]] | None = None
    stability: StabilityDecl = UNBOUNDED
    measurement: bool = False
    schema: sch.Schema | None = None
    output: str = "rows"
    perturbs: bool = False
    public_report: tuple[str, ...] = ()
    removes: Callable[[Mapping[str, Any]], list[str]] | None = None
    plan_check: Callable[[Mapping[str, Any], PlanContext], list[str]] | None = None
    keeps_values: bool | Callable[[Mapping[str, Any]], bool] = False
    generalizes: Callable[[Mapping[str, Any], Plan], list[str]] | None = None
    recodes: bool = False
    output_columns: Callable[[Mapping[str, Any]], list[str]] | None = None
    engines: EnginesDecl = IN_MEMORY
    counts: tuple[str, ...] = ()

    def engines_for(self, params: Mapping[str, Any]) -> tuple[str, ...]:
        """The engines that can run the step with these parameters."""
        return tuple(self.engines(params) if callable(self.engines) else self.engines)

    def values_kept(self, params: Mapping[str, Any]) -> bool:
        """Whether every value the step writes into a column is one the column already held
        (swapping, shuffling, PRAM among the column's own categories)."""
        return bool(self.keeps_values(params) if callable(self.keeps_values) else self.keeps_values)

    def columns_read(self, params: Mapping[str, Any]) -> list[str]:
        """Input columns the step needs (from ``columns`` or, failing that, its schema)."""
        if self.columns is not None:
            return list(self.columns(params))
        if self.schema is None:
            return []
        named = sch.columns_named(self.schema, params)
        return list(dict.fromkeys(named["reads"] + named["writes"]))

    def columns_written(self, params: Mapping[str, Any], plan: Plan) -> list[str]:
        """Columns whose values the step changes (``["*"]``: its output replaces the table)."""
        if self.output != "rows":
            return ["*"]
        named = sch.columns_named(self.schema, params)["writes"] if self.schema else []
        if self.schema and self.schema.get("x-writes") == "quasi_identifiers":
            named = named or list(plan.quasi_identifiers)
        return named

    def stability_of(self, params: Mapping[str, Any], plan: Plan) -> Stability:
        value = self.stability(params, plan) if callable(self.stability) else self.stability
        if value is not None and (not isinstance(value, int) or value < 1):
            raise ValueError(f"step kind {self.kind!r} declared an invalid stability {value!r}")
        return value

    def cost_at(self, params: Mapping[str, Any], distance: int) -> dict[str, float]:
        """The step's privacy cost when one person can change ``distance`` rows (per row of
        theirs) of its input; empty for steps without a cost."""
        if self.privacy_cost is None:
            return {}
        return {k: float(v) for k, v in (self.privacy_cost(params, distance) or {}).items()}


_REGISTRY: dict[str, StepSpec] = {}
OUTPUTS = ("rows", "aggregate", "synthetic")


def _with_distance(func: CostFunc | None) -> CostFunc | None:
    """Cost functions take ``(params, distance=1)``; older ones take ``(params)`` only and are
    then independent of the distance (as a local-DP step's per-record ε is)."""
    if func is None:
        return None
    try:
        inspect.signature(func).bind({}, 1)
    except TypeError:
        return lambda params, distance=1: func(params)
    return func


def register_step(
    kind: str,
    *,
    validate: Callable[[Mapping[str, Any]], None] | None = None,
    privacy_cost: CostFunc | None = None,
    columns: Callable[[Mapping[str, Any]], list[str]] | None = None,
    stability: StabilityDecl = UNBOUNDED,
    measurement: bool = False,
    schema: sch.Schema | None = None,
    output: str = "rows",
    perturbs: bool = False,
    public_report: tuple[str, ...] = (),
    removes: Callable[[Mapping[str, Any]], list[str]] | None = None,
    plan_check: Callable[[Mapping[str, Any], PlanContext], list[str]] | None = None,
    keeps_values: bool | Callable[[Mapping[str, Any]], bool] = False,
    generalizes: Callable[[Mapping[str, Any], Plan], list[str]] | None = None,
    recodes: bool = False,
    output_columns: Callable[[Mapping[str, Any]], list[str]] | None = None,
    engines: EnginesDecl = IN_MEMORY,
    counts: tuple[str, ...] = (),
) -> Callable[[StepFunc], StepFunc]:
    """Register ``func`` as the step ``kind``.

    ``validate(params)`` raises :class:`ParameterError` on bad parameters (run for every step
    before any data is touched); ``privacy_cost(params, distance)`` returns e.g.
    ``{"epsilon": 1.0}`` for a step whose input one person can change by ``distance`` rows per
    row of theirs; ``columns(params)`` lists the input columns the step reads (checked against
    the table first).

    ``stability`` declares how many output rows one input row can change: :data:`ROW_WISE` for a
    row-by-row map, :data:`UNBOUNDED` (the default: undeclared steps are assumed unbounded) when a
    row's output depends on other rows, or a function ``(params, plan) -> int | None`` when it
    depends on the parameters. ``measurement`` marks a differentially private release (its output
    replaces the table; later steps are post-processing of it).

    ``schema`` (JSON Schema, see :mod:`anonweb.core.schema`) declares every parameter; it is
    checked before ``validate``, which then checks what a schema cannot say. ``output`` says what
    the step's rows are: ``"rows"`` (one output row per input row, in order), ``"aggregate"``
    (a table of statistics) or ``"synthetic"`` (new records). ``perturbs`` marks steps that move
    numeric values (checked by the maximum-knowledge intruder). ``public_report`` names the keys
    of its report that show only what the released data shows or public parameters (the
    published report keeps those and nothing else). ``removes(params)`` lists the columns it
    removes; ``plan_check(params, ctx)`` returns problems found against the rest of the plan
    (hierarchies, quasi-identifiers, the table's size).

    Three declarations let :func:`~anonweb.core.release.plan.validate_plan` follow a column
    through the plan:
    ``generalizes(params, plan)`` lists the columns the step generalizes with the plan's
    hierarchies (which list the source's values, so no earlier step may change or remove them);
    ``keeps_values`` (or a function of the parameters) says that every value the step writes is
    one the column already held; ``recodes`` says that the columns it writes hold text labels
    afterwards (intervals, ranges, tokens), so later numeric steps cannot read them. A
    measurement declares ``output_columns(params)``, the columns of the table it releases, which
    the steps after it (post-processing) may name.

    ``engines`` (or a function of the parameters) names the engines that can run the step
    (:data:`IN_MEMORY` by default: a step whose output for one row depends on the others needs
    the whole table in one process; :data:`EVERY_ENGINE` for one an engine runs out of core;
    :data:`ROW_ENGINES` for a row-wise step an engine streams the table through a part at a
    time). ``counts`` names the keys of its report that count rows or cells (a number, or a
    number per column): run on parts of the table, those are added up, and every other key must
    read the same in every part.
    """
    if output not in OUTPUTS:
        raise ValueError(f"output must be one of {OUTPUTS}, not {output!r}")

    def decorator(func: StepFunc) -> StepFunc:
        existing = _REGISTRY.get(kind)
        if existing is not None and existing.func.__qualname__ != func.__qualname__:
            raise ValueError(f"step kind {kind!r} is already registered")
        _REGISTRY[kind] = StepSpec(
            kind,
            func,
            validate,
            _with_distance(privacy_cost),
            columns,
            stability,
            measurement,
            schema,
            output,
            perturbs,
            tuple(public_report),
            removes,
            plan_check,
            keeps_values,
            generalizes,
            recodes,
            output_columns,
            engines,
            tuple(counts),
        )
        return func

    return decorator


@dataclass(frozen=True)
class Step:
    kind: str
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Plan:
    steps: tuple[Step, ...] = ()
    quasi_identifiers: tuple[str, ...] = ()
    sensitive: tuple[str, ...] = ()
    hierarchies: dict[str, Any] = field(default_factory=dict)
    version: int = PLAN_VERSION
    # Attack evaluation (anonweb.core.attacks.options): how many records to hold out as the
    # control, and what the attacker knows. Empty: the plan does not ask for a control.
    attacks: dict[str, Any] = field(default_factory=dict)


def hierarchy_height(spec: Any) -> int | None:
    """Levels of an inline hierarchy (builders and files are only known with the data)."""
    if isinstance(spec, Mapping) and isinstance(spec.get("rows"), list) and spec["rows"]:
        first = spec["rows"][0]
        return len(first) if isinstance(first, list) else None
    return None


def hierarchy_problems(columns: list[str], ctx: PlanContext, *, what: str) -> list[str]:
    """Columns that ``what`` generalizes but the plan gives no hierarchy for."""
    missing = [c for c in columns if c not in ctx.plan.hierarchies]
    if missing:
        return [f"{what} needs a hierarchy for {', '.join(map(repr, missing))}"]
    return []


def size_problems(k: Any, ctx: PlanContext, *, name: str = "k") -> list[str]:
    """A group size larger than the table can never be met."""
    if ctx.rows is not None and isinstance(k, int) and k > ctx.rows:
        return [f"{name!r} is {k} but the table has only {ctx.rows} rows"]
    return []


def registered(kind: str) -> StepSpec | None:
    """The step kind ``kind`` if a module registered it (built-in kinds: see
    :func:`anonweb.core.release.plan.get_step`)."""
    return _REGISTRY.get(kind)


def registered_kinds() -> list[str]:
    return sorted(_REGISTRY)
