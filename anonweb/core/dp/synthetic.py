"""DP synthetic microdata sampled from a noisy contingency table of chosen columns.

OpenDP's AIM and MST (``dp.mbi``) need Private-PGM and Polars, which this deployment does not
have, so the full table of the chosen columns is released instead with one DP histogram
(declared categories; numeric columns binned over declared bounds), post-processed (negative
cells set to 0, normalised) and sampled with the injected ``rng``. Sampling is post-processing,
so the synthetic table costs exactly the histogram's ε. The full table is accurate only while
cells ≫ noise, i.e. for a few columns with few categories.

The step's report holds only what the release itself shows (its cost, the noise, how far the
sample strays from the noisy table it was drawn from). :func:`utility_report` compares with the
original data instead; it is *not* differentially private, so it is a tool for the data owner and
never part of a DP step's report.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core import schema as sch
from anonweb.core.dp import accounting as acc
from anonweb.core.dp import mechanisms as dp
from anonweb.core.errors import ParameterError
from anonweb.core.io.frame import require_columns

if TYPE_CHECKING:
    from anonweb.core.release.plan import StepContext, StepOutcome

MAX_CELLS = 1_000_000
# Synthetic rows one step may draw: the sample is held in memory as a frame, so the step
# refuses more before drawing (an explicit n_rows, or a noisy total swollen by a tiny ε).
MAX_ROWS = 10_000_000


@dataclass(frozen=True)
class SyntheticSpec:
    columns: tuple[str, ...]
    epsilon: float
    categories: Mapping[str, tuple[str, ...]]
    bounds: Mapping[str, tuple[float, float]]
    bins: int = 10
    n_rows: int | None = None
    identifier: str | None = None
    max_contributions: int = 1
    # Off by default: a (missing) cell per column multiplies the cells, and noise clearing the
    # floor there would put missing values into a synthetic table whose source had none.
    count_missing: bool = False

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> SyntheticSpec:
        columns = tuple(str(c) for c in params.get("columns") or ())
        if not columns:
            raise ParameterError("DP synthetic data needs at least one column")
        cats = dict(params.get("categories") or {})
        bounds = {
            str(c): acc.check_bounds(b, what=f"column {c!r}")
            for c, b in (params.get("bounds") or {}).items()
        }
        undeclared = [c for c in columns if c not in cats and c not in bounds]
        if undeclared:
            raise ParameterError(
                f"declare categories or numeric bounds for: {', '.join(undeclared)} (they must be public)"
            )
        categorical = (
            acc.check_categories(
                {c: cats[c] for c in columns if c in cats}, tuple(c for c in columns if c in cats)
            )
            or {}
        )
        identifier, c = acc.check_contributions(
            params.get("identifier"), params.get("max_contributions", 1)
        )
        n_rows = params.get("n_rows")
        if n_rows is not None and (not str(n_rows).isdigit() or int(n_rows) < 1):
            raise ParameterError(f"n_rows must be a whole number ≥ 1, not {n_rows!r}")
        if n_rows is not None and int(n_rows) > MAX_ROWS:
            raise ParameterError(
                f"n_rows is {int(n_rows):,}; DP synthetic data draws at most {MAX_ROWS:,} rows"
            )
        spec = cls(
            columns=columns,
            epsilon=acc.check_epsilon(params.get("epsilon")),
            categories=categorical,
            bounds={k: v for k, v in bounds.items() if k in columns and k not in categorical},
            bins=acc.check_bins(params.get("bins", 10)),
            n_rows=None if n_rows is None else int(n_rows),
            identifier=identifier,
            max_contributions=c,
            count_missing=bool(params.get("count_missing", False)),
        )
        cells = int(np.prod([len(v) + 1 for v in spec.labels().values()], dtype=float))
        if cells > MAX_CELLS:
            raise ParameterError(
                f"the table of these columns has {cells} cells; at most {MAX_CELLS}"
            )
        return spec

    def edges(self, column: str) -> NDArray[Any]:
        lo, hi = self.bounds[column]
        return np.linspace(lo, hi, self.bins + 1)

    def labels(self) -> dict[str, tuple[str, ...]]:
        """Public cell labels per column: declared categories, or bin labels for numeric ones."""
        out = {}
        for col in self.columns:
            if col in self.categories:
                out[col] = tuple(self.categories[col])
            else:
                e = self.edges(col)
                out[col] = tuple(
                    f"[{a:g}, {b:g}{']' if i == self.bins - 1 else ')'}"
                    for i, (a, b) in enumerate(zip(e[:-1], e[1:]))
                )
        return out

    def query(self) -> dp.DPQuery:
        return dp.DPQuery(
            kind="histogram",
            epsilon=self.epsilon,
            columns=self.columns,
            categories=self.labels(),
            identifier=self.identifier,
            max_contributions=self.max_contributions,
            count_missing=self.count_missing,
        )


def _binned(df: pd.DataFrame, spec: SyntheticSpec) -> pd.DataFrame:
    """Numeric columns replaced by their (clamped) bin labels; other columns as they are."""
    out = df.copy()
    labels = spec.labels()
    for col in spec.bounds:
        values = pd.to_numeric(df[col], errors="coerce")
        lo, hi = spec.bounds[col]
        idx = np.clip(
            np.searchsorted(spec.edges(col), values.clip(lo, hi), side="right") - 1,
            0,
            spec.bins - 1,
        )
        out[col] = pd.Series(np.asarray(labels[col], dtype=object)[idx], index=df.index).where(
            values.notna()
        )
    return out


@dataclass(frozen=True)
class SyntheticResult:
    frame: pd.DataFrame
    report: dict[str, Any]


def dp_synthetic(
    df: pd.DataFrame, spec: SyntheticSpec, *, rng: np.random.Generator, distance: int = 1
) -> SyntheticResult:
    """Release the noisy table, then sample ``n_rows`` records (default: the noisy total)."""
    require_columns(df, list(spec.columns) + ([spec.identifier] if spec.identifier else []))
    released = dp.release(_binned(df, spec), spec.query(), rng=rng, distance=distance)
    counts = released.table[dp.COUNT_COLUMN].to_numpy(dtype=float)
    # Post-processing: cells within the noise's 95% band of zero are treated as empty. Most
    # cells of a full table are empty, and keeping their positive noise would scatter records
    # uniformly and wash out the associations the table is meant to carry.
    floor = float(released.report["ci95_halfwidth"])
    weights = np.where(counts > floor, counts, 0.0)
    total = float(counts.sum())
    if spec.n_rows is None and not total <= MAX_ROWS:
        raise ParameterError(
            f"the noisy total is {total:,.0f} rows, more than the {MAX_ROWS:,} DP synthetic data "
            "draws at most (the noise of this ε dwarfs the counts); set n_rows, or a larger ε"
        )
    n = spec.n_rows or max(int(round(total)), 1)
    if weights.sum() <= 0:
        weights = np.ones_like(weights)
    picks = rng.choice(len(weights), size=n, p=weights / weights.sum())
    cells = released.table.drop(columns=[dp.COUNT_COLUMN]).iloc[picks].reset_index(drop=True)
    frame = _unbin(cells, spec, rng)
    report = {
        "kind": "dp_synthetic",
        "method": "sampling from a noisy contingency table",
        **{
            k: released.report[k]
            for k in ("epsilon_spent", "delta_spent", "ci95_halfwidth", "noise", "unit_of_privacy")
        },
        "cells": len(weights),
        "cells_kept": int((weights > 0).sum()),
        "rows_out": n,
        "sampling_tv": _sampling_tv(released.table, weights, cells, spec),
    }
    return SyntheticResult(frame, report)


def _sampling_tv(
    table: pd.DataFrame, weights: NDArray[Any], sampled: pd.DataFrame, spec: SyntheticSpec
) -> dict[str, Any]:
    """Total variation between each column's marginal in the sample and in the (post-processed)
    noisy table it was drawn from: sampling error only, computed from the DP output alone."""
    if weights.sum() <= 0 or sampled.empty:
        return {"marginal": {}, "max": None}
    cells = table.drop(columns=[dp.COUNT_COLUMN]).astype(str)
    marginal = {}
    for col in spec.columns:
        noisy = pd.Series(weights, index=cells[col]).groupby(level=0).sum()
        noisy = noisy / noisy.sum()
        drawn = sampled[col].astype(str).value_counts(normalize=True)
        both = noisy.index.union(drawn.index)
        gap = (noisy.reindex(both, fill_value=0) - drawn.reindex(both, fill_value=0)).abs()
        marginal[col] = float(0.5 * gap.sum())
    return {
        "note": "between the sample and the noisy table it was drawn from (post-processing)",
        "marginal": marginal,
        "max": max(marginal.values()),
    }


def _unbin(cells: pd.DataFrame, spec: SyntheticSpec, rng: np.random.Generator) -> pd.DataFrame:
    """Cell labels back to values: uniform within a numeric bin, missing stays missing."""
    out = cells.replace({dp.MISSING: None}).astype(object)
    labels = spec.labels()
    for col in spec.bounds:
        position = {label: i for i, label in enumerate(labels[col])}
        idx = cells[col].map(position)
        e = spec.edges(col)
        present = idx.notna().to_numpy()
        values = np.full(len(cells), np.nan)
        i = idx[present].astype(int).to_numpy()
        values[present] = rng.uniform(e[i], e[i + 1])
        out[col] = values
    return out


def utility_report(
    original: pd.DataFrame, synthetic: pd.DataFrame, spec: SyntheticSpec
) -> dict[str, Any]:
    """Total-variation error of each 1- and 2-way marginal, and correlation differences."""
    a, b = _binned(original, spec), _binned(synthetic, spec)
    marginal = {c: _tv(a, b, [c]) for c in spec.columns}
    pairs = {f"{x}|{y}": _tv(a, b, [x, y]) for x, y in itertools.combinations(spec.columns, 2)}
    numeric = [c for c in spec.columns if c in spec.bounds]
    corr = {}
    for x, y in itertools.combinations(numeric, 2):
        r0 = pd.to_numeric(original[x], errors="coerce").corr(
            pd.to_numeric(original[y], errors="coerce")
        )
        r1 = synthetic[x].astype(float).corr(synthetic[y].astype(float))
        corr[f"{x}|{y}"] = {
            "original": _num(r0),
            "synthetic": _num(r1),
            "difference": _num(r1 - r0),
        }
    return {
        "note": "computed on the original data: for the data owner, not differentially private",
        "marginal_tv": marginal,
        "pair_tv": pairs,
        "max_marginal_tv": max(marginal.values()),
        "correlation": corr,
    }


def _tv(a: pd.DataFrame, b: pd.DataFrame, cols: list[str]) -> float:
    pa = a[cols].astype(str).value_counts(normalize=True)
    pb = b[cols].astype(str).value_counts(normalize=True)
    both = pa.index.union(pb.index)
    return float(
        0.5 * (pa.reindex(both, fill_value=0) - pb.reindex(both, fill_value=0)).abs().sum()
    )


def _num(x: float) -> float | None:
    return None if pd.isna(x) else float(x)


SYNTHETIC_SCHEMA = sch.obj(
    {
        "columns": sch.columns("Columns of the synthetic table", role="reads"),
        "epsilon": dp.EPSILON,
        "categories": sch.mapping(
            sch.array(dp.CATEGORY, min_items=1, max_items=100_000),
            "Public categories of the categorical columns",
            keys="reads",
        ),
        "bounds": sch.mapping(dp.BOUNDS, "Public bounds of the numeric columns", keys="reads"),
        "bins": sch.integer("Bins per numeric column", minimum=2, maximum=10_000, default=10),
        "n_rows": sch.integer(
            "Synthetic rows to draw (default: the noisy total)", minimum=1, maximum=MAX_ROWS
        ),
        "identifier": sch.column("The column identifying a person (unit of privacy)"),
        "max_contributions": sch.integer(
            "Most rows kept per person", minimum=1, maximum=1_000_000, default=1
        ),
        "count_missing": sch.boolean("Give missing values a cell of their own", default=False),
        dp.READ_FROM_DATA_KEY: dp.READ_FROM_DATA,
    },
    required=["columns", "epsilon"],
    labels={
        "columns": "Columns",
        "epsilon": "Total ε for the synthetic table",
        "categories": "Public categories",
        "bounds": "Public bounds",
        "bins": "Bins per numeric column",
        "n_rows": "Rows to draw",
        "identifier": "Person column (unit of privacy)",
        "max_contributions": "Most rows per person",
        "count_missing": "Missing values get their own cell",
        "read_from_data": "Read from the data (not private)",
    },
    title="DP synthetic data",
)


def _register() -> None:
    try:
        from anonweb.core.release.plan import StepOutcome, register_step
    except ImportError:  # the plan module is optional for the functions above
        return

    def validate(params: Mapping[str, Any]) -> None:
        dp.prepare(SyntheticSpec.from_params(params).query())

    def cost(params: Mapping[str, Any], distance: int = 1) -> dict[str, float]:
        return dp.prepare(SyntheticSpec.from_params(params).query(), distance=distance).cost()

    def columns(params: Mapping[str, Any]) -> list[str]:
        spec = SyntheticSpec.from_params(params)
        return list(spec.columns) + ([spec.identifier] if spec.identifier else [])

    @register_step(
        "dp_synthetic",
        validate=validate,
        privacy_cost=cost,
        columns=columns,
        output_columns=lambda params: list(SyntheticSpec.from_params(params).columns),
        measurement=True,
        schema=SYNTHETIC_SCHEMA,
        output="synthetic",
        public_report=(
            "kind",
            "method",
            "epsilon_spent",
            "delta_spent",
            "ci95_halfwidth",
            "noise",
            "unit_of_privacy",
            "cells",
            "cells_kept",
            "rows_out",
            "sampling_tv",
        ),
    )
    def dp_synthetic_step(
        df: pd.DataFrame, params: Mapping[str, Any], ctx: StepContext
    ) -> StepOutcome:
        result = dp_synthetic(
            df, SyntheticSpec.from_params(params), rng=ctx.rng, distance=ctx.distance
        )
        return StepOutcome(frame=result.frame, report=result.report)


_register()
