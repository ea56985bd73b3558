"""Exact inference and differencing: what the numeric aggregates of several releases disclose.

An :class:`Aggregate` is what one release published about one numeric column over groups of
source records: microaggregated values (each member row shows its group's mean) or the rows of an
aggregate table (a group's total, or its mean: the members of each group are taken as known to an
attacker, as quasi-identifiers or a published filter make them). Each group is one equation
``sum(x[i] for i in group) = total`` over the source's values. All the equations of all releases
of a source about one column are solved together. Records that are in the same group of every
aggregate can never be told apart and are solved as one unknown (an *atom*, with the bounds of
its members' total).

A published figure is only as exact as it is printed: a mean rounded to one decimal stands for
an interval of ± 0.05, so each equation is an interval of totals (:attr:`Aggregate.precision`).
Each record's feasible interval is the smallest and largest value it takes over every solution
of all the equations together within the column's public bounds (a linear program per record:
:mod:`.feasible`). A record is **disclosed** when that interval is a single value, and confined
when its half-width is at most ``p`` times the value (the p% rule of statistical disclosure
control).

The explanation says how: *differencing* when the value is one release's total over a group
minus another's total over the same group less that one person, who is absent from the second
release ("release 3's total minus release 5's total is one person", seed 004); *exact
inference* when the person is in every release involved but grouped differently (seed 000's BMI
example) or when more than two equations are needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from anonweb.core.conflicts.feasible import feasible_intervals
from anonweb.core.conflicts.solver import Equations, solve
from anonweb.core.errors import DataError, ParameterError
from anonweb.core.risk.classes import combine_codes

STATISTICS = ("mean", "sum")
# Intervals narrower than this fraction of the bounds' magnitude are a point (the LP solver's
# own tolerance is about 1e-9 of the figures).
_TOLERANCE = 1e-6
_GOLDEN = np.uint64(0x9E3779B97F4A7C15)


@dataclass(frozen=True)
class Aggregate:
    """One release's figures about one numeric column, over groups of source records.

    ``groups[i]`` is the group of source row ``i`` (``-1``: in no group of this aggregate);
    ``figures[g]`` the released mean or total of group ``g``. ``table`` is True for the rows of
    an aggregate table, False for microaggregated values shown on each member row.
    ``precision`` is half a unit in the last place the figures were published with (0.005 for
    two decimals; 0 for figures published exactly): each figure stands for that interval.
    """

    release: str
    column: str
    groups: NDArray[Any] = field(repr=False)
    figures: NDArray[Any] = field(repr=False)
    statistic: str = "mean"
    table: bool = False
    precision: float = 0.0

    def __post_init__(self) -> None:
        if not (np.isfinite(self.precision) and self.precision >= 0):
            raise ParameterError(
                f"{self.release}: the precision of {self.column!r} must be a non-negative "
                f"number, got {self.precision!r}"
            )
        if self.statistic not in STATISTICS:
            raise ParameterError(
                f"unknown statistic {self.statistic!r} (one of {', '.join(STATISTICS)})"
            )
        groups = np.asarray(self.groups)
        if groups.ndim != 1 or (groups.size and groups.max() >= len(self.figures)):
            raise DataError(
                f"{self.release}: group labels of {self.column!r} do not match its figures"
            )

    def sizes(self) -> NDArray[Any]:
        g = np.asarray(self.groups)
        return np.bincount(g[g >= 0], minlength=len(self.figures))

    def totals(self) -> NDArray[Any]:
        figures = np.asarray(self.figures, dtype=float)
        return figures * self.sizes() if self.statistic == "mean" else figures

    def total_intervals(self) -> tuple[NDArray[Any], NDArray[Any]]:
        """Each group's total as an interval: a figure rounded to ``precision`` (half a unit in
        its last place) is any value within it, so a mean's total is within size x that."""
        half = self.precision * (self.sizes() if self.statistic == "mean" else 1.0)
        totals = self.totals()
        return totals - half, totals + half


