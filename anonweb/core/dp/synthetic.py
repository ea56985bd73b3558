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
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core import schema as sch
from anonweb.core.dp import accounting as acc
from anonweb.core.dp import marginals as mg
from anonweb.core.dp import mechanisms as dp
from anonweb.core.dp import synthetic_quality as sq
from anonweb.core.errors import ParameterError
from anonweb.core.io.frame import require_columns
from anonweb.core.release.steps import StepContext, StepOutcome, register_step

MAX_CELLS = 1_000_000
# Synthetic rows one step may draw: the sample is held in memory as a frame, so the step
# refuses more before drawing (an explicit n_rows, or a noisy total swollen by a tiny ε).
MAX_ROWS = 10_000_000
# Without a δ only the pure-DP full table can run; with one, MST, which fits any domain whose
# pairs fit (the full table of Adult's 14 columns has about 6×10¹⁷ cells).
DEFAULT_METHOD_WITH_DELTA = "mst"


@dataclass(frozen=True)
class SyntheticSpec:
    columns: tuple[str, ...]
    epsilon: float
    categories: Mapping[str, tuple[str, ...]]
    bounds: Mapping[str, tuple[float, float]]
    bins: int = 10
    n_rows: int | None = None
    method: str = "full_table"
    delta: float | None = None
    # Per numeric column: a bin count over its bounds, or its public edges.
    column_bins: Mapping[str, int | tuple[float, ...]] = field(default_factory=dict)
    identifier: str | None = None
    max_contributions: int = 1
    # Off by default: a (missing) cell per column multiplies the cells, and noise clearing the
    # floor there would put missing values into a synthetic table whose source had none.
    count_missing: bool = False
    # AIM's workload: every marginal of this many columns (2 or 3); the quality it aims at.
    workload: int = 2

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
        method, delta, column_bins, bins = _method_params(params, columns)
        spec = cls(
            columns=columns,
            epsilon=acc.check_epsilon(params.get("epsilon")),
            categories=categorical,
            bounds={k: v for k, v in bounds.items() if k in columns and k not in categorical},
            bins=bins,
            n_rows=None if n_rows is None else int(n_rows),
            method=method,
            delta=delta,
            column_bins=column_bins,
            identifier=identifier,
            max_contributions=c,
            count_missing=bool(params.get("count_missing", False)),
            workload=_workload(params, method, columns),
        )
        if spec.method != "full_table":
            spec.marginal_plan().check_resolution(spec.n_rows)
            return spec
        cells = int(np.prod([len(v) + 1 for v in spec.labels().values()], dtype=float))
        if cells > MAX_CELLS:
            raise ParameterError(
                f"the table of these columns has {cells} cells; at most {MAX_CELLS}"
            )
        return spec

    def edges(self, column: str) -> NDArray[Any]:
        lo, hi = self.bounds[column]
        given = self.column_bins.get(column, self.bins)
        if isinstance(given, tuple):
            return np.asarray(given, dtype=float)
        return np.linspace(lo, hi, given + 1)

    def domain(self) -> mg.Domain:
        return mg.Domain(
            columns=self.columns,
            labels=self.labels(),
            edges={c: tuple(float(v) for v in self.edges(c)) for c in self.bounds},
            count_missing=self.count_missing,
        )

    def marginal_plan(self, distance: int = 1) -> mg.MarginalPlan:
        return mg.MarginalPlan(
            method=self.method,
            domain=self.domain(),
            epsilon=self.epsilon,
            delta=float(self.delta or 0.0),
            max_contributions=self.max_contributions,
            distance=distance,
            workload_degree=self.workload,
        )

    def labels(self) -> dict[str, tuple[str, ...]]:
        """Public cell labels per column: declared categories, or bin labels for numeric ones."""
        out = {}
        for col in self.columns:
            if col in self.categories:
                out[col] = tuple(self.categories[col])
            else:
                e = self.edges(col)
                out[col] = tuple(
                    f"[{a:g}, {b:g}{']' if i == len(e) - 2 else ')'}"
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


def _workload(params: Mapping[str, Any], method: str, columns: tuple[str, ...]) -> int:
    """AIM's workload degree, checked: only AIM chooses its marginals for a workload."""
    given = params.get("workload")
    if given is None:
        return 2
    if method != "aim":
        raise ParameterError(f"a workload is AIM's: the {method} method takes none")
    if given not in (2, 3) or isinstance(given, bool):
        raise ParameterError(
            f"the workload is 2 or 3 (all marginals of that many columns), not {given!r}"
        )
    if given > len(columns):
        raise ParameterError(f"a workload of {given}-way marginals needs at least {given} columns")
    return int(given)


def _method_params(
    params: Mapping[str, Any], columns: tuple[str, ...]
) -> tuple[str, float | None, dict[str, int | tuple[float, ...]], int]:
    """The method, δ and bins per numeric column, checked."""
    delta = None if params.get("delta") is None else acc.check_delta(params["delta"])
    method = params.get("method")
    if method is None:
        method = "full_table" if delta is None else DEFAULT_METHOD_WITH_DELTA
        if method == "mst" and len(columns) < 2:
            method = "independent"
    if method not in mg.METHODS:
        raise ParameterError(f"method must be one of {', '.join(mg.METHODS)}, not {method!r}")
    if method == "aim" and len(columns) < 2:
        raise ParameterError(
            "AIM chooses among marginals of two or more columns: give at least two columns, "
            "or use independent"
        )
    if method in mg.MARGINAL_METHODS and delta is None:
        raise ParameterError(
            f"the {method} method measures marginals with Gaussian noise (zCDP): give a delta, "
            "e.g. 1e-9"
        )
    raw = params.get("bins", 10)
    column_bins: dict[str, int | tuple[float, ...]] = {}
    if isinstance(raw, Mapping):
        for col, given in raw.items():
            if isinstance(given, (list, tuple)):
                try:
                    edges = tuple(float(v) for v in given)
                except (TypeError, ValueError):
                    edges = ()
                if (
                    len(edges) < 3
                    or not all(np.isfinite(edges))
                    or any(b <= a for a, b in zip(edges[:-1], edges[1:]))
                ):
                    raise ParameterError(
                        f"bin edges of {col!r} must be at least 3 increasing numbers"
                    )
                column_bins[str(col)] = edges
            else:
                column_bins[str(col)] = acc.check_bins(given)
        bins = 10
    else:
        bins = acc.check_bins(raw)
    return str(method), delta, column_bins, bins


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
            len(spec.edges(col)) - 2,
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
    df: pd.DataFrame,
    spec: SyntheticSpec,
    *,
    rng: np.random.Generator,
    distance: int = 1,
    progress: mg.Progress | None = None,
) -> SyntheticResult:
    """Release the noisy table, then sample ``n_rows`` records (default: the noisy total)."""
    require_columns(df, list(spec.columns) + ([spec.identifier] if spec.identifier else []))
    if spec.method != "full_table":
        return _from_marginals(df, spec, rng=rng, distance=distance, progress=progress)
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
    report |= _full_table_quality(df, frame, released.table, spec, rng=rng, distance=distance)
    return SyntheticResult(frame, report)


