"""Perturbation steps. Randomness only from the plan's ``rng``; seeds never reach a report.

The row-wise ones (``add_noise`` with ``sd``, ``multiplicative_noise``, ``pram`` with a
``matrix``) draw each row's value from the row's position and a seed drawn from the plan's
``rng`` (:mod:`anonweb.core.transforms.rowdraws`), so the DuckDB engine, which streams a large
table through them a part at a time, writes exactly the values the in-memory run writes for the
same seed.

Every parameter is reported (Domingo-Ferrer: publish every parameter but the seeds), so users of
a release can account for the noise.

* ``add_noise`` — ``{"columns": [...], "scale": 0.1}``: Gaussian noise with standard deviation
  ``scale`` x the column's standard deviation (or ``"sd": 2.5`` in the column's units).
* ``multiplicative_noise`` — ``{"columns": [...], "scale": 0.05}``: x * (1 + N(0, scale)).
* ``rank_swap`` — ``{"columns": [...], "p": 5}``: each value swapped with another whose rank is
  at most p % of the rows away (Moore 1996), column by column.
* ``microaggregation`` — ``{"columns": [...], "k": 5}``: MDAV groups of at least k records on
  the standardized columns, each value replaced by its group mean.
* ``pram`` — ``{"column": "x", "matrix": {"a": {"a": 0.8, "b": 0.2}, "b": {"b": 1.0}}}`` or
  ``{"column": "x", "p_keep": 0.8}`` (otherwise uniform over the other categories).
* ``shuffle`` — ``{"columns": [...]}``: the columns' values permuted together across rows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core import schema as sch
from anonweb.core.errors import DataError, ParameterError
from anonweb.core.release.steps import (
    IN_MEMORY,
    ROW_ENGINES,
    ROW_WISE,
    UNBOUNDED,
    Plan,
    PlanContext,
    StepContext,
    StepOutcome,
    register_step,
    size_problems,
)
from anonweb.core.transforms.mask import _columns
from anonweb.core.transforms.rowdraws import positions, row_normals, row_seed, row_uniforms


def _numeric(df: pd.DataFrame, col: str) -> NDArray[Any]:
    values = pd.to_numeric(df[col], errors="coerce")
    bad = values.isna() & df[col].notna()
    if bad.any():
        raise DataError(f"column {col!r} is not numeric ({int(bad.sum())} non-numeric value(s))")
    return np.asarray(values.to_numpy(dtype=float))


def _positive(params: Mapping[str, Any], name: str, *, upper: float | None = None) -> None:
    value = params.get(name)
    if not isinstance(value, int | float) or value <= 0 or (upper is not None and value > upper):
        bound = f" and at most {upper}" if upper is not None else ""
        raise ParameterError(f"'{name}' must be a positive number{bound}, got {value!r}")


def _check_noise(params: Mapping[str, Any]) -> None:
    _columns(params)
    if ("scale" in params) == ("sd" in params):
        raise ParameterError("give either 'scale' (relative to the column's sd) or 'sd'")
    _positive(params, "scale" if "scale" in params else "sd")


NUMERIC = sch.columns("Numeric columns to perturb", numeric=True)
NOISE_PUBLIC = ("columns", "scale", "sd", "p", "k", "noise_sd")


def _noise_stability(params: Mapping[str, Any], plan: Plan) -> int | None:
    # A "scale" is relative to the column's standard deviation, which every row moves.
    return ROW_WISE if "sd" in params else UNBOUNDED


@register_step(
    "add_noise",
    validate=_check_noise,
    stability=_noise_stability,
    schema=sch.obj(
        {
            "columns": NUMERIC,
            "scale": sch.number(
                "Noise sd as a multiple of the column's sd", exclusive_minimum=0, maximum=100
            ),
            "sd": sch.number("Noise sd in the column's units", exclusive_minimum=0, maximum=1e15),
        },
        required=["columns"],
        exactly_one=[["scale"], ["sd"]],
        labels={
            "columns": "Columns",
            "scale": "Noise, relative to the column's spread",
            "sd": "Noise standard deviation (column units)",
        },
        title="Add Gaussian noise",
    ),
    perturbs=True,
    public_report=NOISE_PUBLIC,
    # a "scale" needs the column's standard deviation over every row first
    engines=lambda params: ROW_ENGINES if "sd" in params else IN_MEMORY,
)
def add_noise(df: pd.DataFrame, params: Mapping[str, Any], ctx: StepContext) -> StepOutcome:
    out, used = df.copy(), {}
    seed, rows = row_seed(ctx), positions(ctx, len(df))
    for stream, col in enumerate(params["columns"]):
        x = _numeric(df, col)
        sd = float(params["sd"]) if "sd" in params else float(params["scale"]) * float(np.nanstd(x))
        out[col] = x + sd * row_normals(seed, rows, stream) if sd > 0 else x
        used[col] = sd
    return StepOutcome(out, {"noise_sd": used, **_public(params)})


def _check_mult(params: Mapping[str, Any]) -> None:
    _columns(params)
    _positive(params, "scale")


@register_step(
    "multiplicative_noise",
    validate=_check_mult,
    stability=ROW_WISE,
    schema=sch.obj(
        {
            "columns": NUMERIC,
            "scale": sch.number(
                "sd of the factor 1 + N(0, scale)", exclusive_minimum=0, maximum=10
            ),
        },
        required=["columns", "scale"],
        labels={
            "columns": "Columns",
            "scale": "Noise factor spread",
        },
        title="Multiplicative noise",
    ),
    perturbs=True,
    public_report=NOISE_PUBLIC,
    engines=ROW_ENGINES,
)
def multiplicative_noise(
    df: pd.DataFrame, params: Mapping[str, Any], ctx: StepContext
) -> StepOutcome:
    out = df.copy()
    seed, rows = row_seed(ctx), positions(ctx, len(df))
    scale = float(params["scale"])
    for stream, col in enumerate(params["columns"]):
        x = _numeric(df, col)
        out[col] = x * (1.0 + scale * row_normals(seed, rows, stream))
    return StepOutcome(out, _public(params))


def _check_swap(params: Mapping[str, Any]) -> None:
    _columns(params)
    _positive(params, "p", upper=100)


def rank_swap_values(x: NDArray[Any], p: float, rng: np.random.Generator) -> NDArray[Any]:
    """Swap each value with one at most ``p`` % of the rows away in rank (missing values stay)."""
    idx = np.flatnonzero(~np.isnan(x))
    order = idx[np.argsort(x[idx], kind="stable")]
    n = len(order)
    window = int(np.floor(p / 100.0 * n))
    values = x[order].copy()
    swapped = np.zeros(n, dtype=bool)
    for i in range(n):
        if swapped[i]:
            continue
        hi = min(i + window, n - 1)
        free = np.flatnonzero(~swapped[i + 1 : hi + 1]) + i + 1
        if len(free) == 0:
            continue
        j = int(free[rng.integers(len(free))])
        values[i], values[j] = values[j], values[i]
        swapped[i] = swapped[j] = True
    out = x.copy()
    out[order] = values
    return out


@register_step(
    "rank_swap",
    validate=_check_swap,
    stability=UNBOUNDED,
    schema=sch.obj(
        {
            "columns": NUMERIC,
            "p": sch.number(
                "Largest rank distance of a swap, in % of the rows",
                exclusive_minimum=0,
                maximum=100,
            ),
        },
        required=["columns", "p"],
        labels={
            "columns": "Columns",
            "p": "Swap distance (% of rows)",
        },
        title="Rank swapping",
    ),
    keeps_values=True,
    perturbs=True,
    public_report=NOISE_PUBLIC,
)
def rank_swap(df: pd.DataFrame, params: Mapping[str, Any], ctx: StepContext) -> StepOutcome:
    out = df.copy()
    for col in params["columns"]:
        out[col] = rank_swap_values(_numeric(df, col), float(params["p"]), ctx.rng)
    return StepOutcome(out, _public(params))


def _check_mdav(params: Mapping[str, Any]) -> None:
    _columns(params)
    k = params.get("k")
    if not isinstance(k, int) or k < 2:
        raise ParameterError(f"'k' must be an integer >= 2, got {k!r}")


def mdav_groups(x: NDArray[Any], k: int) -> NDArray[Any]:
    """Group label per row by MDAV (Domingo-Ferrer & Mateo-Sanz 2002); every group has >= k rows."""
    n = len(x)
    if n < k:
        raise ParameterError(f"microaggregation needs at least k={k} rows, the table has {n}")
    labels = np.full(n, -1, dtype=np.int64)
    remaining = np.arange(n)
    group = 0

    def take(anchor_row: int) -> None:
        nonlocal remaining, group
        d = ((x[remaining] - x[anchor_row]) ** 2).sum(axis=1)
        nearest = np.argpartition(d, k - 1)[:k]
        labels[remaining[nearest]] = group
        group += 1
        remaining = np.delete(remaining, nearest)

    while len(remaining) >= 3 * k:
        centroid = x[remaining].mean(axis=0)
        r = remaining[np.argmax(((x[remaining] - centroid) ** 2).sum(axis=1))]
        take(r)
        s = remaining[np.argmax(((x[remaining] - x[r]) ** 2).sum(axis=1))]
        take(s)
    if len(remaining) >= 2 * k:
        centroid = x[remaining].mean(axis=0)
        take(remaining[np.argmax(((x[remaining] - centroid) ** 2).sum(axis=1))])
    labels[remaining] = group
    return labels


def _mdav_plan(params: Mapping[str, Any], ctx: PlanContext) -> list[str]:
    problems = size_problems(params["k"], ctx)
    gaps = [c for c in params["columns"] if c in ctx.has_missing]
    if gaps:
        problems.append(
            f"{', '.join(map(repr, gaps))} {'has' if len(gaps) == 1 else 'have'} missing values, "
            "and microaggregation needs a value in every row: leave "
            f"{'it' if len(gaps) == 1 else 'them'} out of this step (noise and swapping leave "
            "missing values as they are)"
        )
    return problems


@register_step(
    "microaggregation",
    validate=_check_mdav,
    stability=UNBOUNDED,
    schema=sch.obj(
        {
            "columns": NUMERIC,
            "k": sch.integer("Smallest group size", minimum=2, maximum=sch.MAX_K),
        },
        required=["columns", "k"],
        labels={
            "columns": "Columns",
            "k": "Smallest group size",
        },
        title="Microaggregation (MDAV)",
    ),
    plan_check=_mdav_plan,
    perturbs=True,
    public_report=(*NOISE_PUBLIC, "groups", "smallest_group"),
)
def microaggregation(df: pd.DataFrame, params: Mapping[str, Any], ctx: StepContext) -> StepOutcome:
    cols = params["columns"]
    raw = np.column_stack([_numeric(df, c) for c in cols])
    if np.isnan(raw).any():
        raise DataError("microaggregation needs complete numeric columns (missing values found)")
    sd = raw.std(axis=0)
    z = (raw - raw.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    labels = mdav_groups(z, params["k"])
    means = pd.DataFrame(raw, columns=cols).groupby(labels).transform("mean")
    out = df.copy()
    for c in cols:
        out[c] = means[c].to_numpy()
    sizes = np.bincount(labels)
    return StepOutcome(
        out, {**_public(params), "groups": int(len(sizes)), "smallest_group": int(sizes.min())}
    )


def _check_pram(params: Mapping[str, Any]) -> None:
    if not isinstance(params.get("column"), str):
        raise ParameterError("'column' must name the column to perturb")
    if ("matrix" in params) == ("p_keep" in params):
        raise ParameterError("give either a transition 'matrix' or 'p_keep'")
    if "p_keep" in params:
        p = params["p_keep"]
        if not isinstance(p, int | float) or not 0 <= p <= 1:
            raise ParameterError(f"'p_keep' must be in [0, 1], got {p!r}")
        return
    matrix = params["matrix"]
    if not isinstance(matrix, Mapping) or not matrix:
        raise ParameterError("'matrix' must map each category to {category: probability}")
    for src, row in matrix.items():
        if not isinstance(row, Mapping) or any(
            not isinstance(v, int | float) or v < 0 for v in row.values()
        ):
            raise ParameterError(
                f"row {src!r} of the PRAM matrix must hold non-negative probabilities"
            )
        total = float(sum(row.values()))
        if abs(total - 1.0) > 1e-9:
            raise ParameterError(f"row {src!r} of the PRAM matrix sums to {total:g}, not 1")


def _pram_matrix(params: Mapping[str, Any], categories: list[str]) -> dict[str, dict[str, float]]:
    if "matrix" in params:
        matrix = {
            str(k): {str(t): float(p) for t, p in row.items()}
            for k, row in params["matrix"].items()
        }
        missing = [c for c in categories if c not in matrix]
        if missing:
            raise ParameterError(f"the PRAM matrix has no row for: {', '.join(missing[:10])}")
        return matrix
    p = float(params["p_keep"])
    others = (1 - p) / (len(categories) - 1) if len(categories) > 1 else 0.0
    return {
        c: {t: (p if t == c else others) for t in categories} if len(categories) > 1 else {c: 1.0}
        for c in categories
    }


def _pram_stability(params: Mapping[str, Any], plan: Plan) -> int | None:
    # With "p_keep" the other categories are those seen in the data: one person's new value
    # becomes a possible output for every row.
    return ROW_WISE if "matrix" in params else UNBOUNDED


def _pram_keeps_values(params: Mapping[str, Any]) -> bool:
    """With ``p_keep`` a value moves to another of the column's categories; a matrix keeps the
    column's values when every category it moves to has a row of its own."""
    matrix = params.get("matrix")
    if not isinstance(matrix, Mapping):
        return True
    targets = {str(t) for row in matrix.values() if isinstance(row, Mapping) for t in row}
    return targets <= {str(k) for k in matrix}


