"""Marginal-based DP synthetic data: the independent baseline and MST, on OpenDP's noise.

Both spend a zCDP budget ρ, converted from the plan's (ε, δ) exactly as OpenDP converts
(:func:`rho_for`, :func:`epsilon_for`). Every noise sample is drawn by an OpenDP measurement:
the discrete Gaussian (``make_gaussian``) on each marginal's count vector, and report-noisy-max
(``make_noisy_max``, zCDP) for MST's choice of pairs. The cost is the sum of those
measurements' own maps at the input distance (:meth:`MarginalPlan.rho_spent`), so the ledger,
the preview and the mechanism use the same numbers.

* ``independent``: the whole budget on the one-way marginals, columns sampled independently.
* ``mst`` (McKenna, Miklau and Sheldon 2021): a third of ρ on the one-way marginals, a third to
  choose a maximum spanning tree of pairs with the exponential mechanism (scored by how far the
  independent model is from each pair), a third on the chosen two-way marginals. Before the
  pairs, each column's cells whose noisy count is below 3σ are merged into one (MST's
  compression, which helps sparse columns); sampled records get them back, drawn by their noisy
  shares. Private-PGM
  (``mbi``) reconciles the noisy marginals into one tree-shaped model, with a bounded number of
  mirror-descent iterations; records are drawn along the tree with the injected ``rng``.

Estimation and sampling read only the noisy measurements: they are post-processing.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.dp import accounting as acc
from anonweb.core.dp import mechanisms as dpm
from anonweb.core.errors import DataError, ParameterError

METHODS = ("mst", "aim", "independent", "full_table")
MARGINAL_METHODS = ("mst", "aim", "independent")
# Mirror descent converges to within noise long before mbi's default; bounded for a job.
ESTIMATION_ITERS = 1000
# A two-way marginal larger than this is refused: its noise would swamp it, and the model's
# memory grows with it.
MAX_PAIR_CELLS = 250_000
# AIM (McKenna et al. 2022). Its schedule assumes 16 rounds per column; the budget left when
# AIM_MAX_ROUNDS is reached is spent on that round, so every run spends exactly ρ. The model
# may grow to AIM_MAX_MODEL_MB (AIM's max_model_size, junction-tree cells × 8 bytes) in
# proportion to the budget spent; each round re-estimates with AIM_ROUND_ITERS warm-started
# iterations, the final model with ESTIMATION_ITERS.
AIM_ROUNDS_PER_COLUMN = 16
AIM_MAX_ROUNDS = 8
AIM_MAX_MODEL_MB = 80.0
AIM_ROUND_ITERS = 100
# Records drawn from the current model to read its answers to the candidates each round.
AIM_SCORING_DRAW = 200_000

Codes = NDArray[np.int64]
Progress = Callable[[float, str], None]


def no_progress(fraction: float, what: str) -> None:
    return None


# -- the domain ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Domain:
    """Public cells per column: declared categories, or bins over declared edges."""

    columns: tuple[str, ...]
    labels: Mapping[str, tuple[str, ...]]
    edges: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    count_missing: bool = False

    def cells(self, column: str) -> tuple[str, ...]:
        extra = (dpm.MISSING,) if self.count_missing else ()
        return tuple(self.labels[column]) + extra

    @property
    def sizes(self) -> tuple[int, ...]:
        return tuple(len(self.cells(c)) for c in self.columns)


def encode(df: pd.DataFrame, domain: Domain) -> Codes:
    """Each row as one cell index per column; values outside the declared cells are refused."""
    out = np.empty((len(df), len(domain.columns)), dtype=np.int64)
    for j, col in enumerate(domain.columns):
        if col in domain.edges:
            e = np.asarray(domain.edges[col], dtype=float)
            values = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=float)
            idx = np.clip(
                np.searchsorted(e, np.clip(values, e[0], e[-1]), side="right") - 1, 0, len(e) - 2
            )
            missing = np.isnan(values)
        else:
            labels = dpm.cell_labels(df[col])
            position = {v: i for i, v in enumerate(domain.labels[col])}
            mapped = labels.map(position)
            missing = (labels == dpm.MISSING).to_numpy()
            outside = sorted(set(labels[mapped.isna().to_numpy() & ~missing]))
            if outside:
                shown = ", ".join(repr(v) for v in outside[:5])
                raise DataError(
                    f"column {col!r} has {len(outside)} value(s) outside the declared categories "
                    f"(e.g. {shown})"
                )
            idx = mapped.fillna(0).to_numpy(dtype=np.int64)
        if missing.any():
            if not domain.count_missing:
                raise DataError(
                    f"column {col!r} has missing values: count them as a category "
                    "(count_missing) or drop those rows first"
                )
            idx = np.where(missing, len(domain.labels[col]), idx)
        out[:, j] = idx
    return out


def decode(codes: Codes, domain: Domain, rng: np.random.Generator) -> pd.DataFrame:
    """Cell indexes back to values: labels, or uniform within a numeric bin."""
    out: dict[str, Any] = {}
    for j, col in enumerate(domain.columns):
        idx = codes[:, j]
        n_labels = len(domain.labels[col])
        missing = idx >= n_labels
        if col in domain.edges:
            e = np.asarray(domain.edges[col], dtype=float)
            safe = np.minimum(idx, n_labels - 1)
            values = rng.uniform(e[safe], e[safe + 1])
            out[col] = np.where(missing, np.nan, values)
        else:
            labels = np.asarray(list(domain.labels[col]) + [None], dtype=object)
            out[col] = labels[idx]
    return pd.DataFrame(out, columns=list(domain.columns))


def marginal(codes: Codes, sizes: Sequence[int], axes: Sequence[int]) -> NDArray[np.int64]:
    """The count of each cell of the marginal over ``axes`` (flattened, C order)."""
    shape = tuple(sizes[a] for a in axes)
    if len(codes) == 0:
        return np.zeros(int(np.prod(shape)), dtype=np.int64)
    flat = np.ravel_multi_index(tuple(codes[:, a] for a in axes), shape)
    return np.bincount(flat, minlength=int(np.prod(shape))).astype(np.int64)


# -- accounting ------------------------------------------------------------------------------


def _profile_epsilon(rho: float, delta: float) -> float:
    """ε at ``delta`` of a ρ-zCDP guarantee, by OpenDP's own conversion."""
    dp = acc.opendp()
    gauss = dp.m.make_gaussian(
        dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=1.0
    )
    # A Gaussian of scale 1 at distance sqrt(2ρ) is exactly ρ-zCDP.
    profile = dp.c.make_zCDP_to_approxDP(gauss).map(math.sqrt(2 * rho))
    return float(profile.epsilon(delta))