def _full_table_quality(
    df: pd.DataFrame,
    frame: pd.DataFrame,
    table: pd.DataFrame,
    spec: SyntheticSpec,
    *,
    rng: np.random.Generator,
    distance: int,
) -> dict[str, Any]:
    """The quality reports of a full-table release: its one-way marginals against those of the
    noisy table (post-processing), and against the source beside the independent baseline at the
    zCDP budget its ε implies (ε²/2), which draws its own noise for the internal report only."""
    domain = spec.domain()
    counts = table[dp.COUNT_COLUMN].to_numpy(dtype=float)
    measured = mg.Measured()
    for j, col in enumerate(domain.columns):
        position = {label: i for i, label in enumerate(domain.cells(col))}
        idx = table[col].astype(str).map(position).to_numpy(dtype=np.int64)
        measured.one_way[(j,)] = np.bincount(idx, weights=counts, minlength=domain.sizes[j]).astype(
            float
        )
    synthetic = mg.encode(frame, domain)
    data = acc.bound_contributions(
        df, identifier=spec.identifier, max_contributions=spec.max_contributions, rng=rng
    )
    source = mg.encode(data, domain)
    plan = mg.MarginalPlan(
        method="independent",
        domain=domain,
        epsilon=spec.epsilon,
        delta=0.0,
        max_contributions=spec.max_contributions,
        distance=distance,
        zcdp=spec.epsilon**2 / 2,
    )
    baseline = mg.run(source, plan, rng=rng, n_rows=len(synthetic))
    return {
        "quality": sq.noisy_quality(synthetic, measured, domain, method="full_table"),
        "quality_vs_source": sq.source_quality(source, synthetic, baseline.codes, domain),
    }


