"""Differentially private aggregate releases on OpenDP's measurement API.

A :class:`DPQuery` describes one release of a registered statistic (count, histogram/contingency
table, sum, mean, quantiles, range counts: each declared once in :mod:`anonweb.core.dp.kinds`,
whose declarations name the builders and runners below). :func:`prepare` turns it into the OpenDP measurement that will run,
with its exact cost and a 95% accuracy preview, without reading any data; :func:`release` runs
that same measurement. Noise always comes from OpenDP's samplers (exact, CSPRNG-backed, immune
to floating-point attacks); the injected ``rng`` only chooses which rows a person keeps.

Unit of privacy: a person, one row by default; neighbouring tables add or remove one person
(unbounded DP, symmetric distance). With an identifier column each person keeps at most
``max_contributions`` rows, and every map is taken at ``d_in = max_contributions``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from anonweb.core import schema as sch
from anonweb.core.dp import accounting as acc
from anonweb.core.dp.accuracy import (
    accuracy_statement,
    mean_halfwidth,
    quantile_interval,
    tree_accuracy,
)
from anonweb.core.dp.statistic import (
    OPTIONAL_PARAMETERS,
    get_statistic,
    kinds_taking,
    on_register,
    statistic_kinds,
    statistics,
)
from anonweb.core.errors import DataError, ParameterError
from anonweb.core.io.frame import require_columns
from anonweb.core.numbers import released_table, significant
from anonweb.core.release.steps import StepContext, StepOutcome, register_step

if TYPE_CHECKING:  # OpenDP loads a native library: imported late at run time
    from opendp.mod import Domain, Measurement, Metric, Transformation

MISSING = "(missing)"
COUNT_COLUMN = "noisy_count"
KEY_SEP = "\x1f"
TREE_BRANCHING = 2


@dataclass(frozen=True)
class DPQuery:
    """One DP release; every field is public (it is shown in the plan and the report)."""

    kind: str
    epsilon: float
    columns: tuple[str, ...] = ()
    categories: Mapping[str, tuple[str, ...]] | None = None
    delta: float | None = None
    bounds: tuple[float, float] | None = None
    alphas: tuple[float, ...] = (0.5,)
    bins: int = 32
    identifier: str | None = None
    max_contributions: int = 1
    count_missing: bool = True

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> DPQuery:
        """Validate plan parameters; raises :class:`ParameterError` before any data is read."""
        known = {f for f in cls.__dataclass_fields__} | {READ_FROM_DATA_KEY}
        unknown = set(params) - known
        if unknown:
            raise ParameterError(f"unknown DP parameter(s): {', '.join(sorted(unknown))}")
        kind = params.get("kind")
        statistic = get_statistic(kind)
        columns = params.get("columns") or ()
        columns = (columns,) if isinstance(columns, str) else tuple(str(c) for c in columns)
        need = statistic.columns
        if need is None and not columns:
            raise ParameterError(f"a {kind} needs at least one column")
        if need is not None and len(columns) != need:
            raise ParameterError(f"a DP {kind} takes {'no column' if need == 0 else 'one column'}")
        identifier, c = acc.check_contributions(
            params.get("identifier"), params.get("max_contributions", 1)
        )
        query = cls(
            kind=statistic.kind,
            epsilon=acc.check_epsilon(params.get("epsilon")),
            columns=columns,
            categories=acc.check_categories(params.get("categories"), columns)
            if "categories" in statistic.parameters
            else None,
            delta=None if params.get("delta") is None else acc.check_delta(params["delta"]),
            bounds=acc.check_bounds(params.get("bounds"), what=f"a DP {kind}")
            if "bounds" in statistic.parameters
            else None,
            alphas=acc.check_alphas(params.get("alphas", (0.5,))),
            bins=acc.check_bins(params.get("bins", 32)),
            identifier=identifier,
            max_contributions=c,
            count_missing=bool(params.get("count_missing", True)),
        )
        if statistic.check is not None:
            statistic.check(query)
        return query

    def to_params(self) -> dict[str, Any]:
        out = asdict(self)
        out["columns"] = list(self.columns)
        if self.categories is not None:
            out["categories"] = {k: list(v) for k, v in self.categories.items()}
        out["bounds"] = list(self.bounds) if self.bounds else None
        out["alphas"] = list(self.alphas)
        return out


def cell_labels(values: pd.Series) -> pd.Series:
    """Values as category labels: integral floats without ``.0``, missing as ``(missing)``."""

    def label(v: Any) -> str:
        if isinstance(v, float) and v.is_integer():
            return str(int(v))
        return str(v).strip()

    return values.map(label, na_action="ignore").fillna(MISSING).astype(str)


def categories_from_frame(frame: pd.DataFrame, columns: list[str]) -> dict[str, tuple[str, ...]]:
    """Declared categories from a table: each column's distinct non-empty values, in file order."""
    require_columns(frame, columns, role="categories column")
    out = {}
    for col in columns:
        labels = cell_labels(frame[col].dropna())
        out[col] = tuple(dict.fromkeys(labels))
    return out


