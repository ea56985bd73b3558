"""Each unknown's feasible interval under all the equations and the bounds together.

A published figure is an interval (a mean rounded to two decimals is its value ± 0.005), so each
equation is ``low[e] <= sum(y[v] for v in equation e) <= high[e]`` and each unknown has its own
bounds. The smallest and largest value an unknown takes over every solution is a linear program
(HiGHS, through SciPy): one minimisation and one maximisation per unknown. The connected parts of
the system are independent, so one LP whose objective picks an unknown in each part solves them
all at once. Propagating bounds one equation at a time misses
what equations give together (``a + b + c = 199`` and ``a + c + d = 102`` put ``b`` at least 97
above ``d``); the linear program does not.

Large parts are screened: each solution an LP returns is a point of the feasible set, so it
widens every unknown's *inner* interval (values known to be reachable). An unknown whose inner
interval already rules out every finding (``settled``) needs no LP of its own; its reported
interval is then the inner one, which the true interval contains. A work budget bounds the LPs;
parts past it are reported as *undecided*, never as safe.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from scipy.optimize import linprog
from scipy.sparse import csgraph

from anonweb.core.conflicts.solver import Equations

EXACT_PART = 64  # parts up to this many unknowns get both LPs for every unknown
DEFAULT_LP_BUDGET = 4_000_000  # sum over LPs of the part's non-zeros plus unknowns
_PROBES = 4  # LPs in random directions that open the inner intervals of a large part


@dataclass(frozen=True)
class Intervals:
    low: NDArray[Any]  # per unknown: the smallest feasible value (inner bound if settled early)
    high: NDArray[Any]
    undecided: NDArray[Any]  # bool per unknown: in a part past the work budget


Settled = Callable[[NDArray[Any], NDArray[Any]], NDArray[Any]]


def feasible_intervals(
    eqs: Equations,
    eq_low: NDArray[Any],
    eq_high: NDArray[Any],
    var_low: NDArray[Any],
    var_high: NDArray[Any],
    *,
    point: NDArray[Any],
    settled: Settled | None = None,
    known: NDArray[Any] | None = None,
    budget: int = DEFAULT_LP_BUDGET,
    seed: int = 0,
    exact_part: int = EXACT_PART,
) -> Intervals:
    """The interval of each unknown over all solutions of the equations within the bounds.

    ``point`` is a known solution (the source's own values): it starts the inner intervals.
    ``settled(inner_low, inner_high)`` says which unknowns need no exact interval (nothing could
    be found about them); it is asked only about parts of more than ``exact_part`` unknowns.
    ``known`` holds the values the exact equations fix by themselves (NaN elsewhere), as
    :func:`.solver.solve` finds them: a fixed value is its own interval, with no LP.
    The parts are independent, so one LP serves them all: its objective picks one unknown per
    part, and a separable objective is optimal in each part at once.
    """
    n = eqs.n_vars
    low = np.asarray(var_low, dtype=float).copy()
    high = np.asarray(var_high, dtype=float).copy()
    undecided = np.zeros(n, dtype=bool)
    in_eq = np.bincount(eqs.var, minlength=n) > 0
    if not in_eq.any():
        return Intervals(low, high, undecided)
    m = eqs.count
    eq_of = eqs.eq_of_entry()
    adj = sparse.coo_matrix(
        (np.ones(eqs.var.size, dtype=np.int8), (eq_of, m + eqs.var)), shape=(m + n, m + n)
    )
    _, labels = csgraph.connected_components(adj, directed=False)
    comp = labels[m:].astype(np.int64)
    size = np.bincount(comp[in_eq], minlength=int(labels.max()) + 1)
    screened = (size[comp] > exact_part) & in_eq if settled is not None else np.zeros(n, bool)
    lp = _LP.build(eqs, eq_low, eq_high, low, high)
    cost = eqs.var.size + n
    inner_lo = np.asarray(point, dtype=float).copy()
    inner_hi = inner_lo.copy()
    exact_lo = np.where(in_eq, np.nan, low)
    exact_hi = np.where(in_eq, np.nan, high)
    # Unknowns still owed an exact interval, queued part by part.
    pending = in_eq.copy()
    if known is not None:
        fixed = in_eq & np.isfinite(known)
        exact_lo[fixed] = exact_hi[fixed] = known[fixed]
        pending &= ~fixed
    rng = np.random.default_rng(seed)
    work = 0

    def seen(x: NDArray[Any]) -> None:
        np.minimum(inner_lo, x, out=inner_lo)
        np.maximum(inner_hi, x, out=inner_hi)

    if screened.any():
        for _ in range(_PROBES):
            if work + cost > budget:
                break
            work += cost
            x = lp.solve(np.where(screened, rng.standard_normal(n), 0.0))
            if x is None:
                return Intervals(low, high, in_eq)
            seen(x)
    if screened.any() and settled is not None:
        # Push every unsettled unknown down at once, then up (random positive weights): one
        # point of the feasible set widens many inner intervals; repeat while it helps.
        open_ = screened & ~settled(inner_lo, inner_hi)
        while open_.any() and work + 2 * cost <= budget:
            for sign in (1.0, -1.0):
                work += cost
                x = lp.solve(np.where(open_, sign * rng.uniform(0.5, 1.5, n), 0.0))
                if x is None:
                    return Intervals(low, high, in_eq)
                seen(x)
            still = open_ & ~settled(inner_lo, inner_hi)
            if still.sum() > 0.9 * open_.sum():
                break
            open_ = still
    while pending.any():
        if screened.any() and settled is not None:
            pending &= ~(screened & settled(inner_lo, inner_hi))
            if not pending.any():
                break
        idx = np.flatnonzero(pending)
        _, first = np.unique(comp[idx], return_index=True)
        pick = idx[first]  # one unknown per part
        if work + 2 * cost > budget:
            undecided[np.isin(comp, comp[idx])] = True
            break
        for sign, out in ((1.0, exact_lo), (-1.0, exact_hi)):
            c = np.zeros(n)
            c[pick] = sign
            work += cost
            x = lp.solve(c)
            if x is None:
                return Intervals(low, high, in_eq)
            seen(x)
            out[pick] = x[pick]
        pending[pick] = False
    lo = np.where(np.isnan(exact_lo), inner_lo, exact_lo)
    hi = np.where(np.isnan(exact_hi), inner_hi, exact_hi)
    keep = in_eq & ~undecided
    low[keep] = lo[keep]
    high[keep] = np.maximum(lo, hi)[keep]
    return Intervals(low, high, undecided)


@dataclass
class _LP:
    a_eq: sparse.csr_matrix | None
    b_eq: NDArray[Any] | None
    a_ub: sparse.csr_matrix | None
    b_ub: NDArray[Any] | None
    box: NDArray[Any]  # (n, 2)

    @classmethod
    def build(
        cls,
        eqs: Equations,
        eq_low: NDArray[Any],
        eq_high: NDArray[Any],
        var_low: NDArray[Any],
        var_high: NDArray[Any],
    ) -> _LP:
        a = sparse.csr_matrix(
            (np.ones(eqs.var.size), eqs.var, eqs.ptr), shape=(eqs.count, eqs.n_vars)
        )
        fixed = np.asarray(eq_low == eq_high)
        loose = ~fixed
        return cls(
            a[fixed] if fixed.any() else None,
            eq_low[fixed] if fixed.any() else None,
            sparse.vstack([a[loose], -a[loose]]).tocsr() if loose.any() else None,
            np.r_[eq_high[loose], -eq_low[loose]] if loose.any() else None,
            np.c_[var_low, var_high],
        )

    def solve(self, c: NDArray[Any]) -> NDArray[Any] | None:
        res = linprog(
            c,
            A_ub=self.a_ub,
            b_ub=self.b_ub,
            A_eq=self.a_eq,
            b_eq=self.b_eq,
            bounds=self.box,
            method="highs",
        )
        return np.asarray(res.x) if res.status == 0 else None
