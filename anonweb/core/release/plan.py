"""Release plans: a JSON document of steps, its validation and its privacy costs.

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
``secrets``; randomness comes from the ``rng`` given to
:func:`~anonweb.core.release.run.apply_plan`.

Adding a step kind (e.g. in ``anonweb/core/transforms/mask.py``)::

    from anonweb.core.release.steps import ROW_WISE, StepContext, StepOutcome, register_step

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

The report of :func:`~anonweb.core.release.run.apply_plan` lists, per step, what it did (levels
chosen, rows suppressed, information loss, search statistics, ...), the summed privacy cost, and
the risk profile of
:func:`anonweb.core.assessment.profile.assess_risk` before and after, for the plan's quasi-identifiers.

A step function never mutates ``df``; it returns a new frame and a JSON-serialisable report
(no raw cell values, no keys, no seeds). Modules in :mod:`anonweb.core.transforms` register their
steps on import; :mod:`anonweb.core.release.catalog` lists them, so :func:`get_step` knows every
built-in kind. The registry is :mod:`anonweb.core.release.steps`, running a plan
:func:`anonweb.core.release.run.apply_plan`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anonweb.core import schema as sch
from anonweb.core.attacks.options import attack_options
from anonweb.core.errors import CoreError, ParameterError, PlanError
from anonweb.core.io.hierarchy_builders import builder_schemas, hierarchy_spec_errors
from anonweb.core.io.jsontext import json_loads
from anonweb.core.models.registry import canonical_model_spec
from anonweb.core.release import catalog
from anonweb.core.release.steps import (
    IN_MEMORY,
    PLAN_VERSION,
    STATISTIC_COLUMN,
    Plan,
    PlanContext,
    Step,
    StepSpec,
    registered,
    registered_kinds,
)

# The generalization search (an engine runs it on its histogram) and the step that removes
# columns (an engine leaves them out when it writes the release).
SEARCH = "optimal_generalization"
DROP = "drop"
# A plan is a short document; anything nested deeper is refused before it is walked.
MAX_DEPTH = 32
MAX_STEPS = 200


def get_step(kind: str) -> StepSpec:
    """The step kind ``kind``, the built-in ones (:mod:`anonweb.core.release.catalog`) included."""
    catalog.load()
    spec = registered(kind)
    if spec is None:
        known = ", ".join(registered_kinds())
        raise ParameterError(f"unknown step kind {kind!r} (known: {known})")
    return spec


def step_kinds() -> list[str]:
    catalog.load()
    return registered_kinds()


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
        params = json.loads(json.dumps(dict(params)))
        if isinstance(params.get("models"), list):
            # a model entry may be spelled {"kind": ...}: stored in the one form every reader
            # (schema, search, report) knows
            params["models"] = [canonical_model_spec(m) for m in params["models"]]
        parsed.append(Step(raw["kind"], params))
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


def validate_plan(
    plan: Plan,
    columns: list[str] | None = None,
    *,
    types: Mapping[str, str] | None = None,
    rows: int | None = None,
    files: bool = True,
    distinct: Mapping[str, int] | None = None,
    has_missing: frozenset[str] = frozenset(),
    memory_rows: int | None = None,
    engine: str | None = None,
) -> list[StepSpec]:
    """Check every step and hierarchy of ``plan`` before touching data.

    Each step's parameters are checked against its declared schema, then by its own
    ``validate`` and ``plan_check``; with ``columns`` (and ``types``, ``rows``, ``distinct``)
    every column a step names must exist at that point of the plan (a column dropped by an
    earlier step is gone) and have the right type. Columns are followed through the steps: a
    column generalized with its hierarchy must still hold the source's values (no earlier step
    removed, perturbed or recoded it), and a column recoded into text labels can no longer be
    read as numbers. ``files=False`` refuses hierarchy specs that read a file on the server.
    ``memory_rows`` is the most rows a step that runs in memory only (the step registry's
    ``engines``) may read: a larger table (``rows``) goes to an out-of-core engine (``engine``
    when one is named, DuckDB otherwise), so a step that engine does not run is refused with the
    reason and the limit.
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
    errors += _memory_problems(plan, rows, memory_rows, engine)
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
    under a ``statistic`` column (see :func:`~anonweb.core.release.run.apply_plan`)."""
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


def after_search_problems(plan: Plan) -> list[str]:
    """An engine runs the row-wise steps in one pass over the table before the search reads it;
    a step after the search may go there only when it touches no column the search reads (the
    quasi-identifiers, the sensitive columns), which it would otherwise read generalized."""
    found = [i for i, s in enumerate(plan.steps) if s.kind == SEARCH]
    if not found:
        return []
    search = plan.steps[found[0]]
    read = {*plan.quasi_identifiers, *plan.sensitive}
    read |= {m["sensitive"] for m in search.params.get("models", []) if "sensitive" in m}
    problems = []
    for i, step in enumerate(plan.steps[found[0] + 1 :], found[0] + 2):
        spec = registered(step.kind)
        if spec is None or not set(spec.engines_for(step.params)) - set(IN_MEMORY):
            continue  # unknown, or refused as a step that runs in memory only
        touched = set(spec.columns_read(step.params)) | set(spec.columns_written(step.params, plan))
        clash = sorted(touched & read | ({"*"} & touched))
        if clash and step.kind != DROP:
            problems.append(
                f"step {i} ({step.kind}) comes after the {SEARCH} step and touches "
                f"{', '.join(map(repr, clash))}, which the search reads: an engine runs it "
                "before the search, so put it before the search or use the pandas engine"
            )
    return problems


def _memory_problems(
    plan: Plan, rows: int | None, memory_rows: int | None, engine: str | None = None
) -> list[str]:
    if rows is None or memory_rows is None or rows <= memory_rows:
        return []
    # the engine a table past the limit goes to: the one named, else auto's (DuckDB)
    out_of_core = engine if engine not in (None, "auto", *IN_MEMORY) else "duckdb"
    problems = after_search_problems(plan)
    for i, step in enumerate(plan.steps, 1):
        spec = registered(step.kind)
        if spec is None:
            continue  # an unknown kind is refused as such
        engines = spec.engines_for(step.params)
        if out_of_core in engines:
            continue  # this one runs out of core
        if set(engines) - set(IN_MEMORY):
            problems.append(
                f"step {i} ({step.kind}) runs on the {', '.join(engines)} engines, not on the "
                f"{out_of_core} engine a table of {rows:,} rows goes to (more than the "
                f"{memory_rows:,} an in-memory step may read, ANONWEB_ENGINE_AUTO_ROWS): use "
                "the DuckDB engine, or remove the step"
            )
            continue
        problems.append(
            f"step {i} ({step.kind}) runs in memory only (its output for one row depends on "
            f"the other rows), and the table has {rows:,} rows, more than the {memory_rows:,} "
            "an in-memory step may read (ANONWEB_ENGINE_AUTO_ROWS): remove the step, or reach "
            "the goal with steps an out-of-core engine runs (dropping columns, the "
            "generalization search with record suppression)"
        )
    return problems


def _plan_level_problems(plan: Plan, ctx: PlanContext, files: bool) -> list[str]:
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


def step_schemas() -> dict[str, Any]:
    """Every declared schema, JSON-serialisable: ``{"steps": {kind: {...}},
    "hierarchy_builders": {name: schema}}``. A step entry holds its parameter ``schema``,
    ``output`` and whether it ``perturbs`` values or has a ``privacy_cost``."""
    steps = {}
    for kind in step_kinds():
        spec = get_step(kind)
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