def epsilon_for(rho: float, delta: float) -> float:
    with acc.opendp_errors():
        return _profile_epsilon(rho, delta)


def rho_for(epsilon: float, delta: float) -> float:
    """The largest ρ whose OpenDP conversion at ``delta`` gives at most ``epsilon``."""
    lo, hi = 0.0, max(epsilon, 1.0)
    with acc.opendp_errors():
        while _profile_epsilon(hi, delta) <= epsilon:
            lo, hi = hi, hi * 2
        for _ in range(80):
            mid = (lo + hi) / 2
            if _profile_epsilon(mid, delta) <= epsilon:
                lo = mid
            else:
                hi = mid
    if lo <= 0:
        raise ParameterError(f"ε = {epsilon:g} at δ = {delta:g} leaves no zCDP budget")
    return lo


def _gaussian(rho: float, c: int) -> tuple[Any, float]:
    """OpenDP's discrete Gaussian on a count vector, ρ-zCDP for one person of ``c`` rows."""
    dp = acc.opendp()
    scale = c / math.sqrt(2 * rho) * (1 + 1e-9)
    meas = dp.m.make_gaussian(
        dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int), scale=scale
    )
    return meas, scale


def _noisy_max(rho: float, c: int) -> tuple[Any, float]:
    """OpenDP's report-noisy-max (Gumbel: the exponential mechanism), ρ-zCDP for scores that
    move by at most ``c`` either way when one person is added or removed."""
    dp = acc.opendp()
    scale = c / math.sqrt(2 * rho) * (1 + 1e-9)
    meas = dp.m.make_noisy_max(
        dp.vector_domain(dp.atom_domain(T=float, nan=False)),
        dp.linf_distance(T=float, monotonic=False),
        dp.zero_concentrated_divergence(),
        scale=scale,
    )
    return meas, scale


