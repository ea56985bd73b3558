"""SUDA2: minimal sample uniques (MSUs) per record, SUDA scores and DIS-SUDA, as sdcMicro's
``suda2`` reports them (its C++ ``Suda2.h``, after Elliot et al. and Manning et al.).

A set of quasi-identifier columns is an MSU of a record when the record is the only one in the
sample with its values on those columns and on no proper subset of them. With ``M`` columns,
an MSU of size ``s`` adds ``(M - s)!`` to the record's SUDA score (sdcMicro's default
``original_scores=TRUE``, Elliot's weighting: the smaller the MSU, the riskier). DIS-SUDA turns
the scores into a probability that a sample unique is a population unique, with sdcMicro's
constants::

    U    = records unique on all M columns,  P = records in classes of exactly two
    dis  = U f / (U f + P (1 - f))            (f: the sampling fraction, default 0.01)
    q    = 1 + (8 - M) / 20
    A    = sum over scored records of score^-q
    DIS  = 1 / (1 + (U / dis - U) / (score^q A))  for a record with score > 0, else 0

The search works on the histogram of distinct rows (not on rows): a column subset's uniques are
the distinct rows whose projection has total count 1. Subsets are visited by size up to
``max_size``; a unique subset is minimal when none of its subsets one column smaller is unique
(uniqueness only grows with more columns, so those suffice). Each subset is one vectorised
grouping; the number of subsets is sum of C(M, s) for s up to ``max_size``.

Where anonweb differs from sdcMicro, on purpose:

- ``max_size`` bounds the MSU size (sdcMicro always searches up to all M columns); the score
  weights stay ``(M - s)!`` with ``M`` the number of columns, so with ``max_size = M`` the
  scores are sdcMicro's and below it they omit only the (smallest) contributions of larger MSUs.
- A missing value is a value of its own, as everywhere in anonweb (sdcMicro ignores missing
  cells: they are part of no MSU).
- With one or two columns sdcMicro adds constant dummy columns (raising M to 3 and so the
  weights); anonweb uses the columns given.
- ``U`` counts every record unique on all columns; sdcMicro's C++ counts only those alone in
  their hash bucket, which can undercount U on large tables, and it computes DIS in single
  precision.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import combinations
from math import factorial
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.errors import ParameterError
from anonweb.core.risk.classes import check_columns, column_codes, dense_codes

DEFAULT_MAX_SIZE = 3
DEFAULT_DIS_FRACTION = 0.01
# a guard on the work: subsets x distinct rows groupings
MAX_SUBSETS = 20_000


@dataclass(frozen=True)
class Suda2Result:
    """Per-record MSU counts by size, SUDA and DIS-SUDA scores. ``to_dict()`` is JSON-safe."""

    quasi_identifiers: tuple[str, ...]
    max_size: int
    msu_by_size: NDArray[Any] = field(repr=False, compare=False)  # rows x max_size counts
    score: NDArray[Any] = field(repr=False, compare=False)  # per row
    dis_score: NDArray[Any] = field(repr=False, compare=False)  # per row
    dis_fraction: float = DEFAULT_DIS_FRACTION

    @property
    def records_with_msu(self) -> int:
        return int(np.count_nonzero(self.msu_by_size.sum(axis=1)))

    def msu_counts(self) -> dict[str, int]:
        """The number of MSUs of each size found in the table (``"1"``: single columns)."""
        totals = self.msu_by_size.sum(axis=0)
        return {str(s + 1): int(totals[s]) for s in range(self.max_size)}

    def score_histogram(self) -> list[dict[str, float]]:
        """Records per distinct SUDA score, lowest score first (the risk page's chart)."""
        values, counts = np.unique(self.score, return_counts=True)
        return [{"score": float(v), "records": int(c)} for v, c in zip(values, counts, strict=True)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "quasi_identifiers": list(self.quasi_identifiers),
            "max_size": self.max_size,
            "msu_counts": self.msu_counts(),
            "records_with_msu": self.records_with_msu,
            "max_score": float(self.score.max()) if self.score.size else 0.0,
            "dis_suda_max": float(self.dis_score.max()) if self.dis_score.size else 0.0,
            "dis_fraction": self.dis_fraction,
        }


def _distinct_rows(
    df: pd.DataFrame, qis: Sequence[str]
) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any]]:
    """Column codes of each distinct row (distinct x M), its count, and each row's distinct id."""
    cols = [column_codes(df[q])[0] for q in qis]
    codes = np.column_stack(cols) if cols else np.zeros((len(df), 0), dtype=np.int64)
    _uniq, first, row_id = np.unique(codes, axis=0, return_index=True, return_inverse=True)
    row_id = np.asarray(row_id).reshape(-1)
    counts = np.bincount(row_id)
    return codes[first], counts, row_id


