"""What a release shows to whom: the one place where a plan, a report, a conflict finding and
the attack figures are split into what everyone who receives the release may read and what only
the team's privacy officers and data stewards (or officers alone) may read.

The internal report (officers and stewards) is what :func:`~anonweb.core.release.run.apply_plan`
returns, plus the checks run on the source (conflicts, the intruder, the gate). The **published**
report (analysts, downloads, the API for analysts) holds only what the released data itself
shows and the public parameters of the plan: each step's report reduced to the keys its kind
declares public (``public_report`` in :func:`~anonweb.core.release.steps.register_step`), the
privacy spent, the number of released rows and the risk measured on the released rows. Never the
source's row count, its k, classes or risk, a utility figure measured on it, or a cell of it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from anonweb.core.conflicts.public import PRIVATE_FINDING_KEYS as PRIVATE_FINDING_KEYS
from anonweb.core.conflicts.public import private_finding_detail as private_finding_detail
from anonweb.core.conflicts.public import public_finding as public_finding
from anonweb.core.conflicts.public import undecided_finding as undecided_finding
from anonweb.core.conflicts.public import without_figures as without_figures
from anonweb.core.models.population_table import POPULATION_COUNTED, population_mention
from anonweb.core.release.plan import get_step, plan_from_dict
from anonweb.core.release.steps import Plan

# What the plan runner adds to every step's entry: its place, kind, cost and timing.
STEP_PUBLIC = ("step", "kind", "privacy_cost", "input_distance", "seconds")
# The keys of a published report; anything else in a report describes the source. ``engine``
# (which engine wrote the release) is a fact of the run, not of the source.
PUBLISHED_KEYS = ("steps", "privacy_cost", "rows_out", "risk_after", "row_order", "engine")


def public_plan(plan: Mapping[str, Any]) -> dict[str, Any]:
    """The plan as published with a release: every parameter, but hierarchy tables (which list
    the source's distinct values) and substitution codebooks summarised, and secrets only by
    name. The input is left untouched."""
    out = dict(plan)
    hierarchies: dict[str, Any] = {}
    for column, spec in (plan.get("hierarchies") or {}).items():
        if isinstance(spec, dict) and "rows" in spec:
            rows = spec["rows"]
            hierarchies[column] = {
                "uploaded": True,
                "values": len(rows),
                "levels": len(rows[0]) if rows else 0,
            }
        elif isinstance(spec, dict) and "uploaded" in spec:
            hierarchies[column] = {
                "uploaded": True,
                "values": spec.get("values"),
                "levels": spec.get("levels"),
            }
        else:
            hierarchies[column] = spec
    out["hierarchies"] = hierarchies
    # A substitution codebook is a key in all but name: publishing it undoes the substitution.
    out["steps"] = [
        {
            **step,
            "params": {
                **step.get("params", {}),
                "codebook": {"entries": len(step["params"]["codebook"])},
            },
        }
        if step.get("kind") == "substitute"
        and isinstance(step.get("params", {}).get("codebook"), dict)
        else step
        for step in plan.get("steps", [])
    ]
    return out


def public_step_keys(plan: Plan, entry: Mapping[str, Any], position: int) -> frozenset[str]:
    """The keys of a step's report entry that the published report keeps: those the runner adds
    to every step, and those its kind declares public. ``position`` (from 1) names the step
    when the entry does not (a step's report may use ``kind`` for its own, a DP count's say);
    an entry that names no step of the plan keeps the runner's keys only."""
    number = entry.get("step", position)
    planned = (
        plan.steps[number - 1]
        if isinstance(number, int) and 0 < number <= len(plan.steps)
        else None
    )
    public = set(STEP_PUBLIC)
    if planned is not None:
        public |= set(get_step(planned.kind).public_report)
    return frozenset(public)


def public_check(check: Any) -> Any:
    """A model check as analysts read it: one counted in a population table (another dataset
    of the team, raw data) keeps its verdict and the released records that fail, not its
    figure, which is one of that table's class counts."""
    if isinstance(check, Mapping) and check.get(POPULATION_COUNTED):
        return {k: v for k, v in check.items() if k != "value"}
    return check


def without_population_names(value: Any, population: Mapping[str, Any] | None) -> Any:
    """``value`` with every mention of the population table (``{"name", "rows"}``, another
    dataset of the team) in the models' descriptions put as "a population table"."""
    if not isinstance(population, Mapping) or "name" not in population:
        return value
    mention = population_mention(str(population["name"]), int(population.get("rows") or 0))

    def walk(v: Any) -> Any:
        if isinstance(v, str):
            return v.replace(mention, "a population table")
        if isinstance(v, Mapping):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk(value)


def public_risk_after(risk: Any) -> Any:
    """The risk after as analysts read it: without the population table's name and size, and
    its checks by :func:`public_check`."""
    if not isinstance(risk, Mapping):
        return risk
    out = {k: v for k, v in risk.items() if k != "population_table"}
    if isinstance(out.get("population_models"), list):
        out["population_models"] = [public_check(c) for c in out["population_models"]]
    return out


def public_steps(report: Mapping[str, Any], plan: Plan) -> list[dict[str, Any]]:
    """Each step's report entry reduced to its public keys (:func:`public_step_keys`), its
    model checks by :func:`public_check`."""
    out = []
    for i, entry in enumerate(report.get("steps") or [], 1):
        public = public_step_keys(plan, entry, i)
        step = {k: v for k, v in entry.items() if k in public}
        if isinstance(step.get("model_checks"), list):
            step["model_checks"] = [public_check(c) for c in step["model_checks"]]
        out.append(step)
    return out


def internal_step_keys(report: Mapping[str, Any], plan: Plan) -> list[str]:
    """``"step <n> <key>"`` for each key of a step's entry that the published report drops:
    what a report would disclose of the source if it were published whole."""
    out = []
    for i, entry in enumerate(report.get("steps") or [], 1):
        public = public_step_keys(plan, entry, i)
        number = entry.get("step", i)
        out += [f"step {number} {key}" for key in entry if key not in public]
    return out


def published_report(
    report: Mapping[str, Any], plan: Plan | Mapping[str, Any], *, keep_order: bool = False
) -> dict[str, Any]:
    """The report analysts may read, from the internal ``report`` of the same release."""
    plan = plan if isinstance(plan, Plan) else plan_from_dict(plan)
    out: dict[str, Any] = {
        "steps": public_steps(report, plan),
        "privacy_cost": dict(report.get("privacy_cost") or {}),
        "rows_out": report.get("rows_out"),
        # measured on the released rows, over the plan's quasi-identifiers as released
        "risk_after": public_risk_after(report.get("risk_after")),
        "row_order": "source order (kept on request)" if keep_order else "shuffled",
    }
    risk = report.get("risk_after")
    population = risk.get("population_table") if isinstance(risk, Mapping) else None
    public: dict[str, Any] = without_population_names(out, population)
    return public


# ---- conflict findings --------------------------------------------------------------------------
# Defined beside the conflict check, which builds them (:mod:`anonweb.core.conflicts.public`);
# imported above and listed here with the other splits.


def override_for_reader(
    override: Mapping[str, Any] | None, *, staff: bool
) -> dict[str, Any] | None:
    """A steward's override of blocking findings as a reader sees it: the justification for
    everyone who sees the release, the findings it overrode for officers and stewards only."""
    if not override:
        return None
    if staff:
        return dict(override)
    return {k: v for k, v in override.items() if k != "findings"}


# ---- attack figures -----------------------------------------------------------------------------


def attacks_without_records(attacks: Mapping[str, Any]) -> dict[str, Any]:
    """The attack figures without which records the reconstruction determines, nor their
    values (for data stewards; privacy officers read them whole)."""
    out = dict(attacks)
    rec = out.get("reconstruction")
    if isinstance(rec, dict):
        out["reconstruction"] = {
            **rec,
            "columns": [
                {k: v for k, v in c.items() if k not in ("records", "values")}
                for c in rec.get("columns", [])
            ],
        }
    return out
