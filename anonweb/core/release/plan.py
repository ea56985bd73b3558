"""Release plans: a JSON document of steps, and the registry of step kinds.

A plan lists the quasi-identifiers, the sensitive columns, the hierarchies and the steps to run::

    {
      "version": 1,
      "quasi_identifiers": ["age", "zip"],
      "sensitive": ["disease"],
      "hierarchies": {
        "age": {"builder": "interval", "width": 10},
        "zip": {"builder": "mask"},
        "sex": {"path": "hierarchies/sex.csv"},
        "race": {"rows": [["White", "*"], ["Black", "*"]]}
      },
      "steps": [
        {"kind": "drop", "params": {"columns": ["name"]}},
        {"kind": "tokenize", "params": {"columns": ["ssn"], "key": "release-key"}},
        {"kind": "optimal_generalization", "params": {"k": 5, "suppression": 0.02}}
      ]
    }

Every parameter is written in the plan, so a release can be reproduced and explained; keys and
seeds are not: a step names a secret (``"key": "release-key"``) and the caller passes the bytes in
``secrets``; randomness comes from the ``rng`` given to :func:`apply_plan`.

Adding a step kind (e.g. in ``anonweb/core/transforms/mask.py``)::

    from anonweb.core.release.plan import ROW_WISE, StepContext, StepOutcome, register_step

    def _check(params):                 # raise ParameterError before any data is touched
        if not params.get("columns"):
            raise ParameterError("'columns' must list the columns to upper-case")

    @register_step("upper", validate=_check, stability=ROW_WISE)
    def upper(df, params, ctx: StepContext) -> StepOutcome:
        out = df.copy()
        for col in params["columns"]:
            out[col] = df[col].str.upper()
        return StepOutcome(frame=out, report={"columns": params["columns"]})

``stability`` says how far one person moves the step's output (:data:`ROW_WISE`: only their own
rows; :data:`UNBOUNDED`, the default: a row's output depends on other rows). A DP step
(``measurement=True``, see :mod:`anonweb.core.dp.mechanisms`) declares
``privacy_cost(params, distance)``, computable without data: its privacy map at the distance the
steps before it allow (:func:`plan_costs`); after an unbounded step the plan is refused.

Built-in step kinds (parameters documented in each module):

* :mod:`~anonweb.core.transforms.mask` — ``drop``, ``suppress``, ``tokenize``, ``substitute``,
  ``regex_mask``, ``date_shift``;
* :mod:`~anonweb.core.transforms.generalize` — ``generalize``, ``optimal_generalization``,
  ``mondrian``;
* :mod:`~anonweb.core.transforms.perturb` — ``add_noise``, ``multiplicative_noise``,
  ``rank_swap``, ``microaggregation``, ``pram``, ``shuffle``;
* :mod:`anonweb.core.dp` — ``dp_release``, ``dp_synthetic`` (measurements), and the local-DP
  steps ``ldp_randomized_response`` and ``ldp_laplace``.

Hierarchy specs (``hierarchies``): a file path, ``{"path": ..., "sep": ...}``, inline
``{"rows": [[value, level1, ..., "*"], ...]}`` or a builder from
:mod:`anonweb.core.io.hierarchy_builders` (``interval``, ``grouping``, ``mask``, ``date``).

Every step kind and every builder declares its parameters as a JSON Schema
(:mod:`anonweb.core.schema`); :func:`validate_plan` checks a plan against them, and against the
table's columns, before anything runs, and :func:`step_schemas` exports them all (for forms and
API documentation).

The report of :func:`apply_plan` lists, per step, what it did (levels chosen, rows suppressed,
information loss, search statistics, ...), the summed privacy cost, and the risk profile of
:func:`anonweb.core.assessment.profile.assess_risk` before and after, for the plan's quasi-identifiers.

A step function never mutates ``df``; it returns a new frame and a JSON-serialisable report
(no raw cell values, no keys, no seeds). Modules in :mod:`anonweb.core.transforms` register their
steps on import; :func:`get_step` imports them on first use.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from anonweb.core import schema as sch
from anonweb.core.attacks.options import attack_options
from anonweb.core.errors import CoreError, ParameterError, PlanError
from anonweb.core.io.jsontext import json_loads

PLAN_VERSION = 1
# A plan is a short document; anything nested deeper is refused before it is walked.
MAX_DEPTH = 32
MAX_STEPS = 200


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
    # Rows of this step's input that one person's row can change (1 after row-wise steps): a DP
    # step states its cost at this distance.
    distance: int = 1
    # A long step reports how far it is (a fraction of itself, and what it is doing).
    progress: Callable[[float, str], None] = field(default=lambda fraction, what: None)

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

    Three declarations let :func:`validate_plan` follow a column through the plan:
    ``generalizes(params, plan)`` lists the columns the step generalizes with the plan's
    hierarchies (which list the source's values, so no earlier step may change or remove them);
    ``keeps_values`` (or a function of the parameters) says that every value the step writes is
    one the column already held; ``recodes`` says that the columns it writes hold text labels
    afterwards (intervals, ranges, tokens), so later numeric steps cannot read them. A
    measurement declares ``output_columns(params)``, the columns of the table it releases, which
    the steps after it (post-processing) may name.
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
        )
        return func

    return decorator


def _load_builtin_steps() -> None:
    import anonweb.core.dp  # noqa: F401  (registers the DP steps)
    import anonweb.core.transforms  # noqa: F401  (registers the record-level steps)


def get_step(kind: str) -> StepSpec:
    if kind not in _REGISTRY:
        _load_builtin_steps()
    try:
        return _REGISTRY[kind]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY))
        raise ParameterError(f"unknown step kind {kind!r} (known: {known})") from None


def step_kinds() -> list[str]:
    _load_builtin_steps()
    return sorted(_REGISTRY)


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


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    out = {
        "version": plan.version,
        "quasi_identifiers": list(plan.quasi_identifiers),
        "sensitive": list(plan.sensitive),
        "hierarchies": json.loads(json.dumps(plan.hierarchies)),
        "steps": [{"kind": s.kind, "params": json.loads(json.dumps(s.params))} for s in plan.steps],
    }
    if plan.attacks:
        out["attacks"] = json.loads(json.dumps(plan.attacks))
    return out


def plan_from_dict(data: Mapping[str, Any]) -> Plan:
    """Build a :class:`Plan` from its JSON form; raises :class:`ParameterError` on a bad shape."""
    if not isinstance(data, Mapping):
        raise ParameterError("a plan must be a JSON object")
    if sch.depth(data, limit=MAX_DEPTH) > MAX_DEPTH:
        raise ParameterError(f"the plan is nested more than {MAX_DEPTH} levels deep")
    unknown = set(data) - {
        "version",
        "quasi_identifiers",
        "sensitive",
        "hierarchies",
        "steps",
        "attacks",
    }
    if unknown:
        raise ParameterError(f"unknown plan field(s): {', '.join(sorted(unknown))}")
    version = data.get("version", PLAN_VERSION)
    if version != PLAN_VERSION:
        raise ParameterError(f"plan version {version!r} is not supported (expected {PLAN_VERSION})")
    steps = data.get("steps", [])
    if not isinstance(steps, list):
        raise ParameterError("plan 'steps' must be a list")
    if len(steps) > MAX_STEPS:
        raise ParameterError(f"a plan may have at most {MAX_STEPS} steps, not {len(steps)}")
    parsed = []
    for i, raw in enumerate(steps, 1):
        if not isinstance(raw, Mapping) or not isinstance(raw.get("kind"), str):
            raise ParameterError(f"step {i}: must be an object with a 'kind'")
        params = raw.get("params", {})
        if not isinstance(params, Mapping):
            raise ParameterError(f"step {i} ({raw['kind']}): 'params' must be an object")
        parsed.append(Step(raw["kind"], json.loads(json.dumps(dict(params)))))
    hierarchies = data.get("hierarchies", {})
    if not isinstance(hierarchies, Mapping):
        raise ParameterError("plan 'hierarchies' must be an object (column -> spec)")
    return Plan(
        steps=tuple(parsed),
        quasi_identifiers=tuple(_str_list(data.get("quasi_identifiers", []), "quasi_identifiers")),
        sensitive=tuple(_str_list(data.get("sensitive", []), "sensitive")),
        hierarchies=json.loads(json.dumps(dict(hierarchies))),
        version=version,
        attacks=(
            attack_options(data["attacks"]).to_dict() if data.get("attacks") is not None else {}
        ),
    )


def _str_list(value: Any, name: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ParameterError(f"plan {name!r} must be a list of column names")
    return list(value)


def plan_to_json(plan: Plan) -> str:
    return json.dumps(plan_to_dict(plan), indent=2, sort_keys=True, ensure_ascii=False)


def plan_from_json(text: str) -> Plan:
    return plan_from_dict(json_loads(text, what="the plan", max_depth=MAX_DEPTH))


def read_plan(path: str | Path) -> Plan:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ParameterError(f"cannot read plan {str(path)!r}: {exc.strerror}") from None
    return plan_from_json(text)


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


def validate_plan(
    plan: Plan,
    columns: list[str] | None = None,
    *,
    types: Mapping[str, str] | None = None,
    rows: int | None = None,
    files: bool = True,
    distinct: Mapping[str, int] | None = None,
    has_missing: frozenset[str] = frozenset(),
) -> list[StepSpec]:
    """Check every step and hierarchy of ``plan`` before touching data.

    Each step's parameters are checked against its declared schema, then by its own
    ``validate`` and ``plan_check``; with ``columns`` (and ``types``, ``rows``, ``distinct``)
    every column a step names must exist at that point of the plan (a column dropped by an
    earlier step is gone) and have the right type. Columns are followed through the steps: a
    column generalized with its hierarchy must still hold the source's values (no earlier step
    removed, perturbed or recoded it), and a column recoded into text labels can no longer be
    read as numbers. ``files=False`` refuses hierarchy specs that read a file on the server.
    Raises :class:`~anonweb.core.errors.PlanError` listing every problem found, each once.
    """
    errors: list[str] = []
    specs: list[StepSpec] = []
    ctx = PlanContext(
        plan, None if columns is None else tuple(columns), types, rows, distinct, has_missing
    )
    available: list[str] | None = None if columns is None else list(columns)
    removed: dict[str, str] = {}
    changed: dict[str, str] = {}  # column -> the step that changed its values
    recoded: dict[str, str] = {}  # column -> the step after which it holds text labels
    rows_phase = True  # before any aggregate: the steps see the source's rows
    source: list[str] | None = None  # what the DP measurements read (the table before them)
    released: list[list[str]] | None = []  # the measurements' output columns, while known
    for i, step in enumerate(plan.steps, 1):
        where = f"step {i} ({step.kind})"
        try:
            spec = get_step(step.kind)
        except CoreError as exc:
            errors.append(f"step {i}: {exc}")
            available, rows_phase = None, False
            continue
        specs.append(spec)
        if spec.measurement:
            if rows_phase:
                source = available
            available = source  # several measurements in a row all read the same table
        problems = _step_problems(spec, step, ctx, available, removed, recoded)
        if not problems and spec.generalizes is not None:
            generalized = spec.generalizes(step.params, plan)
            problems = _generalized_problems(spec, generalized, removed, changed)
        errors += [f"{where}: {p}" for p in problems]
        if spec.output != "rows":
            # the table after a release is its output: the steps after it may name those columns
            if released is not None and not problems and spec.output_columns is not None:
                released.append(spec.output_columns(step.params))
            else:
                released = None
            available = _released_columns(released)
            if available is not None:
                replaced = f"{where}, whose released table ({', '.join(available)}) {RELEASED}"
                before = [*(source or ctx.columns or ()), *plan.quasi_identifiers, *removed]
                removed.update({c: replaced for c in before if c not in available})
            rows_phase = False
            continue
        if problems or not rows_phase:
            continue
        if spec.removes is not None:
            gone = set(spec.removes(step.params))
            if available is not None:
                available = [c for c in available if c not in gone]
            removed.update({c: where for c in gone})
        written = [c for c in spec.columns_written(step.params, plan) if c != "*"]
        if not spec.values_kept(step.params):
            changed.update({c: where for c in written if c not in changed})
        if spec.recodes:
            recoded.update({c: where for c in written})
    errors += _plan_level_problems(plan, ctx, files)
    if len(specs) == len(plan.steps):
        try:
            plan_costs(plan, specs)  # refuses a DP step that an unstable step feeds
        except CoreError as exc:
            errors.append(str(exc))
        except Exception:  # a cost function choking on parameters already refused above
            if not errors:
                raise
    if errors:
        # a step refused by its own check is refused again when its cost is computed
        raise PlanError(list(dict.fromkeys(errors)))
    return specs


RELEASED = "replaces the rows"


def _released_columns(released: list[list[str]] | None) -> list[str] | None:
    """The columns after one or more DP releases: one release's own, or all of them stacked
    under a ``statistic`` column (see :func:`apply_plan`)."""
    if not released:
        return None
    if len(released) == 1:
        return list(released[0])
    return [STATISTIC_COLUMN, *dict.fromkeys(c for cols in released for c in cols)]


def _generalized_problems(
    spec: StepSpec,
    generalized: list[str],
    removed: Mapping[str, str],
    changed: Mapping[str, str],
) -> list[str]:
    """Columns a step generalizes with the plan's hierarchies that an earlier step removed or
    changed: a hierarchy lists the source's values, so it would not cover what that step wrote
    (means, noisy numbers, tokens, intervals) and the worker would stop there."""
    whole_qis = bool(spec.schema and spec.schema.get("x-writes") == "quasi_identifiers")
    stop = "take it out of the quasi-identifiers" if whole_qis else "stop generalizing it here"
    problems = []
    released = [c for c in generalized if c in removed and removed[c].endswith(RELEASED)]
    if released:
        problems.append(
            f"it generalizes {', '.join(map(repr, released))}, but {removed[released[0]]}. A "
            "released DP table needs no generalization: remove this step"
        )
    for c in generalized:
        if c in released:
            continue
        if c in removed:
            problems.append(
                f"it generalizes {c!r}, but {removed[c]} removed that column before it. "
                f"Drop {c!r} after this step, or {stop}"
            )
        elif c in changed:
            problems.append(
                f"it generalizes {c!r} with its hierarchy, which lists the source's values, but "
                f"{changed[c]} changes those values first, so the hierarchy would not cover "
                f"them. Generalize {c!r} or change it there, not both: take {c!r} out of "
                f"{changed[c]}, or {stop}"
            )
    return problems


def _step_problems(
    spec: StepSpec,
    step: Step,
    ctx: PlanContext,
    available: list[str] | None,
    removed: Mapping[str, str],
    recoded: Mapping[str, str],
) -> list[str]:
    if spec.schema is not None:
        types = dict(ctx.types or {})
        types.update({c: "text" for c in recoded})
        problems = sch.check(
            spec.schema,
            step.params,
            columns=available,
            types=types if ctx.types is not None or recoded else None,
            removed=removed,
            retyped=recoded,
        )
        if problems:
            return problems
    try:
        if spec.validate is not None:
            spec.validate(step.params)
        if available is not None and spec.schema is None and spec.columns is not None:
            missing = [c for c in spec.columns(step.params) if c not in available]
            if missing:
                return [f"unknown column(s): {', '.join(map(str, missing))}"]
    except CoreError as exc:
        return [str(exc)]
    except Exception as exc:  # a validator that fails on odd input still refuses the plan
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        return [f"the parameters were refused ({first})"]
    if spec.plan_check is not None:
        return list(spec.plan_check(step.params, ctx))
    return []


def _plan_level_problems(plan: Plan, ctx: PlanContext, files: bool) -> list[str]:
    from anonweb.core.io.hierarchy_builders import hierarchy_spec_errors

    errors = []
    if ctx.columns is not None:
        for role, names in (
            ("quasi-identifier", plan.quasi_identifiers),
            ("sensitive column", plan.sensitive),
        ):
            missing = [n for n in names if n not in ctx.columns]
            if missing:
                errors.append(f"unknown {role}(s): {', '.join(map(repr, missing))}")
        unknown = [c for c in plan.hierarchies if c not in ctx.columns]
        if unknown:
            errors.append(f"hierarchies name unknown column(s): {', '.join(map(repr, unknown))}")
    both = sorted(set(plan.quasi_identifiers) & set(plan.sensitive))
    if both:
        errors.append(
            "a column cannot be both quasi-identifier and sensitive: " + ", ".join(map(repr, both))
        )
    for column, spec in plan.hierarchies.items():
        errors += hierarchy_spec_errors(column, spec, files=files)
    if plan.attacks and ctx.columns is not None:
        named = [*plan.attacks.get("known", []), *plan.attacks.get("sensitive", [])]
        missing = [c for c in named if c not in ctx.columns]
        if missing:
            errors.append(f"attacks: unknown column(s) {', '.join(map(repr, missing))}")
    return errors


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


def step_schemas() -> dict[str, Any]:
    """Every declared schema, JSON-serialisable: ``{"steps": {kind: {...}},
    "hierarchy_builders": {name: schema}}``. A step entry holds its parameter ``schema``,
    ``output`` and whether it ``perturbs`` values or has a ``privacy_cost``."""
    from anonweb.core.io.hierarchy_builders import builder_schemas

    steps = {}
    for kind in step_kinds():
        spec = _REGISTRY[kind]
        steps[kind] = {
            "schema": json.loads(json.dumps(spec.schema or {"type": "object"})),
            "output": spec.output,
            "perturbs": spec.perturbs,
            "privacy_cost": spec.privacy_cost is not None,
        }
    return {"steps": steps, "hierarchy_builders": json.loads(json.dumps(builder_schemas()))}


@dataclass(frozen=True)
class StepCost:
    """A privacy-spending step's cost at the input distance the steps before it allow."""

    step: int
    kind: str
    distance: int
    cost: dict[str, float]
    measurement: bool