@dataclass(frozen=True)
class Inference:
    """What a set of aggregates about one column fixes, record by record (source row order).

    ``explained[i]`` holds, for a determined record, the two groups (aggregate, group) whose
    difference is its value, ``(-1, -1)`` for the second when one group of one record gives it,
    and ``(-1, -1, -1, -1)`` when more than two equations are needed.
    """

    aggregates: tuple[Aggregate, ...]
    determined: NDArray[Any]
    values: NDArray[Any]  # the fixed value (NaN elsewhere)
    low: NDArray[Any]  # bounds every solution respects (public bounds where nothing is known)
    high: NDArray[Any]
    undecided: NDArray[Any]  # in a system too large to solve within the work budget
    explained: NDArray[Any] = field(repr=False)  # (n, 4) int64
    bounds: tuple[float, float] = (0.0, 0.0)  # the public bounds used

    def narrow(self, p: float | None, truth: NDArray[Any]) -> NDArray[Any]:
        """Records confined to within ``p`` x their value, not determined exactly."""
        if p is None:
            return np.zeros(self.determined.size, dtype=bool)
        half = (self.high - self.low) / 2.0
        tol = _TOLERANCE * max(1.0, *(abs(b) for b in self.bounds))
        return np.asarray(
            ~self.determined & ~self.undecided & (half <= p * np.abs(truth) + tol) & (half > tol)
        )


def infer(
    values: NDArray[Any],
    aggregates: Sequence[Aggregate],
    *,
    bounds: tuple[float, float] | None = None,
    budget: int | None = None,
    p: float | None = None,
) -> Inference:
    """Solve every equation of ``aggregates`` (all about the column whose source values are
    ``values``) together with the public bounds: each record's feasible interval over every
    solution (:mod:`.feasible`). ``values`` is one solution (it starts the search and gives the
    default public bounds, the column's observed range). With ``p``, records of large parts whose
    interval is seen to be wider than the p% rule early are not solved exactly (their interval is
    then at least as wide as given); without it only exact values are looked for there."""
    x = np.asarray(values, dtype=float)
    n = x.size
    aggs = tuple(aggregates)
    lo0, hi0 = public_bounds(x, bounds)
    groups: list[NDArray[Any]] = []
    for a in aggs:
        g = np.asarray(a.groups, dtype=np.int64)
        if g.size != n:
            raise DataError(
                f"{a.release}: {a.column!r} describes {g.size} rows, the source has {n}"
            )
        groups.append(np.where(np.isnan(x), -1, g))
    covered = np.zeros(n, dtype=bool)
    for g in groups:
        covered |= g >= 0
    result = Inference(
        aggs,
        np.zeros(n, dtype=bool),
        np.full(n, np.nan),
        np.full(n, lo0),
        np.full(n, hi0),
        np.zeros(n, dtype=bool),
        np.full((n, 4), -1, dtype=np.int64),
        (lo0, hi0),
    )
    if not covered.any():
        return result
    _check_bounds(x[covered], lo0, hi0, aggs)
    atom = combine_codes(
        ((g + 1, len(a.figures) + 1) for a, g in zip(aggs, groups, strict=True)), n
    )
    codes, atom = np.unique(np.where(covered, atom, -1), return_inverse=True)
    atom = atom.reshape(-1) - (1 if codes[0] == -1 else 0)  # uncovered rows: -1
    n_atoms = int(atom.max()) + 1
    inside = atom >= 0
    a0 = np.maximum(atom, 0)
    size = np.bincount(atom[inside], minlength=n_atoms).astype(float)
    system = _System.build(aggs, groups, atom, n_atoms)
    tol = _TOLERANCE * max(1.0, abs(lo0), abs(hi0))
    # The largest |value| in each atom: the p% rule is checked against each member's own value.
    biggest = np.zeros(n_atoms)
    np.maximum.at(biggest, atom[inside], np.abs(x[inside]))

    def record_interval(y_lo: NDArray[Any], y_hi: NDArray[Any]) -> tuple[Any, Any]:
        # The members of an atom are interchangeable: one of m takes the atom's total less the
        # other m - 1 at their bounds.
        return (
            np.maximum(lo0, y_lo - (size - 1) * hi0),
            np.minimum(hi0, y_hi - (size - 1) * lo0),
        )

    def settled(y_lo: NDArray[Any], y_hi: NDArray[Any]) -> NDArray[Any]:
        r_lo, r_hi = record_interval(y_lo, y_hi)
        half = (r_hi - r_lo) / 2.0
        wide = half > tol
        return np.asarray(wide if p is None else wide & (half > p * biggest + tol))

    point = np.bincount(atom[inside], weights=x[inside], minlength=n_atoms)
    # What the exact figures fix by linear algebra alone needs no LP (rounded ones are left out).
    exact = system.low == system.high
    sol = solve(system.eqs.subset(exact), order=point / size)
    found = feasible_intervals(
        system.eqs,
        system.low,
        system.high,
        size * lo0,
        size * hi0,
        point=point,
        settled=settled,
        known=np.where(sol.determined, sol.values, np.nan),
        **({} if budget is None else {"budget": budget}),
    )
    r_lo, r_hi = record_interval(found.low, found.high)
    r_hi = np.maximum(r_lo, r_hi)
    result.low[inside], result.high[inside] = r_lo[a0[inside]], r_hi[a0[inside]]
    result.undecided[:] = inside & found.undecided[a0]
    determined = inside & ~result.undecided & (result.high - result.low <= tol)
    result.determined[:] = determined
    result.values[determined] = (result.low[determined] + result.high[determined]) / 2.0
    rows = np.flatnonzero(determined)
    result.explained[rows] = -2
    single = rows[size[atom[rows]] == 1]
    if single.size:
        result.explained[single] = system.explain(atom[single], single, groups)
    return result


