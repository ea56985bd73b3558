"""Release plans: a JSON document of steps, and the registry of step kinds.

A plan lists the quasi-identifiers, the sensitive columns, the hierarchies and the steps to run::

    {
      "version": 1,
      "quasi_identifiers": ["age", "zip"],
      "sensitive": ["disease"],
      "hierarchies": {
        "age": {"builder": "interval", "width": 10},
        "zip": {"builder": "mask", "length": 5},
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

Adding a step kind (e.g. in ``anonweb/core/transforms/dp.py``)::

    from anonweb.core.release.plan import StepContext, StepOutcome, register_step

    def _check(params):                 # raise ParameterError before any data is touched
        if params.get("epsilon", 0) <= 0:
            raise ParameterError("epsilon must be positive")

    def _cost(params):                  # computable without data; summed in the plan report
        return {"epsilon": float(params["epsilon"]), "delta": 0.0}

    @register_step("dp_count", validate=_check, privacy_cost=_cost)
    def dp_count(df, params, ctx: StepContext) -> StepOutcome:
        noise = ctx.rng.laplace(...)
        return StepOutcome(frame=new_df, report={"columns": [...]})

Built-in step kinds (parameters documented in each module):

* :mod:`~anonweb.core.transforms.mask` — ``drop``, ``suppress``, ``tokenize``, ``substitute``,
  ``regex_mask``, ``date_shift``;
* :mod:`~anonweb.core.transforms.generalize` — ``generalize``, ``optimal_generalization``,
  ``mondrian``;
* :mod:`~anonweb.core.transforms.perturb` — ``add_noise``, ``multiplicative_noise``,
  ``rank_swap``, ``microaggregation``, ``pram``, ``shuffle``;
* differential privacy steps register from ``transforms/dp.py`` and ``transforms/ldp.py``.

Hierarchy specs (``hierarchies``): a file path, ``{"path": ..., "sep": ...}``, inline
``{"rows": [[value, level1, ..., "*"], ...]}`` or a builder from
:mod:`anonweb.core.io.hierarchy_builders` (``interval``, ``grouping``, ``mask``, ``date``).

The report of :func:`apply_plan` lists, per step, what it did (levels chosen, rows suppressed,
information loss, search statistics, ...), the summed privacy cost, and the risk profile of
:func:`anonweb.core.assessment.profile.assess_risk` before and after, for the plan's quasi-identifiers.

A step function never mutates ``df``; it returns a new frame and a JSON-serialisable report
(no raw cell values, no keys, no seeds). Modules in :mod:`anonweb.core.transforms` register their
steps on import; :func:`get_step` imports them on first use.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from anonweb.core.errors import CoreError, ParameterError

PLAN_VERSION = 1


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


@dataclass(frozen=True)
class StepSpec:
    kind: str
    func: StepFunc
    validate: Callable[[Mapping[str, Any]], None] | None = None
    privacy_cost: Callable[[Mapping[str, Any]], Mapping[str, float] | None] | None = None
    columns: Callable[[Mapping[str, Any]], list[str]] | None = None


_REGISTRY: dict[str, StepSpec] = {}


def register_step(
    kind: str,
    *,
    validate: Callable[[Mapping[str, Any]], None] | None = None,
    privacy_cost: Callable[[Mapping[str, Any]], Mapping[str, float] | None] | None = None,
    columns: Callable[[Mapping[str, Any]], list[str]] | None = None,
) -> Callable[[StepFunc], StepFunc]:
    """Register ``func`` as the step ``kind``.

    ``validate(params)`` raises :class:`ParameterError` on bad parameters (run for every step
    before any data is touched); ``privacy_cost(params)`` returns e.g. ``{"epsilon": 1.0}``;
    ``columns(params)`` lists the input columns the step reads (checked against the table first).
    """

    def decorator(func: StepFunc) -> StepFunc:
        existing = _REGISTRY.get(kind)
        if existing is not None and existing.func.__qualname__ != func.__qualname__:
            raise ValueError(f"step kind {kind!r} is already registered")
        _REGISTRY[kind] = StepSpec(kind, func, validate, privacy_cost, columns)
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


def plan_to_dict(plan: Plan) -> dict[str, Any]:
    return {
        "version": plan.version,
        "quasi_identifiers": list(plan.quasi_identifiers),
        "sensitive": list(plan.sensitive),
        "hierarchies": json.loads(json.dumps(plan.hierarchies)),
        "steps": [{"kind": s.kind, "params": json.loads(json.dumps(s.params))} for s in plan.steps],
    }


def plan_from_dict(data: Mapping[str, Any]) -> Plan:
    """Build a :class:`Plan` from its JSON form; raises :class:`ParameterError` on a bad shape."""
    if not isinstance(data, Mapping):
        raise ParameterError("a plan must be a JSON object")
    unknown = set(data) - {"version", "quasi_identifiers", "sensitive", "hierarchies", "steps"}
    if unknown:
        raise ParameterError(f"unknown plan field(s): {', '.join(sorted(unknown))}")
    version = data.get("version", PLAN_VERSION)
    if version != PLAN_VERSION:
        raise ParameterError(f"plan version {version!r} is not supported (expected {PLAN_VERSION})")
    steps = data.get("steps", [])
    if not isinstance(steps, list):
        raise ParameterError("plan 'steps' must be a list")
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
    )


def _str_list(value: Any, name: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ParameterError(f"plan {name!r} must be a list of column names")
    return list(value)


def plan_to_json(plan: Plan) -> str:
    return json.dumps(plan_to_dict(plan), indent=2, sort_keys=True)


def plan_from_json(text: str) -> Plan:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParameterError(f"the plan is not valid JSON ({exc.msg}, line {exc.lineno})") from None
    return plan_from_dict(data)


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


def validate_plan(plan: Plan, columns: list[str] | None = None) -> list[StepSpec]:
    """Check every step's kind and parameters (and columns, if given) before touching data."""
    specs = []
    for i, step in enumerate(plan.steps, 1):
        spec = get_step(step.kind)
        try:
            if spec.validate is not None:
                spec.validate(step.params)
            if columns is not None and spec.columns is not None:
                missing = [c for c in spec.columns(step.params) if c not in columns]
                if missing:
                    raise ParameterError(f"unknown column(s): {', '.join(map(str, missing))}")
        except CoreError as exc:
            raise type(exc)(f"step {i} ({step.kind}): {exc}") from None
        specs.append(spec)
    if columns is not None:
        from anonweb.core.io.frame import require_columns

        require_columns(
            pd.DataFrame(columns=columns), list(plan.quasi_identifiers), role="quasi-identifier"
        )
        require_columns(
            pd.DataFrame(columns=columns), list(plan.sensitive), role="sensitive column"
        )
    return specs


