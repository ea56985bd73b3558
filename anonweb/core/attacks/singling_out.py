"""Predicate singling out (Cohen and Nissim, "Towards formalizing the GDPR's notion of singling
out", PNAS 2020).

An attacker writes predicates from what the release shows: a released row's values on a random
subset of the attacked columns (a released label covers the values it generalizes; a number
matches within the tolerance). A predicate *singles out* when exactly one person of a group
matches it. The same predicates are evaluated on equal-sized groups of people in the release
and of people not in it: the second rate is what such predicates achieve by chance on people of
the same population, so the excess is what the release gave away.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from anonweb.core.attacks.matching import Column
from anonweb.core.attacks.records import Combos

CELLS = 4_000_000


def draw_predicates(
    combos: Combos, n_columns: int, count: int, *, rng: np.random.Generator
) -> tuple[NDArray[np.int64], NDArray[np.bool_]]:
    """``count`` predicates: the released row each is read from and the columns it uses."""
    weights = combos.counts / combos.counts.sum()
    rows = rng.choice(len(combos.counts), size=count, p=weights).astype(np.int64)
    sizes = rng.integers(1, n_columns + 1, size=count)
    order = np.argsort(rng.random((count, n_columns)), axis=1)
    use = order < sizes[:, None]
    return rows, use


def singled_out(
    rows: NDArray[np.int64],
    use: NDArray[np.bool_],
    columns: Sequence[Column],
    group: NDArray[np.int64],
) -> int:
    """How many predicates match exactly one person of ``group`` (person indices)."""
    step = max(1, CELLS // max(len(group), 1))
    found = 0
    for start in range(0, len(rows), step):
        r = rows[start : start + step][:, None]
        u = use[start : start + step]
        match = np.ones((r.shape[0], len(group)), dtype=bool)
        for j, col in enumerate(columns):
            match &= col.agree(r, group[None, :]) | ~u[:, j][:, None]
        found += int(np.sum(match.sum(axis=1) == 1))
    return found