def _check_bounds(x: NDArray[Any], lo: float, hi: float, aggs: Sequence[Aggregate]) -> None:
    outside = int(((x < lo) | (x > hi)).sum())
    if outside:
        column = aggs[0].column if aggs else "the column"
        raise ParameterError(
            f"the public bounds of {column!r} ({figure(lo)} to {figure(hi)}) leave out "
            f"{outside} of the source's values; give bounds that hold every value"
        )


def public_bounds(x: NDArray[Any], bounds: Sequence[float] | None) -> tuple[float, float]:
    if bounds is None:
        finite = x[np.isfinite(x)]
        return (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)
    lo, hi = (float(b) for b in bounds)
    if not lo <= hi:
        raise ParameterError(f"public bounds must have low <= high, got {lo:g} and {hi:g}")
    return lo, hi


@dataclass
class _System:
    """Equations over atoms (duplicates merged), with the original groups behind each."""

    eqs: Equations
    orig_agg: NDArray[Any]  # per original equation (aggregate, group), sorted by representative
    orig_group: NDArray[Any]
    orig_ptr: NDArray[Any]  # representative r's originals: orig_*[orig_ptr[r]:orig_ptr[r+1]]
    key: NDArray[Any]  # per representative: hash of its atom set (with its size mixed in)
    weight: NDArray[Any]  # per atom: the random 64-bit weight in the hash
    low: NDArray[Any]  # per representative: its total's interval (all its originals hold)
    high: NDArray[Any]

    @classmethod
    def build(
        cls,
        aggs: Sequence[Aggregate],
        groups: Sequence[NDArray[Any]],
        atom: NDArray[Any],
        n_atoms: int,
    ) -> _System:
        offsets = np.cumsum([0] + [len(a.figures) for a in aggs])
        eq_ids = np.concatenate([offsets[k] + g[g >= 0] for k, g in enumerate(groups)])
        atom_ids = np.concatenate([atom[g >= 0] for g in groups])
        pair = np.unique(eq_ids * n_atoms + atom_ids)
        eq_of, atom_of = np.divmod(pair, n_atoms)
        # Hash each equation's atom set: a sum of random 64-bit weights (wrapping), its size
        # mixed in; equal sets give equal keys, and different ones collide with chance ~2^-64.
        weight = (
            np.random.default_rng(20240611)
            .integers(0, 2**63 - 1, size=n_atoms, dtype=np.int64)
            .astype(np.uint64)
        )
        present, first = np.unique(eq_of, return_index=True)
        size = np.diff(np.r_[first, eq_of.size])
        key = np.add.reduceat(weight[atom_of], first) ^ (size.astype(np.uint64) * _GOLDEN)
        _, first_of_key, rep_code = np.unique(key, return_index=True, return_inverse=True)
        keep = np.zeros(present.size, dtype=bool)
        keep[first_of_key] = True
        new_index = np.cumsum(keep) - 1
        rep = new_index[first_of_key[rep_code.reshape(-1)]]
        agg_of = np.searchsorted(offsets, present, side="right") - 1
        by_rep = np.argsort(rep, kind="stable")
        orig_ptr = np.r_[0, np.cumsum(np.bincount(rep, minlength=int(keep.sum())))]
        entry_keep = np.repeat(keep, size)
        n_reps = int(keep.sum())
        intervals = [a.total_intervals() for a in aggs]
        low = np.full(n_reps, -np.inf)
        high = np.full(n_reps, np.inf)
        np.maximum.at(low, rep, np.concatenate([lo for lo, _ in intervals])[present])
        np.minimum.at(high, rep, np.concatenate([hi for _, hi in intervals])[present])
        high = np.maximum(low, high)
        eqs = Equations(
            n_atoms,
            np.r_[0, np.cumsum(size[keep])].astype(np.int64),
            atom_of[entry_keep].astype(np.int64),
            (low + high) / 2.0,
        )
        return cls(
            eqs,
            agg_of[by_rep],
            (present - offsets[agg_of])[by_rep],
            orig_ptr,
            key[keep],
            weight,
            low,
            high,
        )

    def explain(
        self, atoms: NDArray[Any], rows: NDArray[Any], groups: Sequence[NDArray[Any]]
    ) -> NDArray[Any]:
        """For determined one-record atoms: a group of that record alone, or two groups whose
        difference is that record (preferring a second group from an aggregate the record is
        absent from: a differencing attack); ``-2`` everywhere when more are needed."""
        out = np.full((atoms.size, 4), -2, dtype=np.int64)
        if not atoms.size:
            return out
        position = np.full(self.eqs.n_vars, -1, dtype=np.int64)
        position[atoms] = np.arange(atoms.size)
        eq_of = self.eqs.eq_of_entry()
        sizes = self.eqs.sizes()
        hit = position[self.eqs.var] >= 0
        e, a = eq_of[hit], self.eqs.var[hit]
        who = position[a]
        # The set less the atom: subtract its weight, re-mix the size.
        base = self.key[e] ^ (sizes[e].astype(np.uint64) * _GOLDEN)
        want = (base - self.weight[a]) ^ ((sizes[e] - 1).astype(np.uint64) * _GOLDEN)
        srt = np.argsort(self.key)
        at = np.minimum(np.searchsorted(self.key[srt], want), srt.size - 1)
        small = np.where(self.key[srt[at]] == want, srt[at], -1)
        single = sizes[e] == 1
        usable = single | (small >= 0)
        e, small, who, single = e[usable], small[usable], who[usable], single[usable]
        if not e.size:
            return out
        stacked = np.stack(groups)
        absent_k, _ = self._pick(np.maximum(small, 0), rows[who], stacked, absent=True)
        absent = ~single & (absent_k >= 0)
        rank = np.where(single, 0, np.where(absent, 1, 2))
        best = np.lexsort((rank, who))
        first = best[np.r_[True, who[best][1:] != who[best][:-1]]]
        i = who[first]
        big_k, big_g = self._pick(e[first], rows[i], stacked, absent=False)
        abs_k, abs_g = self._pick(np.maximum(small[first], 0), rows[i], stacked, absent=True)
        any_k, any_g = self._pick(np.maximum(small[first], 0), rows[i], stacked, absent=False)
        sm_k = np.where(abs_k >= 0, abs_k, any_k)
        sm_g = np.where(abs_k >= 0, abs_g, any_g)
        is_single = single[first]
        out[i, 0], out[i, 1] = big_k, big_g
        out[i, 2] = np.where(is_single, -1, sm_k)
        out[i, 3] = np.where(is_single, -1, sm_g)
        return out

    def _pick(
        self, reps: NDArray[Any], rows: NDArray[Any], stacked: NDArray[Any], *, absent: bool
    ) -> tuple[NDArray[Any], NDArray[Any]]:
        """Per (merged equation, record): the first original (aggregate, group) behind it, or
        with ``absent`` the first from an aggregate the record is not in (-1 if none)."""
        lo, hi = self.orig_ptr[reps], self.orig_ptr[reps + 1]
        count = hi - lo
        which = np.repeat(np.arange(reps.size), count)
        cand = np.repeat(lo - np.r_[0, np.cumsum(count)[:-1]], count) + np.arange(count.sum())
        k, g = self.orig_agg[cand], self.orig_group[cand]
        ok = np.ones(cand.size, dtype=bool)
        if absent:
            ok = stacked[k, rows[which]] < 0
        big = np.iinfo(np.int64).max
        pos = np.where(ok, np.arange(cand.size), big)
        starts = np.r_[0, np.cumsum(count)[:-1]]
        chosen = np.minimum.reduceat(pos, starts) if cand.size else np.zeros(0, dtype=np.int64)
        found = chosen != big
        out_k = np.full(reps.size, -1, dtype=np.int64)
        out_g = np.full(reps.size, -1, dtype=np.int64)
        out_k[found], out_g[found] = k[chosen[found]], g[chosen[found]]
        return out_k, out_g