def apply_plan(
    df: pd.DataFrame,
    plan: Plan,
    *,
    rng: np.random.Generator,
    secrets: Mapping[str, bytes] | None = None,
    measure_risk: bool = True,
    before_spending: Callable[[], None] | None = None,
) -> tuple[pd.DataFrame, PlanReport]:
    """Run the plan's steps in order on a copy of ``df``; returns the result and a report.

    ``before_spending`` is called once, just before the first step with a privacy cost reads the
    data (a budget ledger marks its reservation spent there; raising stops the plan)."""
    if not isinstance(rng, np.random.Generator):
        raise ParameterError("rng must be a numpy.random.Generator")
    from anonweb.core.io.hierarchy_builders import resolve_hierarchies

    specs = validate_plan(plan, [str(c) for c in df.columns])
    ctx = StepContext(
        rng=rng,
        secrets=dict(secrets or {}),
        quasi_identifiers=tuple(plan.quasi_identifiers),
        sensitive=tuple(plan.sensitive),
        hierarchies=resolve_hierarchies(plan.hierarchies, df),
    )
    before = _risk(df, ctx) if measure_risk else None
    frame, reports, costs = df, [], {}
    for i, (step, spec) in enumerate(zip(plan.steps, specs), 1):
        cost = spec.privacy_cost(step.params) if spec.privacy_cost else None
        if cost and before_spending is not None:
            before_spending()
            before_spending = None
        started = time.perf_counter()
        try:
            outcome = spec.func(frame, step.params, ctx)
        except CoreError as exc:
            raise type(exc)(f"step {i} ({step.kind}): {exc}") from None
        frame = outcome.frame
        entry = {"step": i, "kind": step.kind, **outcome.report}
        entry["seconds"] = round(time.perf_counter() - started, 4)
        if cost:
            entry["privacy_cost"] = dict(cost)
            for name, value in cost.items():
                costs[name] = costs.get(name, 0.0) + float(value)
        reports.append(entry)
    after = _risk(frame, ctx) if measure_risk else None
    report = PlanReport(tuple(reports), before, after, costs, len(df), len(frame))
    return frame, report


def _risk(df: pd.DataFrame, ctx: StepContext) -> dict[str, Any] | None:
    """Risk profile from :func:`anonweb.core.assessment.profile.assess_risk`, when QIs are declared."""
    qis = [q for q in ctx.quasi_identifiers if q in df.columns]
    if not qis:
        return None
    try:
        from anonweb.core.assessment.profile import assess_risk
    except ImportError:  # the risk module is optional for a plan to run
        return None
    sensitive = tuple(s for s in ctx.sensitive if s in df.columns)
    return assess_risk(df, quasi_identifiers=qis, sensitive=sensitive).to_dict()