@dataclass
class Prepared:
    """The measurement to run, with its cost and accuracy; built without data."""

    query: DPQuery
    measurement: Any
    scale: float
    epsilon: float
    delta: float
    ci95: dict[str, float]
    detail: dict[str, Any] = field(default_factory=dict)
    # Rows of the input one person can change: the contribution bound times the distance the
    # steps before this one allow (1 after row-wise steps). The cost is the map at this d_in.
    d_in: int = 1

    def cost(self) -> dict[str, float]:
        return {"epsilon": self.epsilon, "delta": self.delta}

    def preview(self) -> dict[str, Any]:
        out = self._figures()
        out["accuracy"] = accuracy_statement(out)
        return out

    def _figures(self) -> dict[str, Any]:
        q = self.query
        first = next(iter(self.ci95.values()), None)
        return {
            "kind": q.kind,
            "columns": list(q.columns),
            "epsilon_requested": q.epsilon,
            "epsilon_spent": self.epsilon,
            "delta_spent": self.delta,
            "ci95_halfwidth": first if len(self.ci95) == 1 else dict(self.ci95),
            "noise": {"mechanism": self.detail.get("mechanism", "laplace"), "scale": self.scale},
            "unit_of_privacy": acc.unit_of_privacy(q.identifier, q.max_contributions, self.d_in),
            **{k: v for k, v in self.detail.items() if k != "mechanism"},
        }


def prepare(query: DPQuery, *, distance: int = 1) -> Prepared:
    """Build the OpenDP measurement for ``query`` and compute its exact cost from its map.

    The noise is calibrated for one person (``max_contributions`` rows); the cost is the map at
    ``max_contributions * distance``, where ``distance`` is how many rows per row of theirs one
    person can change in this step's input (1 after row-wise steps). OpenDP's refusals become
    :class:`ParameterError` messages."""
    if not isinstance(distance, int) or distance < 1:
        raise ParameterError(f"the input distance must be a whole number ≥ 1, not {distance!r}")
    d_in = query.max_contributions * distance
    with acc.opendp_errors():
        prepared: Prepared = get_statistic(query.kind).build(query, d_in)
        return prepared


def preview(query: DPQuery | Mapping[str, Any], *, distance: int = 1) -> dict[str, Any]:
    """Cost and 95% accuracy, before spending anything (no data needed)."""
    q = query if isinstance(query, DPQuery) else DPQuery.from_params(query)
    return prepare(q, distance=distance).preview()


@dataclass(frozen=True)
class DPRelease:
    table: pd.DataFrame
    report: dict[str, Any]


