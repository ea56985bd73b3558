"""Release plans for a dataset: a suggested plan from its column tags, validation of a plan
submitted from the web, and the public copy of a plan that is stored with a release."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from anonweb.core.errors import ParameterError
from anonweb.datasets.models import Dataset

_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")
_DIGITS = re.compile(r"^\d+$")
_CODE_NAME = re.compile(r"zip|post(al)?.?code|plz|postcode", re.IGNORECASE)


def suggest_hierarchy(
    dataset: Dataset, column: str, sample: pd.Series, *, stored: dict | None = None
) -> dict[str, Any]:
    """The hierarchy set on the dataset if there is one, else a builder that fits the column's
    values (``sample``: the column, or only its distinct values). An uploaded table is referred
    to by digest, not copied: it may be megabytes, and the job resolves it when it runs.
    ``stored`` is :func:`~anonweb.datasets.selectors.hierarchies_for` of the dataset."""
    from anonweb.datasets.selectors import hierarchies_for, hierarchy_spec

    current = (stored if stored is not None else hierarchies_for(dataset=dataset)).get(column)
    if current is not None:
        if current.kind == "uploaded":
            return {"uploaded": current.sha256, "values": current.values, "levels": current.levels}
        spec = hierarchy_spec(dataset=dataset, column=column)
        if spec is not None:
            return spec
    values = sample.dropna()
    if _CODE_NAME.search(column) and len(values) and values.astype(str).str.len().nunique() == 1:
        return {"builder": "mask"}  # postal codes: mask digits from the right, not intervals
    if pd.api.types.is_numeric_dtype(sample):
        span = float(values.max() - values.min()) if len(values) else 0.0
        width = next((w for w in (1, 2, 5, 10, 20, 50, 100, 1000, 10000) if span / w <= 20), 100000)
        return {"builder": "interval", "width": width}
    text = values.astype(str)
    if len(text) and text.str.match(_ISO_DATE).all():
        return {"builder": "date"}
    if len(text) and text.str.match(_DIGITS).all() and text.str.len().nunique() == 1:
        return {"builder": "mask"}
    distinct = sorted(text.unique())
    if len(distinct) <= 5:
        # Few categories: the only sensible coarsening is to suppress the value.
        return {"rows": [[v, "*"] for v in distinct]}
    # Ordered groups are only a starting point: an officer should upload a semantic hierarchy.
    return {"builder": "grouping", "group_size": max(2, len(distinct) // 8), "fanout": 2}


def _identifier_steps(dataset: Dataset, identifiers: str) -> list[dict[str, Any]]:
    if not dataset.identifiers:
        return []
    if identifiers == "tokenize":
        return [
            {"kind": "tokenize", "params": {"columns": dataset.identifiers, "key": "release-key"}}
        ]
    return [{"kind": "drop", "params": {"columns": dataset.identifiers}}]


def _dp_histogram_steps(dataset: Dataset, epsilon: float) -> list[dict[str, Any]]:
    """One DP histogram per sensitive column (quasi-identifiers if none), ε split evenly.

    Categories are not read from the data (that would leak which values occur): keys are
    selected privately with δ = 1e-6 unless the officer declares public categories instead."""
    from anonweb.core.dp.accounting import split_epsilon

    columns = dataset.sensitive or dataset.quasi_identifiers
    shares = split_epsilon(epsilon, max(1, len(columns)))
    return [
        {
            "kind": "dp_release",
            "params": {"kind": "histogram", "epsilon": share, "columns": [c], "delta": 1e-6},
        }
        for c, share in zip(columns, shares)
    ]


def _ldp_steps(
    dataset: Dataset, frame: Mapping[str, pd.Series], epsilon: float
) -> list[dict[str, Any]]:
    """Randomized response per sensitive column; numeric ones get Laplace noise within bounds.

    The suggested bounds are the column's range rounded outwards: replace them with public
    bounds (a codebook's) before release, since the true range is itself data."""
    steps = []
    for c in dataset.sensitive:
        if pd.api.types.is_numeric_dtype(frame[c]):
            lo, hi = float(frame[c].min()), float(frame[c].max())
            mag = 10 ** max(0, len(str(int(max(abs(lo), abs(hi), 1)))) - 1)
            bounds = [float(np.floor(lo / mag) * mag), float(np.ceil(hi / mag) * mag)]
            steps.append(
                {
                    "kind": "ldp_laplace",
                    "params": {"column": c, "epsilon": epsilon, "bounds": bounds},
                }
            )
        else:
            steps.append(
                {"kind": "ldp_randomized_response", "params": {"column": c, "epsilon": epsilon}}
            )
    return steps


def suggest_plan(
    dataset: Dataset,
    frame: Mapping[str, pd.Series],
    *,
    mode: str = "k_anonymity",
    k: int = 5,
    suppression: float = 0.02,
    l_diversity: int | None = None,
    identifiers: str = "drop",
    epsilon: float = 1.0,
    metric: str = "loss",
    aggregate: str | None = None,
) -> dict[str, Any]:
    """A plan for the dataset from its tags. ``frame`` maps each tagged column to its values:
    the table's columns, or (as the plan page passes) only their distinct values, which is all
    a suggestion reads (ranges, lengths, formats, categories)."""
    qis = dataset.quasi_identifiers
    plan: dict[str, Any] = {
        "version": 1,
        "quasi_identifiers": qis,
        "sensitive": dataset.sensitive,
        "hierarchies": {},
        "steps": _identifier_steps(dataset, identifiers),
    }
    if mode == "dp_histogram":
        plan["steps"] = _dp_histogram_steps(dataset, epsilon)
        return plan
    if mode == "ldp":
        plan["steps"] += _ldp_steps(dataset, frame, epsilon)
        return plan
    models = []
    if l_diversity and l_diversity > 1:
        models = [
            {"model": "distinct_l", "sensitive": sa, "l": l_diversity} for sa in dataset.sensitive
        ]
    if qis:
        from anonweb.core.search.metrics import DEFAULT_AGGREGATE

        params: dict[str, Any] = {"k": k, "suppression": suppression, "metric": metric}
        # the objective is written out, ARX's default included, so the plan explains itself
        chosen = aggregate or DEFAULT_AGGREGATE.get(metric)
        if chosen is not None:
            params["aggregate"] = chosen
        params["models"] = models
        plan["steps"].append({"kind": "optimal_generalization", "params": params})
    from anonweb.datasets.selectors import hierarchies_for

    stored = hierarchies_for(dataset=dataset)
    plan["hierarchies"] = {c: suggest_hierarchy(dataset, c, frame[c], stored=stored) for c in qis}
    return plan


def check_web_plan(plan: dict[str, Any]) -> None:
    """Plans from the web may not read files on the server: hierarchies come as rows or builders."""
    from anonweb.core.io.hierarchy_builders import hierarchy_spec_errors

    for column, spec in (plan.get("hierarchies") or {}).items():
        if isinstance(spec, str) or (isinstance(spec, dict) and "path" in spec):
            raise ParameterError(hierarchy_spec_errors(column, spec, files=False)[0])
        if isinstance(spec, dict) and "uploaded" in spec and not isinstance(spec["uploaded"], str):
            raise ParameterError(
                f"hierarchy for {column!r}: 'uploaded' names a hierarchy of the dataset by its "
                "SHA-256 (as the suggested plan writes it)"
            )


def validate_web_plan(dataset: Dataset, plan: dict[str, Any]):
    """Check a plan submitted from the page or the API against the dataset, before anything is
    queued: every step and hierarchy against its declared schema, every column against the
    dataset's columns and types, group sizes against its row count, and no file paths.

    Returns the parsed :class:`~anonweb.core.release.plan.Plan`; raises
    :class:`~anonweb.core.errors.PlanError` whose ``errors`` lists every problem."""
    from anonweb.core.errors import PlanError
    from anonweb.core.release.plan import plan_from_dict, validate_plan
    from anonweb.datasets.selectors import plan_with_hierarchies

    try:
        parsed = plan_from_dict(plan)
        check_web_plan(plan)
        # An uploaded hierarchy is named by digest; it must be one the dataset holds, and its
        # rows tell how many levels a fixed generalization may ask for.
        resolved = plan_from_dict(plan_with_hierarchies(dataset=dataset, plan=plan))
    except PlanError:
        raise
    except ParameterError as exc:
        raise PlanError([str(exc)]) from None
    validate_plan(
        resolved,
        dataset.column_names,
        types={c["name"]: c.get("dtype", "text") for c in dataset.columns},
        rows=dataset.rows,
        files=False,
    )
    return parsed


def public_plan(plan: dict[str, Any]) -> dict[str, Any]:
    """The plan as published with a release: every parameter, but hierarchy tables (which list
    the source's distinct values) and substitution codebooks summarised, and secrets only by name."""
    out = dict(plan)
    hierarchies = {}
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


def plan_privacy(plan: dict[str, Any]) -> dict[str, Any]:
    """The plan's privacy cost and accuracy preview, computed from the steps' own measurements
    without reading any data: ``{"total": {"epsilon", "delta", "local_epsilon"}, "steps": [...]}``.

    Each DP step is costed at the input distance the steps before it allow
    (:func:`anonweb.core.release.plan.plan_costs`), so one refused there is refused here."""
    from anonweb.core.release.plan import plan_costs, plan_from_dict, validate_plan

    parsed = plan_from_dict(plan)
    specs = validate_plan(parsed)
    costs = plan_costs(parsed, specs)
    total = {"epsilon": 0.0, "delta": 0.0, "local_epsilon": 0.0}
    steps = []
    for c in costs:
        for name, value in c.cost.items():
            total[name] = total.get(name, 0.0) + value
        entry: dict[str, Any] = {"step": c.step, "kind": c.kind, "cost": c.cost}
        if c.kind == "dp_release":
            from anonweb.core.dp.mechanisms import preview

            entry["preview"] = preview(parsed.steps[c.step - 1].params, distance=c.distance)
        steps.append(entry)
    return {"total": total, "steps": steps}