def figure(value: float) -> str:
    return f"{value:,.6g}"


def describe_group(agg: Aggregate, group: int) -> str:
    size = int(agg.sizes()[group])
    what = "total" if agg.statistic == "sum" else "mean"
    people = "one person" if size == 1 else f"{size:,} people"
    return f"{agg.release}'s {what} of {agg.column} over {people} ({figure(float(agg.figures[group]))})"


def _term(agg: Aggregate, group: int) -> str:
    fig = figure(float(agg.figures[group]))
    return f"{int(agg.sizes()[group]):,} × {fig}" if agg.statistic == "mean" else fig


def recipe(inf: Inference, row: int) -> tuple[str, str]:
    """(type, explanation) for a determined record."""
    k1, g1, k2, g2 = inf.explained[row].tolist()
    aggs = inf.aggregates
    if k1 == -2:
        releases = sorted({a.release for a in aggs})
        return "exact_inference", (
            f"the group figures of {aggs[0].column} published by {_join(releases)} are linear "
            "equations that, with the column's bounds, fix these values exactly (more than two "
            "of them are combined)"
        )
    big = aggs[k1]
    if k2 < 0:
        return "exact_inference", f"{describe_group(big, g1)} is that person's value"
    small = aggs[k2]
    absent = small.groups[row] < 0
    arithmetic = f"{_term(big, g1)} − {_term(small, g2)}"
    if absent:
        return "differencing", (
            f"{describe_group(big, g1)} minus {describe_group(small, g2)} (the same people "
            f"less one, who is not in {small.release}) is that person's {big.column}: "
            f"{arithmetic}"
        )
    return "exact_inference", (
        f"{describe_group(big, g1)} and {describe_group(small, g2)}: the same people but one, "
        f"who {small.release} groups with others; {arithmetic} is that person's {big.column}"
    )


def _join(items: Sequence[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]
