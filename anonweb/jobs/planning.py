"""Release plans for a dataset: a suggested plan from its column tags, validation of a plan
submitted from the web, and its privacy cost. The public copy stored with a release is
:func:`anonweb.core.release.report.public_plan`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from anonweb.core.dp.accounting import contributions, contributions_from_counts, split_epsilon
from anonweb.core.dp.mechanisms import (
    MISSING,
    READ_FROM_DATA_KEY,
    cell_labels,
    preview,
    unconfirmed,
)
from anonweb.core.engine.base import env_engine
from anonweb.core.engine.select import in_memory_limit
from anonweb.core.errors import ParameterError, PlanError
from anonweb.core.io.hierarchy_builders import hierarchy_spec_errors
from anonweb.core.release.plan import plan_costs, plan_from_dict, validate_plan
from anonweb.core.release.steps import Plan
from anonweb.core.search.metrics import DEFAULT_AGGREGATE
from anonweb.datasets.hierarchy_suggestion import suggest_hierarchy
from anonweb.datasets.models import Dataset, DatasetStatus
from anonweb.datasets.selectors import hierarchies_for, plan_with_hierarchies
from anonweb.datasets.storage import load_value_counts


def _identifier_steps(dataset: Dataset, identifiers: str) -> list[dict[str, Any]]:
    if not dataset.identifiers:
        return []
    if identifiers == "tokenize":
        return [
            {"kind": "tokenize", "params": {"columns": dataset.identifiers, "key": "release-key"}}
        ]
    return [{"kind": "drop", "params": {"columns": dataset.identifiers}}]


EACH_ROW = ""  # the unit choice "each row is one person"


def default_unit(dataset: Dataset) -> str | None:
    """The identifier column that is unique per row, when one is tagged (a person is one of its
    values and keeps their one row); otherwise each row is one person. A non-unique identifier
    (a name) is never the default: bounding by it would drop the rows of namesakes."""
    meta = {str(c.get("name")): c for c in dataset.columns}
    for column in dataset.identifiers:
        info = meta.get(column) or {}
        if info.get("distinct") == dataset.rows and not info.get("missing"):
            return column
    return None


def unit_choices(dataset: Dataset) -> list[tuple[str, str]]:
    """The privacy units a plan may take: each tagged identifier, or each row."""
    return [(c, f"a value of {c}") for c in dataset.identifiers] + [
        (EACH_ROW, "each row is one person")
    ]


def privacy_unit(dataset: Dataset, column: str | None = None) -> dict[str, Any]:
    """Who a DP guarantee protects: a value of ``column`` (default: :func:`default_unit`), each
    keeping at most one row in a suggested plan, or each row."""
    if column != EACH_ROW and (column is None or column not in dataset.identifiers):
        column = default_unit(dataset)
    if column:
        unique = column == default_unit(dataset)
        return {
            "identifier": column,
            "text": f"a person is a value of {column!r} (the tagged identifier"
            + (", unique per row)" if unique else ")"),
        }
    return {
        "identifier": None,
        "text": "each row is a person"
        + (
            " (no column is tagged as identifier)"
            if not dataset.identifiers
            else " (no tagged identifier is unique per row)"
        ),
    }


def unit_contributions(dataset: Dataset, column: str | None, *, bound: int = 1) -> dict[str, Any]:
    """Rows per person under the unit ``column`` (a source figure, for the officer): the most
    rows one person has, how many people have each number of rows, and the rows a bound of
    ``bound`` per person drops."""
    if not column:
        return contributions(None, rows=dataset.rows, bound=bound).to_dict()
    info: dict[str, Any] = next((c for c in dataset.columns if c.get("name") == column), {})
    if info.get("distinct") == dataset.rows and not info.get("missing"):
        # one row per person, as the upload counted: nothing to read
        ones = np.ones(dataset.rows, dtype=np.int64)
        return contributions_from_counts(column, ones, bound=bound).to_dict()
    _, counts, missing = load_value_counts(dataset.storage_key, column)
    return contributions_from_counts(column, [*counts, missing], bound=bound).to_dict()


def _outward_bounds(values: pd.Series) -> list[float]:
    """The column's range rounded outwards to its order of magnitude."""
    lo, hi = float(values.min()), float(values.max())
    mag = 10 ** max(0, len(str(int(max(abs(lo), abs(hi), 1)))) - 1)
    return [float(np.floor(lo / mag) * mag), float(np.ceil(hi / mag) * mag)]


def _data_categories(values: pd.Series) -> list[str]:
    return sorted(set(cell_labels(values.dropna())))