def _from_marginals(
    df: pd.DataFrame,
    spec: SyntheticSpec,
    *,
    rng: np.random.Generator,
    distance: int,
    progress: mg.Progress | None = None,
) -> SyntheticResult:
    """MST or the independent baseline (:mod:`marginals`), with both quality reports."""
    plan = spec.marginal_plan(distance)
    data = acc.bound_contributions(
        df, identifier=spec.identifier, max_contributions=spec.max_contributions, rng=rng
    )
    domain = plan.domain
    codes = mg.encode(data, domain)
    result = mg.run(
        codes,
        plan,
        rng=rng,
        n_rows=spec.n_rows,
        max_rows=MAX_ROWS,
        progress=progress or mg.no_progress,
    )
    # The noisy total is a DP output: refusing here tells the officer why the table is useless.
    plan.check_resolution(int(result.measured.total))
    cost = plan.cost()
    if spec.method == "aim":
        # What the rounds actually ran, by OpenDP's maps: the whole budget, as charged.
        cost["rho"] = result.rho_measured()
    _, one_scale = plan.one_way()
    report: dict[str, Any] = {
        "kind": "dp_synthetic",
        "method": spec.method,
        "epsilon_requested": spec.epsilon,
        "epsilon_spent": cost["epsilon"],
        "delta_spent": cost["delta"],
        "rho_spent": cost["rho"],
        "privacy_accounting": "zCDP, converted to (ε, δ) by OpenDP (make_zCDP_to_approxDP)",
        "noise": {
            "mechanism": "discrete gaussian",
            "one_way_scale": one_scale,
            **(
                {"two_way_scale": plan.two_way()[1], "selection_scale": plan.select()[1]}
                if plan.rounds
                else {}
            ),
            "budget_rho": plan.budget(),
        },
        "unit_of_privacy": acc.unit_of_privacy(spec.identifier, spec.max_contributions, plan.d_in),
        "domain": {
            c: len(v) for c, v in zip(domain.columns, (domain.cells(c) for c in domain.columns))
        },
        "measured_pairs": [[domain.columns[a], domain.columns[b]] for a, b in result.tree],
        **({"merged_cells": result.merged} if spec.method == "mst" else {}),
        **(
            {
                "workload": spec.workload,
                "measured_marginals": [[domain.columns[i] for i in k] for k in result.cliques],
                "measurements": [
                    {"kind": kind, "scale": scale} for kind, _, _, scale in result.ran
                ],
            }
            if spec.method == "aim"
            else {}
        ),
        "estimation_iterations": result.iterations,
        "rows_out": len(result.codes),
        "quality": sq.noisy_quality(result.codes, result.measured, domain, method=spec.method),
    }
    baseline = mg.run(codes, replace(plan, method="independent"), rng=rng, n_rows=len(result.codes))
    report["quality_vs_source"] = sq.source_quality(codes, result.codes, baseline.codes, domain)
    return SyntheticResult(mg.decode(result.codes, domain, rng), report)


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
        "bins": sch.one_of(
            sch.integer(minimum=2, maximum=10_000),
            sch.mapping(
                sch.one_of(
                    sch.integer(minimum=2, maximum=10_000),
                    sch.array(
                        sch.number(minimum=-1e15, maximum=1e15), min_items=3, max_items=10_001
                    ),
                ),
                keys="reads",
            ),
            description="Bins per numeric column: a count over its bounds, or its public edges "
            "(one for all, or per column)",
        ),
        "method": sch.string(
            "mst: a tree of noisy two-way marginals (Private-PGM); aim: noisy marginals chosen "
            "round by round where the model is worst (Private-PGM); independent: one-way "
            "marginals only (the baseline); full_table: the noisy full table (small domains). "
            "Default: mst with a delta, full_table without",
            enum=mg.METHODS,
        ),
        "delta": dp.DELTA,
        "workload": sch.integer(
            "AIM only: the marginals it aims at, every one of this many columns (2 or 3)",
            minimum=2,
            maximum=3,
            default=2,
        ),
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
        "method": "Method (MST, AIM, independent columns or the full table)",
        "delta": "δ (failure probability)",
        "workload": "AIM's workload (2- or 3-way marginals)",
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
    def cost(params: Mapping[str, Any], distance: int = 1) -> dict[str, float]:
        spec = SyntheticSpec.from_params(params)
        if spec.method != "full_table":
            charge = spec.marginal_plan(distance).cost()
            return {"epsilon": charge["epsilon"], "delta": charge["delta"]}
        return dp.prepare(spec.query(), distance=distance).cost()

    def validate(params: Mapping[str, Any]) -> None:
        cost(params)

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
            # marginal methods: public parameters, DP outputs and figures computed from them
            "epsilon_requested",
            "rho_spent",
            "privacy_accounting",
            "domain",
            "measured_pairs",
            "measured_marginals",
            "workload",
            "merged_cells",
            "measurements",
            "estimation_iterations",
            "quality",
        ),
    )
    def dp_synthetic_step(
        df: pd.DataFrame, params: Mapping[str, Any], ctx: StepContext
    ) -> StepOutcome:
        result = dp_synthetic(
            df,
            SyntheticSpec.from_params(params),
            rng=ctx.rng,
            distance=ctx.distance,
            progress=ctx.progress,
        )
        return StepOutcome(frame=result.frame, report=result.report)


_register()
