"""The two reports of a release.

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

from anonweb.core.release.plan import get_step, plan_from_dict
from anonweb.core.release.steps import Plan

# What the plan runner adds to every step's entry: its place, kind, cost and timing.
STEP_PUBLIC = ("step", "kind", "privacy_cost", "input_distance", "seconds")


def published_report(
    report: Mapping[str, Any], plan: Plan | Mapping[str, Any], *, keep_order: bool = False
) -> dict[str, Any]:
    """The report analysts may read, from the internal ``report`` of the same release."""
    plan = plan if isinstance(plan, Plan) else plan_from_dict(plan)
    steps = []
    for i, entry in enumerate(report.get("steps") or [], 1):
        number = entry.get("step", i)
        planned = (
            plan.steps[number - 1]
            if isinstance(number, int) and 0 < number <= len(plan.steps)
            else None
        )
        public = set(STEP_PUBLIC)
        if planned is not None:
            public |= set(get_step(planned.kind).public_report)
        steps.append({k: v for k, v in entry.items() if k in public})
    out: dict[str, Any] = {
        "steps": steps,
        "privacy_cost": dict(report.get("privacy_cost") or {}),
        "rows_out": report.get("rows_out"),
        # measured on the released rows, over the plan's quasi-identifiers as released
        "risk_after": report.get("risk_after"),
        "row_order": "source order (kept on request)" if keep_order else "shuffled",
    }
    return out
