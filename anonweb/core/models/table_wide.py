"""Which further classes a node suppresses so that its table-wide models hold (ARX's rule).

The per-class models decide the classes that fail them; a table-wide model (average risk,
population uniqueness, the survey-weighted ceilings: ``per_class = False``) is a property of
the classes kept. When the kept classes do not meet it, what is left of the suppression limit
is spent on the smallest classes, the fewest of them that make every table-wide model hold; if
even the limit does not suffice, the node fails. This is ARX's ``RiskBasedCriterion.enforce``
(a bisection over the classes sorted by size, ``HashGroupifyDistribution``), and the one
definition the search's node check, the release of its node and the what-if call.

Order of the classes: by size, smallest first; among classes of one size by the keys the
caller gives (ARX: the class's information loss under the metric, then its first record; see
:mod:`anonweb.core.search.suppression_order`). ARX also leaves out of the candidates a class at
the top of every hierarchy: that is the top node's one class of every record, which a limit
below the whole table never suppresses here either.

How many: the fewest ``j`` such that the models hold once the first ``j`` classes of that order
are suppressed too, among the ``j`` whose records fit the budget. The bisection that finds it
assumes that a prefix that meets the models stays meeting them when it grows (more of the
smallest suppressed); ARX assumes the same.

* Average risk (classes / records kept) meets this exactly. Let ``c`` classes hold ``r``
  records, the smallest ``s``. The smallest class is no larger than the mean, so ``c s <= r``,
  hence ``r (c - 1) <= c (r - s)``, i.e. ``(c - 1) / (r - s) <= c / r``: suppressing the
  smallest kept class never raises classes / records, and after it the smallest of the rest is
  again no larger than their mean. Along the order the ratio never grows (equal sizes are
  interchangeable here), so once it is under the ceiling it stays there, and the bisection finds
  the fewest exactly. Nothing kept is risk 0.
* The survey ceilings without a weight column read classes / records too (every record stands
  for itself): the same argument holds.
* Population uniqueness refits its model on what is kept, so its estimate need not fall with
  each class suppressed (a sample unique removed also shrinks the sample): the bisection
  assumes it does, as ARX's does; a table with nothing kept passes. With weights or households
  the survey ceilings read each record's weight, which need not fall either: the same
  assumption.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from anonweb.core.models.base import PrivacyModel
from anonweb.core.models.counts import ClassData

# keys that order classes of one size, most significant first, for the classes given
Ties = Callable[[NDArray[Any]], Sequence[NDArray[Any]]]


def table_wide_suppression(
    models: Sequence[PrivacyModel],
    data: ClassData,
    out: NDArray[Any],
    budget: int,
    *,
    ties: Ties | None = None,
) -> NDArray[Any] | None:
    """The classes, besides those ``out`` already suppresses, that are suppressed so that every
    one of ``models`` holds on the classes kept, with at most ``budget`` more records; None
    when no number of the smallest classes within ``budget`` makes them hold.

    ``ties`` gives the keys that order classes of equal size (class order without it)."""
    groups = np.zeros(len(data), dtype=np.int64)
    more, met = table_wide_suppression_in_groups(
        models,
        data,
        out,
        groups,
        np.array([budget]),
        ties=None if ties is None else lambda _g: ties,
    )
    return more if bool(met[0]) else None


def table_wide_suppression_in_groups(
    models: Sequence[PrivacyModel],
    data: ClassData,
    out: NDArray[Any],
    groups: NDArray[Any],
    budgets: NDArray[Any],
    *,
    ties: Callable[[int], Ties] | None = None,
) -> tuple[NDArray[Any], NDArray[Any]]:
    """:func:`table_wide_suppression` for several tables at once (the nodes of a search
    batch), the classes assigned to tables by ``groups``, table ``g`` with ``budgets[g]``
    records to spare (a negative budget: the table has failed already and is not looked at).
    ``ties(g)`` orders table ``g``'s classes, numbered in the order they appear in ``data``.

    Returns the further classes suppressed and, per table, whether its models hold."""
    n_groups = len(budgets)
    out = np.asarray(out, dtype=bool)
    more = np.zeros(len(data), dtype=bool)
    met = np.asarray(budgets) >= 0
    if not models or not met.any():
        return more, met
    kept = ~out
    kept_data = data.select(kept)
    holds = np.ones(n_groups, dtype=bool)
    for m in models:
        holds &= m.satisfied_in_groups(kept_data, groups[kept], n_groups)
    short = np.flatnonzero(met & ~holds)
    if not len(short):
        return more, met
    order = np.argsort(groups, kind="stable")
    bounds = np.searchsorted(groups[order], np.arange(n_groups + 1))
    for g in short.tolist():
        rows = order[bounds[g] : bounds[g + 1]]
        if len(rows) == len(data):
            table = data
        else:
            member = np.zeros(len(data), dtype=bool)
            member[rows] = True
            table = data.select(member)  # its classes in the order of ``rows``
        taken = _fewest_smallest(
            models,
            table,
            out[rows],
            int(budgets[g]),
            None if ties is None else ties(g),
        )
        if taken is None:
            met[g] = False
        else:
            more[rows[taken]] = True
    return more, met


def _fewest_smallest(
    models: Sequence[PrivacyModel],
    data: ClassData,
    out: NDArray[Any],
    budget: int,
    ties: Ties | None,
) -> NDArray[Any] | None:
    """For one table whose kept classes fail the models: the positions of the fewest smallest
    classes whose suppression makes them hold within ``budget`` records (see the module)."""
    candidates = np.flatnonzero(~out)
    sizes = data.sizes[candidates]
    by_size = np.sort(sizes, kind="stable")
    # how many of the smallest fit the budget: the sum over the first j classes in size order
    # is the same whatever the order among equal sizes
    affordable = int(np.searchsorted(np.cumsum(by_size), budget, side="right"))
    if affordable == 0:
        return None
    # the classes that can be among the first ``affordable``: those no larger than the last
    # one, ordered by size, then by the tie keys; when every model reads the sizes alone, the
    # verdicts do not depend on which classes of one size go, and the keys are read once the
    # number is known, for the last size taken only
    head = candidates[sizes <= by_size[affordable - 1]]
    later = ties is not None and all(m.sizes_only for m in models)
    keys = [] if ties is None or later else list(ties(head))
    head = head[np.lexsort((*reversed(keys), data.sizes[head]))]

    def holds(j: int) -> bool:
        keep = ~out
        keep[head[:j]] = False
        kept = data.select(keep)
        return all(m.satisfied(kept) for m in models)

    if not holds(affordable):
        return None  # fewer hold even less (the bisection's assumption)
    lo, hi = 1, affordable  # the models fail at 0 and hold at ``affordable``
    while lo < hi:
        mid = (lo + hi) // 2
        if holds(mid):
            hi = mid
        else:
            lo = mid + 1
    if later and ties is not None:
        last = data.sizes[head[lo - 1]]
        smaller = head[data.sizes[head] < last]
        same = head[data.sizes[head] == last]  # every candidate of that size: all in ``head``
        if lo - len(smaller) < len(same):
            same = same[np.lexsort(tuple(reversed(list(ties(same)))))]
        return np.asarray(np.concatenate((smaller, same[: lo - len(smaller)])))
    return np.asarray(head[:lo])