@dataclass(frozen=True)
class MarginalPlan:
    """The measurements a method will run, built without data; their maps are its cost."""

    method: str
    domain: Domain
    epsilon: float
    delta: float
    max_contributions: int = 1
    distance: int = 1
    # A zCDP budget given directly (a pure ε-DP release is ε²/2-zCDP), instead of (ε, δ).
    zcdp: float | None = None
    # AIM's workload: every marginal of this many columns (2, or 3).
    workload_degree: int = 2

    @functools.cached_property
    def rho(self) -> float:
        return self.zcdp if self.zcdp is not None else rho_for(self.epsilon, self.delta)

    @property
    def d_in(self) -> int:
        return self.max_contributions * self.distance

    @property
    def rounds(self) -> int:
        return max(len(self.domain.columns) - 1, 0) if self.method == "mst" else 0

    def budget(self) -> dict[str, float]:
        """ρ of each measurement kind: one-way marginal, one selection round, two-way marginal."""
        d, rho = len(self.domain.columns), self.rho
        if self.method == "aim":
            # AIM's first round sizes: 90% of a round's share to measure, 10% to select.
            share = rho / (AIM_ROUNDS_PER_COLUMN * max(d, 1))
            return {"one_way": 0.9 * share, "select": 0.1 * share, "two_way": 0.9 * share}
        if self.method == "independent" or self.rounds == 0:
            return {"one_way": rho / d, "select": 0.0, "two_way": 0.0}
        return {
            "one_way": rho / 3 / d,
            "select": rho / 3 / self.rounds,
            "two_way": rho / 3 / self.rounds,
        }

    def one_way(self) -> tuple[Any, float]:
        return _gaussian(self.budget()["one_way"], self.max_contributions)

    def select(self) -> tuple[Any, float]:
        return _noisy_max(self.budget()["select"], self.max_contributions)

    def two_way(self) -> tuple[Any, float]:
        return _gaussian(self.budget()["two_way"], self.max_contributions)

    def measurements(self) -> list[tuple[str, Any, Any]]:
        """Every measurement that will run, with the distance its map is taken at."""
        d = len(self.domain.columns)
        out: list[tuple[str, Any, Any]] = [("one_way", self.one_way()[0], self.d_in)] * d
        if self.rounds:
            out += [("select", self.select()[0], float(self.d_in))] * self.rounds
            out += [("two_way", self.two_way()[0], self.d_in)] * self.rounds
        return out

    def rho_spent(self) -> float:
        with acc.opendp_errors():
            if self.method == "aim":
                # AIM's rounds adapt to the data, but they spend the whole budget and zCDP adds
                # up: their maps sum to the map of one discrete Gaussian holding all of ρ.
                return float(_gaussian(self.rho, self.max_contributions)[0].map(self.d_in))
            return float(sum(float(m.map(d)) for _, m, d in self.measurements()))

    def cost(self) -> dict[str, float]:
        rho = self.rho_spent()
        return {"epsilon": epsilon_for(rho, self.delta), "delta": self.delta, "rho": rho}

    def expected_noise_l1(self, cells: int, kind: str) -> float:
        """E‖noise‖₁ of a measured marginal of ``cells`` cells (Gaussian: σ·√(2/π) per cell)."""
        scale = (self.one_way() if kind == "one_way" else self.two_way())[1]
        return cells * scale * math.sqrt(2 / math.pi)

    def largest_measured(self) -> tuple[str, int]:
        sizes = self.domain.sizes
        if self.rounds:
            a, b = sorted(sizes)[-2:]
            return "two_way", a * b
        return "one_way", max(sizes)

    def check_resolution(self, rows: int | None) -> None:
        """Refuse a budget whose noise would swamp the largest marginal it measures.

        The expected total noise of that marginal is compared with ``rows``, the number of
        records it describes (the rows to draw before a run, the noisy total during one): above
        it, the noise alone puts the measured distribution more than half its mass away from
        the truth (total variation > 0.5)."""
        kind, cells = self.largest_measured()
        noise = self.expected_noise_l1(cells, kind)
        if rows is not None and noise > rows:
            raise ParameterError(
                f"ε = {self.epsilon:g} is too small for this domain: the noise expected on a "
                f"{kind.replace('_', '-')} marginal of {cells} cells ({noise:,.0f} records in "
                f"total) is more than the {rows:,} records it describes. Raise ε, or use fewer "
                "bins, categories or columns"
            )
        for (i, a), (j, b) in itertools.combinations(enumerate(self.domain.sizes), 2):
            if (self.rounds or self.method == "aim") and a * b > MAX_PAIR_CELLS:
                names = (self.domain.columns[i], self.domain.columns[j])
                raise ParameterError(
                    f"the pair {names[0]} × {names[1]} has {a * b} cells; at most "
                    f"{MAX_PAIR_CELLS} (use fewer bins or categories)"
                )