def plan_costs(plan: Plan, specs: list[StepSpec] | None = None) -> list[StepCost]:
    """The privacy cost of every step that has one, computed without data.

    A DP measurement's cost is its privacy map at the distance the steps before it allow: the
    product of their stabilities (1 for row-wise maps). When one of them is unbounded, no ε holds
    and the plan is refused, naming the step to move or remove. Several measurements in a row all
    read the table as the steps before the first one left it; steps after a measurement
    post-process its output (any step kind, no cost), so a measurement may not follow them.
    A step with a cost that is not a measurement (local DP) is charged per record.
    """
    specs = specs if specs is not None else [get_step(s.kind) for s in plan.steps]
    distance: int | None = 1
    unstable: tuple[int, str] | None = None
    measured = False
    post: tuple[int, str] | None = None
    out = []
    for i, (step, spec) in enumerate(zip(plan.steps, specs, strict=True), 1):
        if spec.measurement:
            if post is not None:
                raise ParameterError(
                    f"step {i} ({step.kind}): DP releases read the table as the steps before "
                    f"the first of them left it, but step {post[0]} ({post[1]}) post-processes "
                    "a DP release's output; put it after every DP release step"
                )
            if distance is None:
                j, kind = unstable or (0, "?")
                raise ParameterError(
                    f"step {i} ({step.kind}) would not be differentially private: step {j} "
                    f"({kind}) before it is not stable (its output for one row depends on the "
                    "other rows, so one person can change all of it and no ε holds). Move step "
                    f"{j} after the DP step (to post-process its output) or remove it"
                )
            measured = True
        elif measured:
            post = post or (i, step.kind)
        else:
            stability = spec.stability_of(step.params, plan)
            if stability is None and unstable is None:
                unstable = (i, step.kind)
            distance = None if stability is None or distance is None else distance * stability
        if spec.privacy_cost is None:
            continue
        at = distance if spec.measurement and distance is not None else 1
        try:
            cost = spec.cost_at(step.params, at)
        except CoreError as exc:
            raise type(exc)(f"step {i} ({step.kind}): {exc}") from None
        if cost:
            out.append(StepCost(i, step.kind, at, cost, spec.measurement))
    return out


