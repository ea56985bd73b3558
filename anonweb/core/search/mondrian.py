"""Mondrian local recoding (LeFevre, DeWitt & Ramakrishnan 2006), strict multidimensional.

Partitions are split at the median of the dimension with the widest normalized range; a split is
allowed when both halves keep at least ``k`` records; when it is not, the next widest dimension is
tried. Splits are strict: all records equal to the median go to the same side, so partitions never
overlap. Each value is then replaced by its partition's range (``lo-hi``, or the value when the
range is a point).

The work is level-synchronous: every round splits all open partitions at once with sorts over
integer keys ``partition * span + rank``, so the cost is a few sorts of the table per round and
about log2(n / k) rounds, not a Python loop per partition. Non-numeric columns are ranked in their
sorted order (only sensible for ordinal data).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.errors import DataError, ParameterError
from anonweb.core.io.frame import require_columns


@dataclass(frozen=True)
class MondrianResult:
    quasi_identifiers: tuple[str, ...]
    k: int
    partitions: int
    smallest: int
    information_loss: float  # normalized certainty penalty, mean over records and QIs
    seconds: float
    partition: NDArray[Any] = field(repr=False, compare=False)
    lower: list[NDArray[Any]] = field(repr=False, compare=False)
    upper: list[NDArray[Any]] = field(repr=False, compare=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "quasi_identifiers": list(self.quasi_identifiers),
            "k": self.k,
            "partitions": self.partitions,
            "smallest_partition": self.smallest,
            "information_loss": self.information_loss,
            "seconds": self.seconds,
        }

    def apply(self, df: pd.DataFrame) -> pd.DataFrame:
        out = df.copy()
        for col, lo, hi in zip(self.quasi_identifiers, self.lower, self.upper):
            labels = np.array(
                [_fmt(a) if a == b else f"{_fmt(a)}-{_fmt(b)}" for a, b in zip(lo, hi)],
                dtype=object,
            )
            out[col] = pd.Series(labels[self.partition], index=df.index, dtype=object)
        return out


def _fmt(v: Any) -> str:
    if isinstance(v, float | np.floating) and float(v).is_integer():
        return str(int(v))
    return str(v)


def _ranks(df: pd.DataFrame, cols: Sequence[str]) -> tuple[NDArray[Any], list[NDArray[Any]]]:
    ranks, values = [], []
    for c in cols:
        s = df[c]
        if s.isna().any():
            raise DataError(f"Mondrian needs complete quasi-identifiers: {c!r} has missing values")
        arr = s.to_numpy()
        if not pd.api.types.is_numeric_dtype(s):
            arr = s.astype(str).to_numpy()
        uniq, inv = np.unique(arr, return_inverse=True)
        ranks.append(inv.astype(np.int32).ravel())
        values.append(uniq)
    return np.column_stack(ranks), values


def mondrian(df: pd.DataFrame, *, quasi_identifiers: Sequence[str], k: int) -> MondrianResult:
    """Partition ``df`` on ``quasi_identifiers`` into classes of at least ``k`` records."""
    started = time.perf_counter()
    cols = list(quasi_identifiers)
    require_columns(df, cols, role="quasi-identifier")
    if not isinstance(k, int | np.integer) or k < 1:
        raise ParameterError(f"k must be a positive integer, got {k!r}")
    if k > len(df):
        raise ParameterError(f"k={k} is larger than the table ({len(df)} rows)")
    ranks, values = _ranks(df, cols)
    scale = _scales(values)
    seg = _Segments(np.arange(len(df)), np.array([0]), np.array([len(df)]))
    open_ids = np.array([0])
    while len(open_ids):
        open_ids = _round(ranks, values, scale, seg, open_ids, k)
    return _finish(df, cols, ranks, values, scale, seg, k, started)


@dataclass
class _Segments:
    """Rows ordered so that every partition is a contiguous run: ``perm[start:start + size]``.

    Keeping this order across rounds (splits reorder within a run) spares a sort per round.
    """

    perm: NDArray[Any]
    start: NDArray[Any]
    size: NDArray[Any]


def _ranges(starts: NDArray[Any], sizes: NDArray[Any]) -> NDArray[Any]:
    """Concatenation of ``arange(s, s + n)`` for each pair, without a Python loop."""
    offsets = np.cumsum(sizes) - sizes
    return np.asarray(np.arange(int(sizes.sum())) + np.repeat(starts - offsets, sizes))


def _scales(values: list[NDArray[Any]]) -> NDArray[Any]:
    """Global width per dimension (ranks for non-numeric columns)."""
    out = []
    for v in values:
        span = float(v[-1] - v[0]) if np.issubdtype(v.dtype, np.number) else float(len(v) - 1)
        out.append(span if span > 0 else 1.0)
    return np.array(out)


def _widths(
    values: list[NDArray[Any]], scale: NDArray[Any], lo_rank: NDArray[Any], hi_rank: NDArray[Any]
) -> NDArray[Any]:
    cols = []
    for d, v in enumerate(values):
        if np.issubdtype(v.dtype, np.number):
            cols.append(
                (v[hi_rank[:, d]].astype(float) - v[lo_rank[:, d]].astype(float)) / scale[d]
            )
        else:
            cols.append((hi_rank[:, d] - lo_rank[:, d]) / scale[d])
    return np.column_stack(cols)


def _round(
    ranks: NDArray[Any],
    values: list[NDArray[Any]],
    scale: NDArray[Any],
    seg: _Segments,
    open_ids: NDArray[Any],
    k: int,
) -> NDArray[Any]:
    """Split every open partition once if possible; returns the partitions still open."""
    sizes, starts = seg.size[open_ids], seg.start[open_ids]
    pos = _ranges(starts, sizes)
    rows = seg.perm[pos]
    lid = np.repeat(np.arange(len(open_ids)), sizes)
    offs = np.cumsum(sizes) - sizes
    sub = ranks[rows]
    lo, hi = np.minimum.reduceat(sub, offs, axis=0), np.maximum.reduceat(sub, offs, axis=0)
    widths = _widths(values, scale, lo, hi)
    dims = np.argsort(-widths, axis=1, kind="stable")
    unresolved = sizes >= 2 * k
    split = np.zeros(len(open_ids), dtype=bool)
    goes_right = np.zeros(len(rows), dtype=bool)
    for attempt in range(ranks.shape[1]):
        dim = dims[:, attempt]
        unresolved &= widths[np.arange(len(open_ids)), dim] > 0
        if not unresolved.any():
            break
        ok, right = _try_split(sub, lid, sizes, dim, unresolved, k)
        goes_right |= right & ok[lid]
        split |= ok
        unresolved &= ~ok
    n_left = _regroup(seg, rows, lid, offs, starts, goes_right)
    new_ids = len(seg.size) + np.arange(int(split.sum()))
    seg.start = np.concatenate((seg.start, starts[split] + n_left[split]))
    seg.size = np.concatenate((seg.size, sizes[split] - n_left[split]))
    seg.size[open_ids[split]] = n_left[split]
    return np.concatenate((open_ids[split], new_ids))


def _regroup(
    seg: _Segments,
    rows: NDArray[Any],
    lid: NDArray[Any],
    offs: NDArray[Any],
    starts: NDArray[Any],
    goes_right: NDArray[Any],
) -> NDArray[Any]:
    """Reorder each run so its left half comes first (stably); returns the left sizes."""
    left = ~goes_right
    n_left = np.bincount(lid, weights=left, minlength=len(offs)).astype(np.int64)
    cum_left = np.cumsum(left)
    cum_right = np.cumsum(goes_right)
    rank_left = cum_left - (cum_left[offs] - left[offs])[lid] - 1
    rank_right = cum_right - (cum_right[offs] - goes_right[offs])[lid] - 1
    local = np.where(left, rank_left, n_left[lid] + rank_right)
    seg.perm[starts[lid] + local] = rows
    return n_left


def _try_split(
    sub: NDArray[Any],
    lid: NDArray[Any],
    sizes: NDArray[Any],
    dim: NDArray[Any],
    candidates: NDArray[Any],
    k: int,
) -> tuple[NDArray[Any], NDArray[Any]]:
    """Median split of each candidate partition along its ``dim``; which succeed, and the rows
    that move to the right half."""
    r = sub[np.arange(len(lid)), dim[lid]]
    span = int(sub.max()) + 2
    active = candidates[lid]
    keys = np.sort(lid[active] * span + r[active].astype(np.int64))
    cand_sizes = np.where(candidates, sizes, 0)
    starts = np.concatenate(([0], np.cumsum(cand_sizes)[:-1]))
    med_pos = starts + (np.maximum(cand_sizes, 1) - 1) // 2
    med = np.full(len(sizes), -1, dtype=np.int64)
    med[candidates] = keys[med_pos[candidates]] % span  # ranks fit in int32
    left = active & (r <= med[lid])
    n_left = np.bincount(lid[left], minlength=len(sizes))
    # all records from the median up are equal: put the median's ties on the right instead
    ties = candidates & (n_left == sizes)
    left = np.where(ties[lid], active & (r < med[lid]), left)
    n_left = np.bincount(lid[left], minlength=len(sizes))
    ok = candidates & (n_left >= k) & (sizes - n_left >= k)
    return ok, active & ~left


def _finish(
    df: pd.DataFrame,
    cols: list[str],
    ranks: NDArray[Any],
    values: list[NDArray[Any]],
    scale: NDArray[Any],
    seg: _Segments,
    k: int,
    started: float,
) -> MondrianResult:
    ids = np.argsort(seg.start, kind="stable")  # partitions in row-order position
    sizes = seg.size[ids]
    offs = seg.start[ids]
    sub = ranks[seg.perm]
    lo = np.empty((len(ids), len(cols)), dtype=ranks.dtype)
    hi = np.empty_like(lo)
    lo[ids], hi[ids] = (
        np.minimum.reduceat(sub, offs, axis=0),
        np.maximum.reduceat(sub, offs, axis=0),
    )
    pid = np.empty(len(df), dtype=np.int64)
    pid[seg.perm] = np.repeat(ids, sizes)
    widths = _widths(values, scale, lo, hi)
    ncp = float((widths[pid]).mean()) if len(pid) else 0.0
    return MondrianResult(
        quasi_identifiers=tuple(cols),
        k=int(k),
        partitions=int(len(ids)),
        smallest=int(seg.size.min()),
        information_loss=round(ncp, 10),
        seconds=round(time.perf_counter() - started, 4),
        partition=pid,
        lower=[values[d][lo[:, d]] for d in range(len(cols))],
        upper=[values[d][hi[:, d]] for d in range(len(cols))],
    )