# -- running ---------------------------------------------------------------------------------


@dataclass
class Measured:
    """The noisy measurements (DP outputs) and the model's marginals drawn from them."""

    one_way: dict[tuple[int, ...], NDArray[np.float64]] = field(default_factory=dict)
    two_way: dict[tuple[int, ...], NDArray[np.float64]] = field(default_factory=dict)
    # AIM's three-way measurements (its workload of degree 3).
    three_way: dict[tuple[int, ...], NDArray[np.float64]] = field(default_factory=dict)
    total: float = 0.0


@dataclass
class MarginalResult:
    codes: Codes
    measured: Measured
    plan: MarginalPlan
    tree: list[tuple[int, int]] = field(default_factory=list)
    iterations: int = 0
    # AIM: the marginals measured after the one-way ones, in order, and each measurement that ran
    # as (kind, OpenDP measurement, distance, scale) so that its map can be read back.
    cliques: list[tuple[int, ...]] = field(default_factory=list)
    ran: list[tuple[str, Any, Any, float]] = field(default_factory=list)
    # MST: per column, how many cells were merged into one by the compression.
    merged: dict[str, int] = field(default_factory=dict)

    def rho_measured(self) -> float:
        """The sum of the OpenDP maps of the measurements this run made."""
        with acc.opendp_errors():
            return float(sum(float(m.map(d)) for _, m, d, _ in self.ran))


def _measure(meas: Any, counts: NDArray[np.int64]) -> NDArray[np.float64]:
    with acc.opendp_errors(DataError):
        return np.asarray(meas([int(v) for v in counts]), dtype=float)


def _clipped(p: NDArray[np.float64]) -> NDArray[np.float64]:
    p = np.maximum(p, 0.0)
    s = p.sum()
    return p / s if s > 0 else np.full(len(p), 1.0 / len(p))