def _check(df: pd.DataFrame, qis: list[str], max_size: int | None, dis_fraction: float) -> int:
    m = len(qis)
    size = min(DEFAULT_MAX_SIZE, m) if max_size is None else max_size
    if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1:
        raise ParameterError(
            f"the SUDA2 maximum MSU size must be a whole number from 1, got {size!r}"
        )
    size = min(int(size), m)
    if not (0.0 < dis_fraction < 1.0):
        raise ParameterError(
            f"the DIS sampling fraction must lie between 0 and 1, got {dis_fraction}"
        )
    subsets = sum(_comb(m, s) for s in range(1, size + 1))
    if subsets > MAX_SUBSETS:
        raise ParameterError(
            f"SUDA2 over {m} columns up to size {size} means {subsets} column subsets "
            f"(at most {MAX_SUBSETS}): lower the maximum MSU size or name fewer columns"
        )
    return size


def _comb(n: int, k: int) -> int:
    return factorial(n) // (factorial(k) * factorial(n - k))


def suda2(
    df: pd.DataFrame,
    *,
    quasi_identifiers: Sequence[str],
    max_size: int | None = None,
    dis_fraction: float = DEFAULT_DIS_FRACTION,
) -> Suda2Result:
    """SUDA2 on ``df`` (not modified) over ``quasi_identifiers``, MSUs up to ``max_size``
    columns (default 3, never more than the number of columns)."""
    qis = check_columns(df, quasi_identifiers)
    size = _check(df, qis, max_size, dis_fraction)
    m = len(qis)
    codes, counts, row_id = _distinct_rows(df, qis)
    n_distinct = counts.size
    msu = np.zeros((n_distinct, size), dtype=np.int64)
    # dense key and "unique" mask of each subset of the previous size, by column tuple
    keys: dict[tuple[int, ...], NDArray[Any]] = {(): np.zeros(n_distinct, dtype=np.int64)}
    uniq: dict[tuple[int, ...], NDArray[Any]] = {(): np.zeros(n_distinct, dtype=bool)}
    cards = codes.max(axis=0) + 1 if n_distinct else np.ones(m, dtype=np.int64)
    for s in range(1, size + 1):
        new_keys: dict[tuple[int, ...], NDArray[Any]] = {}
        new_uniq: dict[tuple[int, ...], NDArray[Any]] = {}
        for subset in combinations(range(m), s):
            parent, last = subset[:-1], subset[-1]
            key, k = dense_codes(keys[parent] * int(cards[last]) + codes[:, last])
            unique = np.bincount(key, weights=counts, minlength=k)[key] == 1
            minimal = unique.copy()
            if s > 1:
                for drop in range(s):
                    minimal &= ~uniq[subset[:drop] + subset[drop + 1 :]]
            msu[:, s - 1] += minimal
            if s < size:
                new_keys[subset] = key
            new_uniq[subset] = unique
        keys, uniq = new_keys, new_uniq
    weights = np.array([factorial(m - s) for s in range(1, size + 1)], dtype=float)
    score = msu @ weights
    dis = _dis_scores(score, counts, m, dis_fraction)
    return Suda2Result(
        quasi_identifiers=tuple(qis),
        max_size=size,
        msu_by_size=msu[row_id],
        score=score[row_id],
        dis_score=dis[row_id],
        dis_fraction=dis_fraction,
    )


def _dis_scores(score: NDArray[Any], counts: NDArray[Any], m: int, fraction: float) -> NDArray[Any]:
    """DIS-SUDA per distinct row (a scored row is a sample unique, so counts once)."""
    out = np.zeros(score.size)
    scored = score > 0
    if not scored.any():
        return out
    uniques = float(np.count_nonzero(counts == 1))
    pairs = 2.0 * np.count_nonzero(counts == 2)
    dis = uniques * fraction / (uniques * fraction + pairs * (1.0 - fraction))
    q = 1.0 + (8.0 - m) / 20.0
    powered = score[scored] ** q
    adj = float(np.sum(1.0 / powered))
    out[scored] = 1.0 / (1.0 + (uniques / dis - uniques) / (powered * adj))
    return out
