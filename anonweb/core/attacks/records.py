"""The record-level attacks: linkage, attribute inference and membership, from the distances
between people's true values and the release's rows.

The release is reduced to its distinct combinations over the attacked columns (a generalized
release has few), and people are compared with them a chunk at a time, so memory stays bounded
by ``CELLS`` whatever the size of the release.

* **Linkage**: the attacker knows a person's ``known`` columns and picks uniformly among the
  release rows closest to them (distance 0 on a generalized release: every row whose values
  cover theirs). The person is linked when a row agreeing with them on every attacked column
  is among those; the success probability is then 1/(rows picked among), so a class of k rows
  gives at most 1/k.
* **Inference**: the same rows predict each sensitive column: the most frequent released value
  (ties shared), or for a number the mean, correct within ``tolerance`` of the column's range.
  A suppressed ``*`` is never a correct prediction.
* **Membership**: the distance to the closest record (DCR) over all attacked columns; the AUC
  says how well a small DCR tells people in the release from people not in it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.attacks.matching import Column

CELLS = 4_000_000  # person x combination distances held at once (float32: 16 MB)
PAIRS = 500_000  # person/combination pairs compared at once (inference: about 50 MB)


@dataclass(frozen=True)
class Combos:
    """The release's distinct rows over the attacked columns, with how many rows each is."""

    frame: pd.DataFrame
    counts: NDArray[Any]
    of_row: NDArray[Any]  # the combination of each release row


def release_combos(release: pd.DataFrame, columns: Sequence[str]) -> Combos:
    groups = release.groupby(list(columns), dropna=False, sort=False, observed=True)
    grouped = groups.size()
    frame = grouped.index.to_frame(index=False)
    frame.columns = list(columns)
    of_row = groups.ngroup().to_numpy(dtype=np.int64)
    return Combos(frame, grouped.to_numpy(dtype=np.int64), of_row)


@dataclass(frozen=True)
class Neighbours:
    """Per person: the combinations at the smallest distance over the known columns (person
    ``p``'s are ``combo[ptr[p]:ptr[p + 1]]``, as int32: on a generalized release each person
    ties with thousands), and the smallest distance over all attacked columns (the DCR)."""

    ptr: NDArray[Any]  # int64, one more than there are people
    combo: NDArray[Any]  # int32
    dcr: NDArray[Any]

    def chunks(self, people: NDArray[Any]) -> Iterator[tuple[NDArray[Any], NDArray[Any]]]:
        """The (person, combination) pairs of ``people``, about ``PAIRS`` at a time, a person's
        pairs never split: only one chunk's person indices exist at once."""
        people = np.asarray(people, dtype=np.int64)
        sizes = self.ptr[people + 1] - self.ptr[people]
        ends = np.cumsum(sizes)
        first = 0
        while first < len(people):
            done = int(ends[first - 1]) if first else 0
            last = max(first + 1, int(np.searchsorted(ends, done + PAIRS, side="right")))
            who, size = people[first:last], sizes[first:last]
            person = np.repeat(who, size)
            if len(who) and who[-1] - who[0] == len(who) - 1:  # a run: the pairs are a slice
                combo = self.combo[self.ptr[who[0]] : self.ptr[who[-1] + 1]]
            else:
                starts = self.ptr[who] - np.r_[0, np.cumsum(size)[:-1]]
                combo = self.combo[np.arange(int(size.sum())) + np.repeat(starts, size)]
            yield person, combo
            first = last