def run(
    codes: Codes,
    plan: MarginalPlan,
    *,
    rng: np.random.Generator,
    n_rows: int | None = None,
    max_rows: int | None = None,
    progress: Progress = no_progress,
) -> MarginalResult:
    """Measure, estimate and sample ``n_rows`` records (default: the noisy total, refused above
    ``max_rows`` before anything is drawn)."""
    sizes = plan.domain.sizes
    d = len(sizes)
    measured = Measured()
    one, _ = plan.one_way()
    for j in range(d):
        measured.one_way[(j,)] = _measure(one, marginal(codes, sizes, [j]))
    measured.total = max(float(np.mean([v.sum() for v in measured.one_way.values()])), 1.0)
    progress(0.05, "one-way marginals measured")
    if n_rows is None and max_rows is not None and measured.total > max_rows:
        raise ParameterError(
            f"the noisy total is {measured.total:,.0f} rows, more than the {max_rows:,} DP "
            "synthetic data draws at most (the noise of this ε dwarfs the counts); set n_rows, "
            "or a larger ε"
        )
    n = n_rows or max(int(round(measured.total)), 1)
    if plan.method == "aim" and d > 1:
        return _run_aim(codes, plan, measured, n, rng, progress)
    if plan.method == "independent" or plan.rounds == 0:
        out = (
            np.column_stack(
                [rng.choice(sizes[j], size=n, p=_clipped(measured.one_way[(j,)])) for j in range(d)]
            )
            if d
            else np.empty((n, 0), dtype=np.int64)
        )
        progress(1.0, "sampled")
        return MarginalResult(out.astype(np.int64), measured, plan)
    # MST's compression: the cells of a column whose noisy count is below 3σ become one cell
    # before the pairs are chosen and measured (post-processing of the one-way measurements).
    groups = _compression(measured, plan.one_way()[1], sizes)
    small = tuple(int(g.max()) + 1 for g in groups)
    small_codes = np.column_stack([groups[j][codes[:, j]] for j in range(d)])
    small_measured = Measured(
        one_way={
            (j,): np.bincount(groups[j], weights=measured.one_way[(j,)], minlength=small[j]).astype(
                float
            )
            for j in range(d)
        },
        total=measured.total,
    )
    tree = _select_tree(small_codes, small, plan, small_measured, progress)
    two, _ = plan.two_way()
    for a, b in tree:
        small_measured.two_way[(a, b)] = _measure(two, marginal(small_codes, small, [a, b]))
        measured.two_way[(a, b)] = _expand_pair(
            small_measured.two_way[(a, b)], groups, measured, (a, b), small
        )
    progress(0.35, "two-way marginals measured")
    model_marginals = _estimate(small, plan, small_measured, progress)
    out = _expand(_sample_tree(model_marginals, small, tree, n, rng), groups, measured, rng)
    progress(1.0, "sampled")
    merged = {
        plan.domain.columns[j]: sizes[j] - small[j] + 1 for j in range(d) if small[j] < sizes[j]
    }
    return MarginalResult(out, measured, plan, tree, ESTIMATION_ITERS, merged=merged)


def _compression(measured: Measured, sigma: float, sizes: Sequence[int]) -> list[Codes]:
    """Per column, each cell's index in the compressed domain: cells whose noisy count is below
    3σ share the last index when there are at least two of them; the others keep their order."""
    out = []
    for j, size in enumerate(sizes):
        rare = measured.one_way[(j,)] < 3 * sigma
        if rare.sum() < 2:
            out.append(np.arange(size, dtype=np.int64))
            continue
        kept = np.flatnonzero(~rare)
        group = np.full(size, len(kept), dtype=np.int64)
        group[kept] = np.arange(len(kept))
        out.append(group)
    return out


def _shares(group: Codes, noisy: NDArray[np.float64]) -> NDArray[np.float64]:
    """Each cell's share of its compressed cell, by its clipped noisy count (even when none)."""
    share = np.zeros(len(group))
    for g in np.unique(group):
        cells = group == g
        share[cells] = _clipped(noisy[cells])
    return share


def _expand_pair(
    values: NDArray[np.float64],
    groups: Sequence[Codes],
    measured: Measured,
    pair: tuple[int, int],
    small: Sequence[int],
) -> NDArray[np.float64]:
    """A compressed pair's counts spread over the original cells by the one-way shares."""
    a, b = pair
    table = values.reshape(small[a], small[b])
    sa = _shares(groups[a], measured.one_way[(a,)])
    sb = _shares(groups[b], measured.one_way[(b,)])
    full = table[np.ix_(groups[a], groups[b])] * np.outer(sa, sb)
    return np.asarray(full.ravel(), dtype=float)