def release(
    df: pd.DataFrame, query: DPQuery, *, rng: np.random.Generator, distance: int = 1
) -> DPRelease:
    """Run the prepared measurement on ``df`` (never mutated) and report what it cost."""
    columns = list(query.columns) + ([query.identifier] if query.identifier else [])
    require_columns(df, columns)
    prepared = prepare(query, distance=distance)
    data = acc.bound_contributions(
        df, identifier=query.identifier, max_contributions=query.max_contributions, rng=rng
    )
    with acc.opendp_errors(DataError):
        table, extra = get_statistic(query.kind).run(prepared, data)
    table = released_table(table, keep=("bin_lo", "bin_hi", "alpha"))
    report = prepared.preview() | extra | {"rows_out": len(table)}
    report["accuracy"] = accuracy_statement(report)  # with what only the release knows (a mean)
    if query.identifier is not None:
        # a source figure: the internal report keeps it, the published one leaves it out
        bounded = acc.contributions(df[query.identifier], bound=query.max_contributions)
        report["contribution_bounding"] = bounded.to_dict()
    return DPRelease(table=table, report=report)


def histogram_keys(df: pd.DataFrame, query: DPQuery) -> list[str]:
    """One key per row (columns joined); refuses values outside the declared categories."""
    labels = [cell_labels(df[c]) for c in query.columns]
    if query.categories is not None:
        for col, lab in zip(query.columns, labels):
            allowed = set(query.categories[col]) | ({MISSING} if query.count_missing else set())
            outside = sorted(set(lab.unique()) - allowed)
            if outside == [MISSING]:
                raise DataError(
                    f"column {col!r} has missing values: count them as a category "
                    "(count_missing) or drop those rows first"
                )
            if outside:
                shown = ", ".join(repr(v) for v in outside[:5])
                raise DataError(
                    f"column {col!r} has {len(outside)} value(s) outside the declared categories "
                    f"(e.g. {shown})"
                )
    if len(labels) == 1:
        keys: list[str] = labels[0].tolist()
        return keys
    return [KEY_SEP.join(parts) for parts in zip(*labels)]


def histogram_cells(query: DPQuery) -> list[str]:
    """Every declared cell, missing included: the set is public, so its size leaks nothing."""
    assert query.categories is not None
    extra = [MISSING] if query.count_missing else []
    per_column = [list(query.categories[c]) + extra for c in query.columns]
    return [KEY_SEP.join(parts) for parts in itertools.product(*per_column)]


def split_keys(keys: list[str], columns: tuple[str, ...]) -> pd.DataFrame:
    parts = [k.split(KEY_SEP) for k in keys]
    return (
        pd.DataFrame(parts, columns=list(columns)) if parts else pd.DataFrame(columns=list(columns))
    )


def numeric_values(df: pd.DataFrame, column: str) -> list[float]:
    """The column as floats; missing rows drop out (a row filter leaves the sensitivity as is)."""
    values = pd.to_numeric(df[column], errors="coerce")
    if values.isna().sum() > df[column].isna().sum():
        raise DataError(f"column {column!r} is not numeric")
    out = values.dropna().astype(float).tolist()
    return [v for v in out if math.isfinite(v)]


# -- measurements (built without data) -------------------------------------------------------


def space(atom: type) -> tuple[Domain, Metric]:
    dp = acc.opendp()
    domain = dp.atom_domain(T=float, nan=False) if atom is float else dp.atom_domain(T=atom)
    return dp.vector_domain(domain), dp.symmetric_distance()


def noisy(
    q: DPQuery,
    pre: Transformation,
    d_in: int,
    *,
    integer: bool,
    stats: list[str],
    detail: Mapping[str, Any] | None = None,
) -> Prepared:
    """``pre`` followed by Laplace noise calibrated so that the whole chain spends ``q.epsilon``
    for one person; the cost is its map at ``d_in``."""
    dp = acc.opendp()
    c = q.max_contributions
    meas, scale = acc.calibrate(
        lambda s: pre >> dp.m.then_laplace(scale=s),
        # OpenDP 0.16 leaves Transformation.map unannotated
        sensitivity=float(pre.map(c)),  # type: ignore[no-untyped-call]
        d_in=c,
        epsilon=q.epsilon,
    )
    eps, delta = acc.epsilon_of(meas, d_in)
    halfwidth = acc.laplace_ci95(scale, integer=integer)
    ci95 = {s: halfwidth for s in stats}
    return Prepared(q, meas, scale, eps, delta, ci95, dict(detail or {}), d_in)