def _dp_histogram_steps(
    dataset: Dataset, frame: Mapping[str, pd.Series], epsilon: float, unit: str | None = None
) -> list[dict[str, Any]]:
    """One DP statistic per sensitive column (quasi-identifiers if none), ε split exactly.

    Categorical columns: keys are selected privately with δ = 1e-6 (their categories are not
    read from the data, which would leak which values occur) unless the officer declares public
    categories instead. Numeric columns: counts over equal bins between bounds, so the bin edges
    are public; the suggested bounds are the data's range, marked as read from the data until
    the officer confirms them. The privacy unit is ``unit`` (a tagged identifier, or
    ``EACH_ROW``), by default :func:`default_unit`."""

    columns = dataset.sensitive or dataset.quasi_identifiers
    shares = split_epsilon(epsilon, max(1, len(columns)))
    unit = privacy_unit(dataset, unit)["identifier"] if unit != EACH_ROW else None
    person = {"identifier": unit, "max_contributions": 1} if unit else {}
    steps = []
    for c, share in zip(columns, shares):
        values = frame.get(c) if c in frame else None
        if values is not None and pd.api.types.is_numeric_dtype(values) and values.notna().any():
            params = {
                "kind": "range",
                "epsilon": share,
                "columns": [c],
                "bounds": _outward_bounds(values.dropna()),
                "bins": 10,
                READ_FROM_DATA_KEY: ["bounds"],
            }
        else:
            params = {"kind": "histogram", "epsilon": share, "columns": [c], "delta": 1e-6}
        steps.append({"kind": "dp_release", "params": {**params, **person}})
    return steps


def _ldp_steps(
    dataset: Dataset, frame: Mapping[str, pd.Series], epsilon: float
) -> list[dict[str, Any]]:
    """Randomized response per sensitive column; numeric ones get Laplace noise within bounds.

    Categories and bounds must be public. The suggestion fills them in from the data as a
    starting point (the column's values; its range rounded outwards) and marks them
    ``read_from_data``: a launch is refused until the officer has checked them against a public
    source (a codebook) and removed the mark."""

    steps = []
    missing = {str(c.get("name")): int(c.get("missing") or 0) for c in dataset.columns}
    for c in dataset.sensitive:
        values = frame[c]
        if pd.api.types.is_numeric_dtype(values) and values.notna().any():
            bounds = _outward_bounds(values.dropna())
            params = {"column": c, "epsilon": epsilon, "bounds": bounds}
            if missing.get(c):
                # a missing value left missing would be told apart from any noisy number
                params["missing_as"] = bounds[0]
            steps.append(
                {"kind": "ldp_laplace", "params": {**params, READ_FROM_DATA_KEY: ["bounds"]}}
            )
        else:
            categories = _data_categories(values)
            if missing.get(c):
                # missing is an answer of its own, declared like the others (never added by
                # the mechanism because one table has it)
                categories.append(MISSING)
            if len(categories) < 2:
                categories = categories + ["(other)"]
            params = {"column": c, "epsilon": epsilon, "categories": categories}
            steps.append(
                {
                    "kind": "ldp_randomized_response",
                    "params": {**params, READ_FROM_DATA_KEY: ["categories"]},
                }
            )
    return steps


def unconfirmed_problems(plan: Mapping[str, Any]) -> list[str]:
    """Steps whose public parameters are not confirmed: categories or bounds still marked as read
    from the data, or randomized response that would read its categories from the data when it
    runs. A launch is refused while there are any (a preview is not)."""

    problems = []
    for i, step in enumerate(plan.get("steps") or [], 1):
        if not isinstance(step, Mapping):
            continue
        params = step.get("params") or {}
        where = f"step {i} ({step.get('kind')})"
        marked = unconfirmed(params)
        if marked:
            problems.append(
                f"{where}: the {' and '.join(marked)} were read from the data: not private. Check "
                "them against a public source (a codebook, a published range), then remove "
                f"{READ_FROM_DATA_KEY!r} to confirm them"
            )
        if step.get("kind") == "ldp_randomized_response" and not params.get("categories"):
            problems.append(
                f"{where}: declare the categories; reading them from the data when the job runs "
                "is not private"
            )
    return problems


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
    unit: str | None = None,
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
        plan["steps"] = _dp_histogram_steps(dataset, frame, epsilon, unit)
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
        params: dict[str, Any] = {"k": k, "suppression": suppression, "metric": metric}
        # the objective is written out, ARX's default included, so the plan explains itself
        chosen = aggregate or DEFAULT_AGGREGATE.get(metric)
        if chosen is not None:
            params["aggregate"] = chosen
        params["models"] = models
        plan["steps"].append({"kind": "optimal_generalization", "params": params})

    stored = hierarchies_for(dataset=dataset)
    plan["hierarchies"] = {c: suggest_hierarchy(dataset, c, frame[c], stored=stored) for c in qis}
    return plan