def _expand(
    small_codes: Codes, groups: Sequence[Codes], measured: Measured, rng: np.random.Generator
) -> Codes:
    """Compressed cells back to original ones, drawn by their share of the noisy counts."""
    out = small_codes.copy()
    for j, group in enumerate(groups):
        share = _shares(group, measured.one_way[(j,)])
        for g in np.unique(group):
            cells = np.flatnonzero(group == g)
            if len(cells) < 2:
                out[small_codes[:, j] == g, j] = cells[0]
                continue
            rows = np.flatnonzero(small_codes[:, j] == g)
            out[rows, j] = rng.choice(cells, size=len(rows), p=_clipped(share[cells]))
    return out


def _select_tree(
    codes: Codes,
    sizes: Sequence[int],
    plan: MarginalPlan,
    measured: Measured,
    progress: Progress,
) -> list[tuple[int, int]]:
    """MST's selection: Kruskal's algorithm with each edge chosen by report-noisy-max over the
    pairs that join two components, scored by the L1 distance between the pair's true counts and
    the independent model fitted to the noisy one-way marginals."""
    d = len(sizes)
    pairs = list(itertools.combinations(range(d), 2))
    score = {}
    for a, b in pairs:
        pa = _clipped(measured.one_way[(a,)])
        pb = _clipped(measured.one_way[(b,)])
        expected = np.outer(pa, pb).ravel() * measured.total
        score[(a, b)] = float(np.abs(marginal(codes, sizes, [a, b]) - expected).sum())
    component = list(range(d))

    def root(i: int) -> int:
        while component[i] != i:
            i = component[i]
        return i

    select, _ = plan.select()
    tree: list[tuple[int, int]] = []
    for r in range(plan.rounds):
        candidates = [(a, b) for a, b in pairs if root(a) != root(b)]
        with acc.opendp_errors(DataError):
            pick = int(select([score[p] for p in candidates]))
        a, b = candidates[pick]
        component[root(a)] = root(b)
        tree.append((a, b))
        progress(0.05 + 0.25 * (r + 1) / plan.rounds, f"pair {r + 1} of {plan.rounds} chosen")
    return tree


def _estimate(
    sizes: Sequence[int], plan: MarginalPlan, measured: Measured, progress: Progress
) -> dict[tuple[int, ...], NDArray[np.float64]]:
    """Private-PGM's mirror descent over the noisy marginals (post-processing)."""
    from mbi import Domain as MbiDomain
    from mbi import LinearMeasurement, estimation

    names = [f"c{j}" for j in range(len(sizes))]
    domain = MbiDomain(names, sizes)
    sd_one, sd_two = plan.one_way()[1], plan.two_way()[1]
    loss = [
        LinearMeasurement(v, (names[k[0]],), stddev=sd_one) for k, v in measured.one_way.items()
    ] + [
        LinearMeasurement(v, (names[k[0]], names[k[1]]), stddev=sd_two)
        for k, v in measured.two_way.items()
    ]
    done = [0]

    def tick(_: Any) -> None:
        done[0] += 1
        if done[0] % 100 == 0:
            progress(0.35 + 0.6 * done[0] / ESTIMATION_ITERS, "estimating the model")

    model = estimation.mirror_descent(
        domain, loss, known_total=measured.total, iters=ESTIMATION_ITERS, callback_fn=tick
    )
    out: dict[tuple[int, ...], NDArray[np.float64]] = {}
    for k in list(measured.one_way) + list(measured.two_way):
        factor = model.project(tuple(names[i] for i in k))
        out[k] = np.asarray(factor.datavector(flatten=True), dtype=float)
    return out


def _sample_tree(
    marginals: Mapping[tuple[int, ...], NDArray[np.float64]],
    sizes: Sequence[int],
    tree: list[tuple[int, int]],
    n: int,
    rng: np.random.Generator,
) -> Codes:
    """Draw records from a tree-shaped model: the root from its marginal, then each column
    given its parent from the pair's marginal."""
    d = len(sizes)
    neighbours: dict[int, list[int]] = {j: [] for j in range(d)}
    for a, b in tree:
        neighbours[a].append(b)
        neighbours[b].append(a)
    out = np.zeros((n, d), dtype=np.int64)
    seen = {0}
    out[:, 0] = rng.choice(sizes[0], size=n, p=_clipped(marginals[(0,)]))
    order = [0]
    while order:
        parent = order.pop()
        for child in neighbours[parent]:
            if child in seen:
                continue
            seen.add(child)
            order.append(child)
            key = (parent, child) if (parent, child) in marginals else (child, parent)
            joint = np.maximum(marginals[key].reshape(sizes[key[0]], sizes[key[1]]), 0.0)
            if key[0] != parent:
                joint = joint.T
            # One draw per parent value (at most its cells), not per record: memory stays O(n).
            parents = out[:, parent]
            for value in np.unique(parents):
                rows = np.flatnonzero(parents == value)
                out[rows, child] = rng.choice(
                    sizes[child], size=len(rows), p=_clipped(joint[value])
                )
    return out