def neighbours(
    combos: Combos,
    columns: dict[str, Column],
    known: Sequence[str],
    people: int,
    *,
    progress: Callable[[float], None] | None = None,
) -> Neighbours:
    n_combos = len(combos.counts)
    step = max(1, CELLS // max(n_combos, 1))
    counts = np.zeros(people, dtype=np.int64)
    picked: list[NDArray[Any]] = []
    dcr = np.empty(people, dtype=float)
    known_set = set(known)
    for start in range(0, people, step):
        p = np.arange(start, min(start + step, people))
        d_known = np.zeros((p.shape[0], n_combos), dtype=np.float32)
        d_rest = np.zeros_like(d_known)
        for name, col in columns.items():
            d = col.distance_block(p)
            if name in known_set:
                d_known += d
            else:
                d_rest += d
            del d
        d_all = np.add(d_rest, d_known, out=d_rest)
        low = d_known.min(axis=1, keepdims=True)
        i, j = np.nonzero(d_known <= low + 1e-6)  # row by row: each person's together
        counts[start : start + p.shape[0]] = np.bincount(i, minlength=p.shape[0])
        picked.append(j.astype(np.int32))
        del i, j
        dcr[start : start + p.shape[0]] = d_all.min(axis=1) / max(len(columns), 1)
        if progress is not None:
            progress(min(1.0, (start + step) / people))
    combo = np.concatenate(picked) if picked else np.zeros(0, np.int32)
    return Neighbours(np.r_[0, np.cumsum(counts)].astype(np.int64), combo, dcr)


def linkage_successes(
    nb: Neighbours,
    combos: Combos,
    columns: dict[str, Column],
    people: NDArray[Any],
    own: NDArray[Any] | None = None,
) -> float:
    """Expected number of ``people`` (indices) linked to a row of their own.

    A row of their own is a row agreeing with them on every attacked column (what the release
    tells of them: the only test there is for people not in it) or, with ``own`` (the
    combination of each person's own release row, -1 for none: the release's lineage), that
    row, however far noise moved it. The same test for members and the control, so that the
    excess is what membership adds.
    """
    size = int(np.max(people)) + 1 if len(people) else 0
    matches = np.zeros(size)
    has_own = np.zeros(size, dtype=bool)
    for person, combo in nb.chunks(people):
        agree = np.ones(len(person), dtype=bool)
        for col in columns.values():
            agree &= col.agree(combo, person)
        if own is not None:
            agree |= combo == own[person]
        matches += np.bincount(person, weights=combos.counts[combo], minlength=size)
        has_own |= np.bincount(person[agree], minlength=size) > 0
    rows = matches[people]
    return float(np.sum(np.where(rows > 0, has_own[people] / np.maximum(rows, 1), 0.0)))


def inference_successes(nb: Neighbours, combos: Combos, col: Column, people: NDArray[Any]) -> float:
    """Expected number of ``people`` whose value of ``col`` the linked rows predict."""
    if col.numeric:
        size = int(np.max(people)) + 1
        total = np.zeros(size)
        count = np.zeros(size)
        for person, combo in nb.chunks(people):
            value = col.r_val[combo]
            ok = ~np.isnan(value)
            weight = combos.counts[combo[ok]].astype(float)
            total += np.bincount(person[ok], weights=weight * value[ok], minlength=size)
            count += np.bincount(person[ok], weights=weight, minlength=size)
        guess = np.where(count > 0, total / np.maximum(count, 1e-300), np.nan)[people]
        truth = col.p_val[people]
        return float(np.sum(np.abs(guess - truth) <= col.tolerance))
    shares = []
    for person, combo in nb.chunks(people):
        table = pd.DataFrame(
            {"p": person, "v": col.r_codes[combo], "c": combo, "w": combos.counts[combo]}
        )
        votes = table.groupby(["p", "v"], sort=False).agg(w=("w", "sum"), c=("c", "first"))
        del table
        votes = votes.reset_index()
        top = votes[votes["w"] == votes.groupby("p")["w"].transform("max")]
        c_top, p_top = top["c"].to_numpy(), top["p"].to_numpy()
        right = col.covers(c_top, p_top) & ~col.r_star[c_top]
        shares.append(pd.Series(right.astype(float)).groupby(p_top).mean())
    if not shares:
        return 0.0
    return float(pd.concat(shares).reindex(people, fill_value=0.0).sum())


def dcr_auc(members: NDArray[Any], others: NDArray[Any]) -> float:
    """P(a member's DCR is smaller than a non-member's), ties counted half."""
    from scipy.stats import rankdata

    both = np.concatenate([members, others])
    ranks = rankdata(-both)  # a smaller distance ranks higher
    n1, n2 = len(members), len(others)
    return float((ranks[:n1].sum() - n1 * (n1 + 1) / 2) / (n1 * n2))