def build_count(q: DPQuery, d_in: int) -> Prepared:
    dp = acc.opendp()
    return noisy(q, space(str) >> dp.t.then_count(), d_in, integer=True, stats=["count"])


def build_histogram(q: DPQuery, d_in: int) -> Prepared:
    dp = acc.opendp()
    if q.categories is None:
        return _selected_histogram(q, d_in)
    cells = histogram_cells(q)
    pre = space(str) >> dp.t.then_count_by_categories(categories=cells, null_category=False)
    detail = {"categories": "declared", "cells": len(cells)}
    return noisy(q, pre, d_in, integer=True, stats=["count per cell"], detail=detail)


def _selected_histogram(q: DPQuery, d_in: int) -> Prepared:
    """Unknown categories: only keys whose noisy count reaches a threshold are released (δ).

    OpenDP 0.16 releases noisy counts *at or above* its threshold while its δ map counts only the
    noise *above* it (OpenDP issue 2922), so its δ is understated (declared 0.05 gave a measured
    release rate of 0.10). The threshold here is chosen, and δ reported, by
    :func:`accounting.selection_delta`: the exact probability that the keys one person holds
    alone are released, whatever the way they spread their rows over keys."""
    dp = acc.opendp()
    target = float(q.delta or 0.0)
    pre = space(str) >> dp.t.then_count_by()

    def build(scale: float, threshold: int = 2**30) -> Measurement:
        meas: Measurement = pre >> dp.m.then_laplace_threshold(scale=scale, threshold=threshold)
        return meas

    c = q.max_contributions
    meas, scale = acc.calibrate(build, sensitivity=float(c), d_in=c, epsilon=q.epsilon)
    threshold = acc.selection_threshold(scale=scale, d_in=d_in, delta=target)
    meas = build(scale, threshold)
    eps = acc.epsilon_of(meas, d_in)[0]
    delta = acc.selection_delta(threshold=threshold, scale=scale, d_in=d_in)
    detail = {
        "mechanism": "laplace with threshold",
        "categories": "selected privately",
        "threshold": threshold,
        "suppressed_keys": "keys below the threshold are not released",
    }
    halfwidth = acc.laplace_ci95(scale, integer=True)
    return Prepared(q, meas, scale, eps, delta, {"count per cell": halfwidth}, detail, d_in)


def build_sum(q: DPQuery, d_in: int) -> Prepared:
    dp = acc.opendp()
    pre = space(float) >> dp.t.then_clamp(q.bounds) >> dp.t.then_sum()
    detail = {"bounds": list(q.bounds or ())}
    return noisy(q, pre, d_in, integer=False, stats=["sum"], detail=detail)


def build_mean(q: DPQuery, d_in: int) -> Prepared:
    """Noisy sum over noisy count, ε split evenly: the size stays private (unbounded DP)."""
    dp = acc.opendp()
    half = replace(q, epsilon=q.epsilon / 2)
    total = build_sum(half, d_in)
    count = noisy(half, space(float) >> dp.t.then_count(), d_in, integer=True, stats=["count"])
    meas = dp.c.make_composition([total.measurement, count.measurement])
    eps, delta = acc.epsilon_of(meas, d_in)
    ci95 = {"sum": total.ci95["sum"], "count": count.ci95["count"]}
    detail = {"bounds": list(q.bounds or ()), "count_scale": count.scale}
    return Prepared(q, meas, total.scale, eps, delta, ci95, detail, d_in)