# -- AIM -------------------------------------------------------------------------------------


def _workload(d: int, degree: int) -> tuple[list[tuple[int, ...]], dict[tuple[int, ...], float]]:
    """AIM's candidates (the workload's marginals and every marginal inside them) with their
    weights: how many columns each shares with the workload's marginals, summed."""
    workload = list(itertools.combinations(range(d), min(degree, d)))
    candidates = sorted(
        {
            sub
            for w in workload
            for k in range(1, len(w) + 1)
            for sub in itertools.combinations(w, k)
        }
    )
    weights = {c: float(sum(len(set(c) & set(w)) for w in workload)) for c in candidates}
    return candidates, weights


def _run_aim(
    codes: Codes,
    plan: MarginalPlan,
    measured: Measured,
    n: int,
    rng: np.random.Generator,
    progress: Progress,
) -> MarginalResult:
    """AIM's rounds: choose the worst-approximated candidate by report-noisy-max, measure it with
    the discrete Gaussian, re-estimate, and anneal (halve σ when a measurement barely moved the
    model); the last round spends what is left of ρ."""
    from mbi import Domain as MbiDomain
    from mbi.junction_tree import hypothetical_model_size

    sizes = plan.domain.sizes
    d = len(sizes)
    names = [f"c{j}" for j in range(d)]
    mbi_domain = MbiDomain(names, sizes)
    c = plan.max_contributions
    budget = plan.budget()
    rho = plan.rho
    rho_measure, rho_select = budget["one_way"], budget["select"]
    one, one_scale = plan.one_way()
    ran: list[tuple[str, Any, Any, float]] = [("one_way", one, plan.d_in, one_scale)] * d
    used = d * rho_measure
    losses: list[tuple[tuple[int, ...], NDArray[np.float64], float]] = [
        ((j,), measured.one_way[(j,)], one_scale) for j in range(d)
    ]
    model = _fit(mbi_domain, names, losses, measured.total, AIM_ROUND_ITERS)
    candidates, weights = _workload(d, plan.workload_degree)
    top_weight = max(weights.values())
    exact = {k: marginal(codes, sizes, k).astype(float) for k in candidates}
    cliques: list[tuple[int, ...]] = []
    rounds = 0
    final = False
    while not final:
        rounds += 1
        left = rho - used
        if left < 2 * (rho_measure + rho_select) or rounds >= AIM_MAX_ROUNDS:
            rho_measure, rho_select, final = 0.9 * left, 0.1 * left, True
        select, select_scale = _noisy_max(rho_select, c)
        gauss, scale = _gaussian(rho_measure, c)
        used += rho_measure + rho_select
        limit = AIM_MAX_MODEL_MB * used / rho
        current = [tuple(names[i] for i in k) for k in cliques] + [(n_,) for n_ in names]
        small = [
            k
            for k in candidates
            if hypothetical_model_size(mbi_domain, current + [tuple(names[i] for i in k)]) <= limit
        ] or [(j,) for j in range(d)]
        noise_l1 = math.sqrt(2 / math.pi) * scale
        # The model's answers, read from a large draw of it: exact inference on every candidate
        # compiles one kernel per shape and costs minutes on Adult.
        draw = _sample_model(model, names, sizes, AIM_SCORING_DRAW, rng)
        scale_draw = measured.total / AIM_SCORING_DRAW
        scores = []
        for k in small:
            estimate = marginal(draw, sizes, k) * scale_draw
            cells = int(np.prod([sizes[i] for i in k]))
            error = float(np.abs(exact[k] - estimate).sum()) - noise_l1 * cells
            # Scores divided by the largest weight move by at most c per person.
            scores.append(weights[k] * error / top_weight)
        with acc.opendp_errors(DataError):
            pick = small[int(select(scores))]
        ran.append(("select", select, float(plan.d_in), select_scale))
        values = _measure(gauss, marginal(codes, sizes, pick))
        ran.append(("measure", gauss, plan.d_in, scale))
        target = {1: measured.one_way, 2: measured.two_way}.get(len(pick), measured.three_way)
        target[pick] = values
        before = np.asarray(model.project(tuple(names[i] for i in pick)).datavector(), float)
        losses.append((pick, values, scale))
        cliques.append(pick)
        model = _fit(mbi_domain, names, losses, measured.total, AIM_ROUND_ITERS, model)
        after = np.asarray(model.project(tuple(names[i] for i in pick)).datavector(), float)
        if float(np.abs(after - before).sum()) <= noise_l1 * len(values):
            rho_measure, rho_select = 4 * rho_measure, 4 * rho_select
        progress(
            min(0.05 + 0.85 * used / rho, 0.9), f"round {rounds}: a marginal of {len(pick)} chosen"
        )
    progress(0.9, "estimating the model")
    model = _fit(mbi_domain, names, losses, measured.total, ESTIMATION_ITERS, model)
    out = _sample_model(model, names, sizes, n, rng)
    progress(1.0, "sampled")
    return MarginalResult(
        out,
        measured,
        plan,
        iterations=AIM_ROUND_ITERS * rounds + ESTIMATION_ITERS,
        cliques=cliques,
        ran=ran,
    )