@register_step(
    "pram",
    validate=_check_pram,
    stability=_pram_stability,
    schema=sch.obj(
        {
            "column": sch.column("The categorical column to perturb", role="writes"),
            "matrix": sch.mapping(
                sch.mapping(sch.number(minimum=0, maximum=1)),
                "Category -> {category: probability}, each row summing to 1",
                min_properties=1,
                max_properties=10_000,
            ),
            "p_keep": sch.number("Probability of keeping a value", minimum=0, maximum=1),
        },
        required=["column"],
        exactly_one=[["matrix"], ["p_keep"]],
        labels={
            "column": "Column",
            "matrix": "Transition probabilities",
            "p_keep": "Probability of keeping a value",
        },
        title="PRAM (post-randomisation)",
    ),
    keeps_values=_pram_keeps_values,
    public_report=("column", "p_keep"),
    # with "p_keep" the categories are those of every row
    engines=lambda params: ROW_ENGINES if "matrix" in params else IN_MEMORY,
    counts=("changed_cells",),
)
def pram(df: pd.DataFrame, params: Mapping[str, Any], ctx: StepContext) -> StepOutcome:
    col = params["column"]
    s = df[col]
    text = s.astype(str).where(s.notna(), None)
    categories = sorted(text.dropna().unique())
    matrix = _pram_matrix(params, categories)
    out_values = text.to_numpy(dtype=object).copy()
    changed = 0
    # each row's new category: its own uniform draw against the row's cumulative probabilities
    uniforms = row_uniforms(row_seed(ctx), positions(ctx, len(df)))
    for src in categories:
        rows = np.flatnonzero((text == src).to_numpy())
        targets = list(matrix[src])
        probs = np.array([matrix[src][t] for t in targets], dtype=float)
        cumulative = np.cumsum(probs / probs.sum())
        # a draw past the last sum (rounding) goes to the last category that can be drawn
        draws = np.minimum(
            np.searchsorted(cumulative, uniforms[rows], side="right"),
            int(np.flatnonzero(probs > 0)[-1]),
        )
        out_values[rows] = np.array(targets, dtype=object)[draws]
        changed += int((np.array(targets, dtype=object)[draws] != src).sum())
    out = df.copy()
    out[col] = pd.Series(out_values, index=df.index, dtype=object).where(s.notna(), s)
    return StepOutcome(out, {**_public(params), "changed_cells": changed})


@register_step(
    "shuffle",
    stability=UNBOUNDED,
    schema=sch.obj(
        {"columns": sch.columns("Columns whose values are permuted together across rows")},
        required=["columns"],
        labels={
            "columns": "Columns",
        },
        title="Shuffle columns",
    ),
    keeps_values=True,
    perturbs=True,
    public_report=("columns",),
)
def shuffle(df: pd.DataFrame, params: Mapping[str, Any], ctx: StepContext) -> StepOutcome:
    perm = ctx.rng.permutation(len(df))
    out = df.copy()
    for col in params["columns"]:
        out[col] = df[col].to_numpy()[perm]
    return StepOutcome(out, {"columns": list(params["columns"])})


def _public(params: Mapping[str, Any]) -> dict[str, Any]:
    """The step's parameters as published with the release (there is no seed among them)."""
    return {k: v for k, v in params.items() if k not in ("seed", "key")}