def plan_total_cost(costs: list[StepCost]) -> dict[str, float]:
    """Basic composition: each kind of cost adds up over the steps."""
    total: dict[str, float] = {}
    for c in costs:
        for name, value in c.cost.items():
            total[name] = total.get(name, 0.0) + value
    return total


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
) -> tuple[pd.DataFrame, PlanReport]:
    """Run the plan's steps in order on a copy of ``df``; returns the result and a report.

    ``before_spending`` is called once, just before the first step with a privacy cost reads the
    data (a budget ledger marks its reservation spent there; raising stops the plan). Several DP
    measurements in a row each read the table the steps before them produced; their outputs are
    stacked, each row labelled with its ``statistic``."""
    if not isinstance(rng, np.random.Generator):
        raise ParameterError("rng must be a numpy.random.Generator")
    from anonweb.core.io.hierarchy_builders import resolve_hierarchies

    specs = validate_plan(plan, [str(c) for c in df.columns])
    costs = {c.step: c for c in plan_costs(plan, specs)}
    ctx = StepContext(
        rng=rng,
        secrets=dict(secrets or {}),
        quasi_identifiers=tuple(plan.quasi_identifiers),
        sensitive=tuple(plan.sensitive),
        hierarchies=resolve_hierarchies(plan.hierarchies, df),
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
        out[c] = df[c].map(_as_text, na_action="ignore").astype(object)
    return out


def _as_text(value: Any) -> str:
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


STATISTIC_COLUMN = "statistic"


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


def _risk(df: pd.DataFrame, ctx: StepContext, *, after: bool = False) -> dict[str, Any] | None:
    """Risk profile from :func:`anonweb.core.assessment.profile.assess_risk`, when QIs are declared.

    After the steps, suppressed records (``*`` in every quasi-identifier) are left out of the
    classes, as the search leaves them out (ARX's outlier handling): k after is the search's k,
    and ``suppressed`` says how many records were left out."""
    qis = [q for q in ctx.quasi_identifiers if q in df.columns]
    if not qis:
        return None
    try:
        from anonweb.core.assessment.profile import assess_risk
    except ImportError:  # the risk module is optional for a plan to run
        return None
    from anonweb.core.risk.classes import suppressed_records

    sensitive = tuple(s for s in ctx.sensitive if s in df.columns)
    exclude = suppressed_records(df, qis) if after else None
    return assess_risk(df, quasi_identifiers=qis, sensitive=sensitive, exclude=exclude).to_dict()