def _fit(
    domain: Any,
    names: Sequence[str],
    losses: Sequence[tuple[tuple[int, ...], NDArray[np.float64], float]],
    total: float,
    iters: int,
    warm: Any = None,
) -> Any:
    """Private-PGM's mirror descent over the noisy marginals, warm-started from ``warm``."""
    from mbi import LinearMeasurement, estimation

    loss = [LinearMeasurement(v, tuple(names[i] for i in k), stddev=sd) for k, v, sd in losses]
    potentials = None
    if warm is not None:
        cliques = list(dict.fromkeys(tuple(names[i] for i in k) for k, _, _ in losses))
        potentials = warm.potentials.expand(cliques)
    return estimation.mirror_descent(
        domain, loss, known_total=total, iters=iters, potentials=potentials
    )


def _sample_model(
    model: Any, names: Sequence[str], sizes: Sequence[int], n: int, rng: np.random.Generator
) -> Codes:
    """Draw records from a junction-tree model column by column, each given the columns already
    drawn that share a clique with it (the model's elimination order, reversed)."""
    from mbi import junction_tree

    index = {name: j for j, name in enumerate(names)}
    cliques = [set(cl) for cl in model.cliques]
    _, order = junction_tree.make_junction_tree(model.domain, model.cliques)
    out = np.zeros((n, len(names)), dtype=np.int64)
    drawn: set[str] = set()
    for name in order[::-1]:
        j = index[name]
        near = set().union(*[cl for cl in cliques if name in cl])
        parents = tuple(sorted(drawn & near, key=index.__getitem__))
        drawn.add(name)
        joint = np.maximum(
            np.asarray(model.project(parents + (name,)).datavector(flatten=False), float), 0.0
        )
        if not parents:
            out[:, j] = rng.choice(sizes[j], size=n, p=_clipped(joint.ravel()))
            continue
        cols = [index[p] for p in parents]
        shape = tuple(sizes[i] for i in cols)
        flat = np.ravel_multi_index(tuple(out[:, i] for i in cols), shape)
        table = joint.reshape(-1, sizes[j])
        for value in np.unique(flat):
            rows = np.flatnonzero(flat == value)
            out[rows, j] = rng.choice(sizes[j], size=len(rows), p=_clipped(table[value]))
    return out