def build_tree(q: DPQuery, d_in: int) -> Prepared:
    """Binned counts of an ordered column in a b-ary tree, each node with Laplace noise."""
    dp = acc.opendp()
    lo, hi = q.bounds or (0.0, 1.0)
    edges = range_edges(q)
    b = TREE_BRANCHING  # the binary tree: any range is a union of at most 2 nodes per level
    pre = (
        space(float)
        >> dp.t.then_clamp((lo, hi))
        >> dp.t.then_find_bin(edges=edges[1:-1])
        >> dp.t.then_count_by_categories(categories=list(range(q.bins)), null_category=False)
        >> dp.t.then_b_ary_tree(leaf_count=q.bins, branching_factor=b)
    )
    depth = int(pre.map(1))
    detail = {"bins": q.bins, "bounds": [lo, hi], "branching_factor": b, "tree_depth": depth}
    if "alphas" in get_statistic(q.kind).parameters:
        detail["alphas"] = list(q.alphas)
    prepared = noisy(q, pre, d_in, integer=True, stats=["count per bin"], detail=detail)
    # Each bin and cumulative count is a linear combination of the nodes' noise after the
    # consistency step: its accuracy is that combination's, not one node's (or a sum of them).
    tree = tree_accuracy(q.bins, b, prepared.scale, depth)
    prepared.ci95 = {"count per bin": tree.per_bin}
    prepared.detail["cumulative_ci95_halfwidth"] = list(tree.cumulative)
    prepared.detail["accuracy_method"] = tree.method
    prepared.detail["bin_width"] = (hi - lo) / q.bins
    prepared.detail["edges"] = edges
    return prepared


def range_edges(q: DPQuery) -> list[float]:
    """The public bin edges: equal widths between the bounds, written as people write them
    (``5.7``, not linspace's ``5.699999999999999``)."""
    lo, hi = q.bounds or (0.0, 1.0)
    return [float(f"{e:.12g}") for e in np.linspace(lo, hi, q.bins + 1)]


def released_columns(query: DPQuery) -> list[str]:
    """The columns of the table :func:`release` returns for ``query`` (known without data)."""
    return get_statistic(query.kind).output_columns(query)


# -- running the measurements (the data are read here only) ----------------------------------


