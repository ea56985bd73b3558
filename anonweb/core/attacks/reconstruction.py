"""Reconstruction (Dinur and Nissim, "Revealing information while preserving privacy", 2003):
every figure published about a group of people is a constraint on their values, and an
attacker holding enough of them solves for the values themselves.

* **Numbers**: sums and means over groups are linear equations over the column's values; the
  conflict check's solver (:mod:`anonweb.core.conflicts.solver`) names the values they fix. The
  column's bounds and, for a whole-number column, integrality are constraints too, which linear
  algebra ignores: an integer program (``scipy.optimize.milp``) takes the smallest and largest
  value each remaining person can have; equal means determined.
* **Categories**: a count of the people of a group with a given value (a cell of a table by age
  and sex) is a linear equation over 0/1 unknowns, one per person and value, each person having
  exactly one value. A person's value is determined when no solution gives them another one.

A figure with bounded error (rounded to the nearest 5, say) is given with its ``slack`` and
constrains within it. A DP figure (``dp=True``) constrains nothing: its noise (Laplace,
Gaussian, geometric) has unbounded support, so it rules out no value with certainty, and a
value is *determined* only when every solution gives it. DP releases are left to the budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from anonweb.core.conflicts.inference import Aggregate
from anonweb.core.conflicts.lineage import relabel
from anonweb.core.conflicts.solver import Equations, solve
from anonweb.core.errors import ParameterError

MAX_PROGRAMS = 4000  # integer programs solved per call: people beyond are reported undecided


@dataclass(frozen=True)
class CountCell:
    """``count`` of the people ``records`` have ``value`` (give or take ``slack``; a DP count
    with ``dp``)."""

    records: NDArray[np.int64]
    value: str
    count: float
    slack: float = 0.0
    dp: bool = False


@dataclass(frozen=True)
class Reconstruction:
    column: str
    values: dict[int, Any]  # person -> the value every solution gives them
    checked: int  # people the figures constrain
    undecided: int  # constrained people not checked (past the work bound)
    consistent: bool  # False: no values satisfy the figures (they are not exact)

    def to_dict(self, ids: Sequence[Any] | None = None) -> dict[str, Any]:
        def name(i: int) -> Any:
            return ids[i] if ids is not None else i

        return {
            "column": self.column,
            "determined": len(self.values),
            "records": [name(i) for i in sorted(self.values)],
            "values": {str(name(i)): v for i, v in sorted(self.values.items())},
            "checked": self.checked,
            "undecided": self.undecided,
            "consistent": self.consistent,
        }


def _matrix(eqs: Equations) -> sparse.csr_matrix:
    data = np.ones(len(eqs.var))
    return sparse.csr_matrix((data, eqs.var, eqs.ptr), shape=(eqs.count, eqs.n_vars))


def reconstruct_numeric(
    eqs: Equations,
    *,
    column: str,
    low: float,
    high: float,
    integer: bool = False,
    tolerance: float = 1e-6,
    slack: NDArray[Any] | None = None,
) -> Reconstruction:
    """The values of ``column`` that published sums (``eqs``), its bounds and integrality fix.

    ``slack`` (one per equation) is how far each published total may be from the true one (a
    mean printed to two decimals, times the group's size); with any, a value is determined only
    when the integer programs pin it, never by linear algebra alone."""
    if not low <= high:
        raise ParameterError(f"the bounds of {column!r} are reversed: {low} > {high}")
    inexact = slack is not None and bool(np.any(np.asarray(slack) > 0))
    values: dict[int, float] = {}
    if not inexact:
        linear = solve(eqs)
        values = {int(i): float(linear.values[i]) for i in np.flatnonzero(linear.determined)}
    constrained = np.unique(eqs.var)
    rest = [int(i) for i in constrained if int(i) not in values]
    a = _matrix(eqs)
    slack = tolerance * np.maximum(1.0, np.abs(eqs.rhs)) + (
        0.0 if slack is None else np.asarray(slack, dtype=float)
    )
    constraint = LinearConstraint(a, eqs.rhs - slack, eqs.rhs + slack)
    kinds = np.full(eqs.n_vars, 1 if integer else 0)
    bounds = Bounds(np.full(eqs.n_vars, low), np.full(eqs.n_vars, high))
    feasible = milp(np.zeros(eqs.n_vars), constraints=constraint, integrality=kinds, bounds=bounds)
    if feasible.status != 0:
        return Reconstruction(column, {}, len(constrained), 0, False)
    budget = MAX_PROGRAMS // 2
    checked = rest[:budget]
    for i in checked:
        c = np.zeros(eqs.n_vars)
        c[i] = 1.0
        lo = milp(c, constraints=constraint, integrality=kinds, bounds=bounds)
        hi = milp(-c, constraints=constraint, integrality=kinds, bounds=bounds)
        if lo.status == 0 and hi.status == 0 and hi.x[i] - lo.x[i] <= 1e-6 * max(1, abs(lo.x[i])):
            values[i] = float(round(lo.x[i]) if integer else lo.x[i])
    return Reconstruction(column, values, len(constrained), len(rest) - len(checked), True)


def aggregate_equations(
    aggregates: Sequence[Aggregate], n_records: int
) -> tuple[Equations, NDArray[Any]]:
    """Each group of each aggregate as an equation over the source's records (``groups[i]`` the
    group of record ``i``), with the slack its printed precision leaves. DP aggregates are
    left out: their noise rules out no value."""
    ptr, var, rhs, slack = [0], [], [], []
    for agg in aggregates:
        groups = np.asarray(agg.groups, dtype=np.int64)
        if groups.size != n_records:
            raise ParameterError(
                f"{agg.release}: {agg.column!r} describes {groups.size} records, "
                f"the source has {n_records}"
            )
        lo, hi = agg.total_intervals()
        rows = np.flatnonzero(groups >= 0)
        order = rows[np.argsort(groups[rows], kind="stable")]
        sizes = np.bincount(groups[rows], minlength=len(agg.figures))
        for g in np.flatnonzero(sizes):
            start = int(np.searchsorted(groups[order], g))
            var.append(order[start : start + int(sizes[g])])
            ptr.append(ptr[-1] + int(sizes[g]))
            rhs.append((lo[g] + hi[g]) / 2)
            slack.append((hi[g] - lo[g]) / 2)
    eqs = Equations(
        n_records,
        np.asarray(ptr, dtype=np.int64),
        np.concatenate(var).astype(np.int64) if var else np.zeros(0, dtype=np.int64),
        np.asarray(rhs, dtype=float),
    )
    return eqs, np.asarray(slack, dtype=float)


def reconstruct_aggregates(
    aggregates: Sequence[Aggregate],
    *,
    values: NDArray[Any],
    column: str,
    dp: Sequence[bool] | None = None,
) -> Reconstruction:
    """What all the published aggregates of ``column`` (of every release of one source,
    together) fix, within the column's bounds (its smallest and largest value, ``values`` being
    the source column) and integrality. ``dp[j]`` marks aggregate ``j`` as differentially
    private: left out."""
    kept = [a for j, a in enumerate(aggregates) if not (dp is not None and dp[j])]
    kept = [a for a in kept if a.column == column]
    x = np.asarray(values, dtype=float)
    if not kept or not np.isfinite(x).any():
        return Reconstruction(column, {}, 0, 0, True)
    eqs, slack = aggregate_equations(kept, len(x))
    finite = x[np.isfinite(x)]
    integer = bool(np.all(finite == np.round(finite)))
    # Only the records some figure covers are unknowns of the programs.
    people, local = np.unique(eqs.var, return_inverse=True)
    small = Equations(len(people), eqs.ptr, local.astype(np.int64), eqs.rhs)
    found = reconstruct_numeric(
        small,
        column=column,
        low=float(finite.min()),
        high=float(finite.max()),
        integer=integer,
        slack=slack,
    )
    return Reconstruction(
        column,
        {int(people[i]): v for i, v in found.values.items()},
        found.checked,
        found.undecided,
        found.consistent,
    )


def reconstruction_report(
    source: pd.DataFrame, releases: Sequence[tuple[str, Sequence[Aggregate], bool]]
) -> dict[str, Any]:
    """The records whose values the aggregates of all ``releases`` of ``source`` (each
    ``(label, aggregates, dp)``: the live releases of the source, with a release being written)
    determine together, column by column. Aggregates over another upload of the data (groups of
    another length) are left out, and DP releases constrain nothing."""
    aggregates: list[Aggregate] = []
    dp: list[bool] = []
    labels: list[str] = []
    for label, published, is_dp in releases:
        usable = [relabel(a, label) for a in published if np.asarray(a.groups).size == len(source)]
        if not usable:
            continue
        aggregates += usable
        dp += [is_dp] * len(usable)
        labels.append(label)
    columns = []
    records: set[int] = set()
    for column in dict.fromkeys(a.column for a in aggregates):
        if column not in source.columns or not pd.api.types.is_numeric_dtype(source[column]):
            continue
        found = reconstruct_aggregates(
            aggregates,
            values=source[column].to_numpy(dtype=float),
            column=column,
            dp=dp,
        )
        columns.append(found.to_dict())
        records |= set(found.values)
    total = len(records)
    if not aggregates:
        sentence = "No release of this source publishes aggregates: nothing to reconstruct."
    elif total == 0:
        sentence = (
            "The aggregates published by the live releases of this source, taken together, "
            "determine no one's value."
        )
    else:
        names = ", ".join(c["column"] for c in columns if c["determined"])
        sentence = (
            f"Taken together, the aggregates published by the live releases of this source "
            f"determine the exact {names} of {total} record(s)."
        )
    return {"determined": total, "releases": labels, "columns": columns, "sentence": sentence}


def reconstruct_categories(
    n_records: int, cells: Sequence[CountCell], *, column: str, categories: Sequence[str]
) -> Reconstruction:
    """The values of ``column`` that published counts fix, person by person."""
    cells = [c for c in cells if not c.dp]
    if not cells:
        return Reconstruction(column, {}, 0, 0, True)
    cats = list(dict.fromkeys(categories))
    index = {c: j for j, c in enumerate(cats)}
    unknown = sorted({c.value for c in cells} - set(index))
    if unknown:
        raise ParameterError(f"counts of values not among the categories: {', '.join(unknown)}")
    k = len(cats)
    n_vars = n_records * k
    rows, cols, lo, hi = [], [], [], []
    for r in range(n_records):  # each person has exactly one value
        rows += [r] * k
        cols += [r * k + j for j in range(k)]
        lo.append(1.0)
        hi.append(1.0)
    for e, cell in enumerate(cells, start=n_records):
        members = np.asarray(cell.records, dtype=np.int64)
        rows += [e] * len(members)
        cols += list(members * k + index[cell.value])
        lo.append(cell.count - cell.slack)
        hi.append(cell.count + cell.slack)
    a = sparse.csr_matrix((np.ones(len(rows)), (rows, cols)), shape=(len(lo), n_vars))
    constraint = LinearConstraint(a, np.asarray(lo), np.asarray(hi))
    binary = Bounds(np.zeros(n_vars), np.ones(n_vars))
    kinds = np.ones(n_vars)
    first = milp(np.zeros(n_vars), constraints=constraint, integrality=kinds, bounds=binary)
    constrained = np.unique(np.concatenate([np.asarray(c.records) for c in cells]))
    if first.status != 0:
        return Reconstruction(column, {}, len(constrained), 0, False)
    guess = first.x.reshape(n_records, k).argmax(axis=1)
    values: dict[int, Any] = {}
    checked = [int(i) for i in constrained[:MAX_PROGRAMS]]
    for i in checked:
        # determined when no solution gives person i another value than the one found
        c = np.zeros(n_vars)
        c[i * k + guess[i]] = 1.0
        other = milp(c, constraints=constraint, integrality=kinds, bounds=binary)
        if other.status == 0 and other.x[i * k + guess[i]] > 0.5:
            values[i] = cats[guess[i]]
    return Reconstruction(column, values, len(constrained), len(constrained) - len(checked), True)