def check_web_plan(plan: dict[str, Any]) -> None:
    """Plans from the web may not read files on the server: hierarchies come as rows or builders."""

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

    Returns the parsed :class:`~anonweb.core.release.steps.Plan`; raises
    :class:`~anonweb.core.errors.PlanError` whose ``errors`` lists every problem."""

    try:
        parsed = plan_from_dict(plan)
        check_web_plan(plan)
        # An uploaded hierarchy is named by digest; it must be one the dataset holds, and its
        # rows tell how many levels a fixed generalization may ask for.
        resolved = (
            plan_from_dict(plan_with_hierarchies(dataset=dataset, plan=plan))
            if _names_uploaded(plan)
            else parsed
        )
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
        distinct={c["name"]: c["distinct"] for c in dataset.columns if "distinct" in c},
        has_missing=frozenset(c["name"] for c in dataset.columns if c.get("missing")),
        # a table past the in-memory limit is released by an out-of-core engine
        memory_rows=in_memory_limit(),
        engine=env_engine(),
    )
    population_dataset_for(dataset, plan)
    return parsed


def population_dataset_for(dataset: Dataset, plan: Mapping[str, Any]) -> Dataset | None:
    """The dataset a plan's search names as its population (``"population_dataset": id`` on
    the search step), checked: a ready dataset of the same team holding the plan's
    quasi-identifiers. A dataset of another team is refused with the same words as one that
    does not exist, so a plan cannot probe other teams' datasets. A population-based model
    that needs a population (δ-presence; k-map without a population size) and has none is
    refused too. None when the plan names no population."""
    searches = [
        s.get("params") or {}
        for s in plan.get("steps") or []
        if isinstance(s, Mapping) and s.get("kind") == "optimal_generalization"
    ]
    named = {p["population_dataset"] for p in searches if p.get("population_dataset")}
    problems = []
    for params in searches:
        if params.get("population_dataset"):
            continue
        for spec in params.get("models") or []:
            if spec.get("model") == "delta_presence" or (
                spec.get("model") == "k_map" and spec.get("population_size") is None
            ):
                problems.append(
                    f"{_model_name(spec)} needs a population: choose the population dataset "
                    "of the search (another dataset of the team holding the same people)"
                )
    if len(named) > 1:
        problems.append("a plan's searches name one population dataset")
    if problems:
        raise PlanError(problems)
    if not named:
        return None
    wanted = named.pop()
    population = Dataset.objects.filter(
        pk=wanted, team_id=dataset.team_id, status=DatasetStatus.READY, purged_at__isnull=True
    ).first()
    if population is None:
        raise PlanError([f"population dataset {wanted}: no such dataset in this team"])
    qis = [q for q in plan.get("quasi_identifiers") or [] if q not in population.column_names]
    if qis:
        raise PlanError(
            [
                f"the population dataset {population.name!r} lacks the quasi-identifier(s) "
                f"{', '.join(map(repr, qis))}"
            ]
        )
    return population


def _model_name(spec: Mapping[str, Any]) -> str:
    return "δ-presence" if spec.get("model") == "delta_presence" else f"{spec.get('k')}-map"


def _names_uploaded(plan: Mapping[str, Any]) -> bool:
    """The plan names a hierarchy uploaded to the dataset (resolved from the database)."""
    specs = plan.get("hierarchies") or {}
    return isinstance(specs, Mapping) and any(
        isinstance(spec, Mapping) and "uploaded" in spec for spec in specs.values()
    )


def plan_privacy(plan: Plan | Mapping[str, Any]) -> dict[str, Any]:
    """The plan's privacy cost and accuracy preview, computed from the steps' own measurements
    without reading any data: ``{"total": {"epsilon", "delta", "local_epsilon"}, "steps": [...]}``.
    A plan already parsed (by :func:`validate_web_plan`) is not parsed again.

    Each DP step is costed at the input distance the steps before it allow
    (:func:`anonweb.core.release.plan.plan_costs`), so one refused there is refused here."""

    parsed = plan if isinstance(plan, Plan) else plan_from_dict(plan)
    specs = validate_plan(parsed)
    costs = plan_costs(parsed, specs)
    total = {"epsilon": 0.0, "delta": 0.0, "local_epsilon": 0.0}
    steps = []
    for c in costs:
        for name, value in c.cost.items():
            total[name] = total.get(name, 0.0) + value
        entry: dict[str, Any] = {"step": c.step, "kind": c.kind, "cost": c.cost}
        if c.kind == "dp_release":
            entry["preview"] = preview(parsed.steps[c.step - 1].params, distance=c.distance)
        steps.append(entry)
    return {"total": total, "steps": steps}