def run_count(prepared: Prepared, data: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    return pd.DataFrame({COUNT_COLUMN: [int(prepared.measurement([""] * len(data)))]}), {}


def run_histogram(prepared: Prepared, data: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    q, meas = prepared.query, prepared.measurement
    keys = histogram_keys(data, q)
    if q.categories is not None:
        cells = histogram_cells(q)
        return split_keys(cells, q.columns).assign(**{COUNT_COLUMN: meas(keys)}), {}
    released = dict(sorted(meas(keys).items()))
    table = split_keys(list(released), q.columns).assign(**{COUNT_COLUMN: list(released.values())})
    return table, {}


def run_sum(prepared: Prepared, data: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    column = prepared.query.columns[0]
    total = float(prepared.measurement(numeric_values(data, column)))
    return pd.DataFrame({"column": [column], "noisy_sum": [total]}), {}


def run_mean(prepared: Prepared, data: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    return _finish_mean(
        prepared, prepared.measurement(numeric_values(data, prepared.query.columns[0]))
    )


def run_quantile(prepared: Prepared, data: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    values = prepared.measurement(numeric_values(data, prepared.query.columns[0]))
    return _finish_quantile(prepared, _consistent_leaves(prepared, values))


def run_range(prepared: Prepared, data: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    values = prepared.measurement(numeric_values(data, prepared.query.columns[0]))
    edges = prepared.detail["edges"]
    leaves = _consistent_leaves(prepared, values)
    # The consistent estimates as they are (a few may be below 0): the stated intervals are
    # those of these linear estimates, and the cumulative counts are their running sums.
    table = pd.DataFrame({"bin_lo": edges[:-1], "bin_hi": edges[1:], COUNT_COLUMN: leaves})
    table["noisy_cumulative"] = np.cumsum(leaves)
    return table, {}


def _finish_mean(prepared: Prepared, noisy: list[Any]) -> tuple[pd.DataFrame, dict[str, Any]]:
    lo, hi = prepared.query.bounds or (0.0, 0.0)
    total, count = float(noisy[0]), int(noisy[1])
    mean = min(max(total / max(count, 1), lo), hi)  # post-processing: clamp into the bounds
    table = pd.DataFrame(
        {
            "column": [prepared.query.columns[0]],
            "noisy_mean": [mean],
            "noisy_sum": [total],
            "noisy_count": [count],
        }
    )
    half = mean_halfwidth(
        sum_scale=prepared.scale,
        count_scale=float(prepared.detail["count_scale"]),
        mean=mean,
        count=count,
    )
    return table, {"mean_ci95_halfwidth_approx": half}


def _consistent_leaves(prepared: Prepared, noisy_tree: list[Any]) -> list[float]:
    dp = acc.opendp()
    b = prepared.detail["branching_factor"]
    leaves = [float(v) for v in dp.t.make_consistent_b_ary_tree(branching_factor=b)(noisy_tree)]
    return leaves[: prepared.query.bins]


def _finish_quantile(
    prepared: Prepared, leaves: list[float]
) -> tuple[pd.DataFrame, dict[str, Any]]:
    dp = acc.opendp()
    q, edges = prepared.query, prepared.detail["edges"]
    b = prepared.detail["branching_factor"]
    fn = dp.t.make_quantiles_from_counts(
        edges, alphas=list(q.alphas), interpolation="linear", TA=float
    )
    # The consistent estimates as they are: setting those below 0 to 0 would add the noise
    # of every empty bin to the total and shift every quantile (a 32-bin median's 95%
    # interval then held the truth in 60% of runs).
    counts = leaves
    values = fn(counts) if sum(counts) > 0 else [float("nan")] * len(q.alphas)
    table = pd.DataFrame({"alpha": list(q.alphas), "quantile": [float(v) for v in values]})
    intervals = [
        [
            significant(v)
            for v in quantile_interval(edges, counts, a, branching=b, scale=prepared.scale)
        ]
        for a in q.alphas
    ]
    return table, {"quantile_ci95": intervals}


# -- plan steps ------------------------------------------------------------------------------


MAX_EPSILON = 100.0  # beyond this a DP guarantee says nothing; larger values are typos
EPSILON = sch.number(
    "Privacy-loss budget of this statistic", exclusive_minimum=0, maximum=MAX_EPSILON
)
DELTA = sch.number(
    "Probability that the ε guarantee fails", exclusive_minimum=0, exclusive_maximum=1
)
BOUNDS = sch.one_of(
    sch.array(sch.number(minimum=-1e15, maximum=1e15), min_items=2, max_items=2),
    sch.string(min_length=3, max_length=100),
    description="Public clamping bounds [lo, hi] (never read off the data)",
)
CATEGORY = sch.one_of(sch.string(max_length=None), sch.number(), sch.boolean())
# A suggestion may fill in categories or bounds from the data as a starting point; it names them
# here. They are not private (which values occur, the true range, are data), so a launch is
# refused until the officer has checked them against a public source and removed this entry.
READ_FROM_DATA_KEY = "read_from_data"
READ_FROM_DATA = sch.array(
    sch.string(enum=("categories", "bounds")),
    "Parameters read from the data: not private. Remove once checked against a public source",
    min_items=0,
    max_items=2,
    unique=True,
)


def unconfirmed(params: Mapping[str, Any]) -> list[str]:
    """The parameters a step still marks as read from the data (refused at launch)."""
    value = params.get(READ_FROM_DATA_KEY) if isinstance(params, Mapping) else None
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value] if isinstance(value, (list, tuple)) else []


def _for_kinds(schema: sch.Schema, *kinds: str) -> sch.Schema:
    """A parameter that only these statistics take: forms show it for them alone (a count
    takes no column, so its form offers none)."""
    return {**schema, "x-when": {"kind": list(kinds)}}


# Each optional parameter's schema; the statistics that take it come from their declarations.
_OPTIONAL_SCHEMAS: dict[str, sch.Schema] = {
    "categories": sch.mapping(
        sch.array(CATEGORY, min_items=1, max_items=1_000_000),
        "Public categories per histogram column",
        keys="reads",
    ),
    "delta": DELTA,
    "bounds": BOUNDS,
    "alphas": sch.one_of(
        sch.number(minimum=0, maximum=1),
        sch.array(sch.number(minimum=0, maximum=1), min_items=1, max_items=1000),
        description="Quantile levels",
    ),
    "bins": sch.integer("Bins over the bounds", minimum=2, maximum=100_000, default=32),
}
assert set(_OPTIONAL_SCHEMAS) == set(OPTIONAL_PARAMETERS)


def dp_release_schema() -> sch.Schema:
    """The ``dp_release`` step's parameters, for the statistics registered now."""
    optional = {
        name: _for_kinds(_OPTIONAL_SCHEMAS[name], *kinds_taking(name))
        for name in OPTIONAL_PARAMETERS
    }
    return sch.obj(
        {
            # the unit first, as OpenDP's DP Wizard asks for it: every figure below depends on it
            "identifier": sch.column(
                "The privacy unit: the column identifying a person (none: each row is a person)"
            ),
            "max_contributions": sch.integer(
                "Most rows kept per person (the rest are dropped before counting)",
                minimum=1,
                maximum=1_000_000,
                default=1,
            ),
            "kind": sch.string("The statistic", enum=statistic_kinds()),
            "epsilon": EPSILON,
            "columns": _for_kinds(
                sch.one_of(
                    sch.column(), sch.columns(role="reads"), description="The column(s) it is about"
                ),
                *kinds_taking("columns"),
            ),
            **optional,
            "count_missing": sch.boolean("Count missing values as a category", default=True),
            READ_FROM_DATA_KEY: READ_FROM_DATA,
        },
        required=["kind", "epsilon"],
        labels={
            "kind": "Statistic",
            "epsilon": "Total ε for this statistic",
            "columns": "Column(s)",
            "categories": "Public categories",
            "delta": "δ (failure probability)",
            "bounds": "Public bounds [low, high]",
            "alphas": "Quantile levels",
            "bins": "Bins",
            "identifier": "Person column (unit of privacy)",
            "max_contributions": "Most rows per person",
            "count_missing": "Count missing values as a category",
            "read_from_data": "Read from the data (not private)",
        },
        title="Differentially private statistic",
    )


# A DP step's report holds the query's public parameters, its cost and accuracy: all computed
# without data, except rows_out, the number of released cells (the released table shows it).
DP_PUBLIC_REPORT = (
    "kind",
    "columns",
    "accuracy",
    "epsilon_requested",
    "epsilon_spent",
    "delta_spent",
    "ci95_halfwidth",
    "noise",
    "unit_of_privacy",
    "categories",
    "cells",
    "threshold",
    "suppressed_keys",
    "mechanism",
    "bins",
    "bounds",
    "branching_factor",
    "tree_depth",
    "alphas",
    "cumulative_ci95_halfwidth",
    "accuracy_method",
    "bin_width",
    "edges",
    "count_scale",
    "mean_ci95_halfwidth_approx",
    "quantile_ci95",
    "rows_out",
)


def _register() -> None:
    def validate(params: Mapping[str, Any]) -> None:
        prepare(DPQuery.from_params(params))

    def cost(params: Mapping[str, Any], distance: int = 1) -> dict[str, float]:
        return prepare(DPQuery.from_params(params), distance=distance).cost()

    def columns(params: Mapping[str, Any]) -> list[str]:
        q = DPQuery.from_params(params)
        return list(q.columns) + ([q.identifier] if q.identifier else [])

    def output_columns(params: Mapping[str, Any]) -> list[str]:
        return released_columns(DPQuery.from_params(params))

    extra = [k for s in statistics() for k in s.report_keys if k not in DP_PUBLIC_REPORT]

    @register_step(
        "dp_release",
        validate=validate,
        privacy_cost=cost,
        columns=columns,
        output_columns=output_columns,
        measurement=True,
        schema=dp_release_schema(),
        output="aggregate",
        public_report=DP_PUBLIC_REPORT + tuple(dict.fromkeys(extra)),
    )
    def dp_release_step(
        df: pd.DataFrame, params: Mapping[str, Any], ctx: StepContext
    ) -> StepOutcome:
        result = release(df, DPQuery.from_params(params), rng=ctx.rng, distance=ctx.distance)
        return StepOutcome(frame=result.table, report=result.report)


# The step is registered again whenever a statistic is, so its schema lists every statistic.
on_register(_register)
