"""The histogram every measurement starts from: records per combination of column values.

A :class:`Histogram` holds one *cell* per distinct combination of the quasi-identifiers' values
(level 0) and the sensitive columns' values, with the number of records in it (and, when asked,
the sum of a weight column). The classes of the table are the cells grouped over the
quasi-identifiers alone; the sensitive value counts of each class are the cells inside it. So
k, every risk, l, t, δ and the lattice search are functions of the histogram, and its size is the
number of cells, not of rows: an engine reads the rows once to build it.

Columns are stored as integer codes per cell plus the distinct values (``labels``; code =
position), each column's codes in the smallest integer type that holds its number of values
(:func:`code_dtype`: one byte per cell for a column of up to 256 values), so a histogram of
millions of cells costs a few bytes a cell per column. A missing value is a value of its own (rows are never dropped). Every engine's result
is put in one canonical form (values sorted, missing last; cells sorted by their codes), so the
same table gives the same histogram, and the same figures to the last bit, on every engine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.errors import DataError, ParameterError
from anonweb.core.io.frame import require_columns
from anonweb.core.models.counts import ClassData, SensitiveCounts, SensitiveDomain
from anonweb.core.risk.classes import (
    class_dtype,
    code_dtype,
    combine_codes,
    no_star_when_all,
    star_values,
)


@dataclass(frozen=True, eq=False)
class Histogram:
    """Records per cell (a distinct combination of QI and sensitive values), columnar.

    ``codes[c][i]`` is the code of column ``c`` in cell ``i``, ``labels[c][code]`` its value
    (codes in :func:`code_dtype` of the column's values: cast them to ``int64`` before any
    arithmetic); ``counts[i]`` the records in cell ``i``; ``weights[i]`` the sum of the weight
    column there.
    """

    quasi_identifiers: tuple[str, ...]
    sensitive: tuple[str, ...]
    codes: Mapping[str, NDArray[Any]] = field(repr=False)
    labels: Mapping[str, pd.Index] = field(repr=False)
    counts: NDArray[Any] = field(repr=False)
    weights: NDArray[Any] | None = field(default=None, repr=False)

    @property
    def columns(self) -> tuple[str, ...]:
        return self.quasi_identifiers + self.sensitive

    @property
    def cells(self) -> int:
        return int(self.counts.size)

    @property
    def rows(self) -> int:
        return int(self.counts.sum())

    @cached_property
    def _classes(self) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any]]:
        # cells are sorted by their codes, QIs first: a class is a run of consecutive cells
        qi = [self.codes[q] for q in self.quasi_identifiers]
        new = np.zeros(self.cells, dtype=bool)
        new[:1] = True
        for col in qi:
            new[1:] |= col[1:] != col[:-1]
        # a class number per cell in int32 while the cells allow it: half the bytes, and
        # every reader indexes or counts with it (no arithmetic that could wrap)
        ids = np.cumsum(new, dtype=class_dtype(self.cells))
        ids -= 1
        # each class's first cell, and its records summed over its run of cells in int64
        # (exact; no class number or count widened per cell, as a bincount would)
        first = np.flatnonzero(new).astype(class_dtype(self.cells))
        del new
        sizes = np.add.reduceat(np.asarray(self.counts, dtype=np.int64), first)
        return ids, sizes, first

    @property
    def class_of_cell(self) -> NDArray[Any]:
        """The class (level-0 QI combination) of each cell, numbered in QI value order."""
        return self._classes[0]

    @property
    def class_sizes(self) -> NDArray[Any]:
        """Records per class."""
        return self._classes[1]

    @property
    def first_cell(self) -> NDArray[Any]:
        """The first cell of each class (its QI codes describe the class)."""
        return self._classes[2]

    def column(self, name: str, cells: NDArray[Any] | None = None) -> pd.Series:
        """The values of column ``name`` per cell (or per cell of ``cells``)."""
        codes = self.codes[name] if cells is None else self.codes[name][cells]
        values = self.labels[name].take(codes)
        return pd.Series(values, name=name, dtype=self.labels[name].dtype)

    def class_frame(self, classes: NDArray[Any] | None = None) -> pd.DataFrame:
        """One row per class (or per class of ``classes``, positions in the classes' order):
        its quasi-identifier values."""
        first = self.first_cell if classes is None else self.first_cell[classes]
        return pd.DataFrame(
            {q: self.column(q, first) for q in self.quasi_identifiers},
            columns=list(self.quasi_identifiers),
        )

    def suppressed_classes(self, quasi_identifiers: Sequence[str] | None = None) -> NDArray[Any]:
        """Per class, whether it is suppressed records: what
        :func:`~anonweb.core.risk.classes.suppressed_records` says of :meth:`class_frame`'s
        rows, found on each column's few distinct values instead of a table of the classes."""
        qis = [
            q
            for q in (self.quasi_identifiers if quasi_identifiers is None else quasi_identifiers)
            if q in self.quasi_identifiers
        ]
        n = self.class_sizes.size
        if not qis:
            return np.zeros(n, dtype=bool)
        first = self.first_cell
        star = np.ones(n, dtype=bool)
        for q in qis:
            labels = self.labels[q]
            here = star_values(pd.Series(labels, name=q, dtype=labels.dtype))
            if here is None:
                return np.zeros(n, dtype=bool)
            star &= here[self.codes[q][first]]
        return no_star_when_all(star)

    def sensitive_codes(self, name: str) -> NDArray[Any]:
        if name not in self.sensitive:
            raise ParameterError(f"{name!r} is not among the sensitive columns of the histogram")
        return np.asarray(self.codes[name])

    def to_frame(self) -> pd.DataFrame:
        """The cells as a table (one row per cell, with ``count``): for tests and inspection."""
        out = pd.DataFrame({c: self.column(c) for c in self.columns}, columns=list(self.columns))
        out["count"] = self.counts
        return out

    def same_as(self, other: Histogram) -> bool:
        """Whether two histograms hold the same cells and counts (engines compared)."""
        if (self.quasi_identifiers, self.sensitive) != (
            other.quasi_identifiers,
            other.sensitive,
        ) or not np.array_equal(self.counts, other.counts):
            return False
        for c in self.columns:
            if not np.array_equal(self.codes[c], other.codes[c]):
                return False
            a, b = self.labels[c], other.labels[c]
            if len(a) != len(b) or not bool((a.isna() == b.isna()).all()):
                return False
            if not (a[~a.isna()].astype(str) == b[~b.isna()].astype(str)).all():
                return False
        return True


def compact_codes(codes: NDArray[Any], n_values: int) -> NDArray[Any]:
    """``codes`` (all below ``n_values``) in :func:`code_dtype`, contiguous."""
    return np.ascontiguousarray(codes, dtype=code_dtype(n_values))


def _sorted_values(values: pd.Index) -> NDArray[Any]:
    """Rank of each distinct value: ascending, missing values last (all missing share one)."""
    missing = np.asarray(values.isna(), dtype=bool)
    present = values[~missing]
    try:
        order = np.argsort(np.asarray(present.to_numpy()), kind="stable")
    except TypeError:  # mixed types (numbers and text in one object column): order by text
        order = np.argsort(np.asarray(present.astype(str).to_numpy()), kind="stable")
    rank = np.empty(len(values), dtype=np.int64)
    positions = np.flatnonzero(~missing)
    rank[positions[order]] = np.arange(positions.size)
    rank[missing] = positions.size
    return rank


def _canonical_column(codes: NDArray[Any], labels: pd.Index) -> tuple[NDArray[Any], pd.Index]:
    """Codes renumbered in value order and the values sorted, duplicates merged."""
    labels = pd.Index(labels)
    rank = _sorted_values(labels)
    # equal values (e.g. two spellings of missing) share a rank after dedup below
    uniq_rank, first = np.unique(rank, return_index=True)
    remap = np.searchsorted(uniq_rank, rank)
    values = labels.take(first)
    new_codes = remap[np.asarray(codes, dtype=np.int64)]
    return new_codes.astype(np.int64, copy=False), values


def build_histogram(
    quasi_identifiers: Sequence[str],
    sensitive: Sequence[str],
    codes: Mapping[str, NDArray[Any]],
    labels: Mapping[str, pd.Index],
    counts: NDArray[Any],
    weights: NDArray[Any] | None = None,
    *,
    distinct: bool = False,
) -> Histogram:
    """The canonical histogram of cells given in any order and numbering, possibly repeated
    (cells of the same values are added up: an engine may aggregate by parts). ``distinct``
    says no two cells hold the same values (a GROUP BY's output)."""
    qis, sens = tuple(quasi_identifiers), tuple(sensitive)
    check_roles(qis, sens)
    cols = qis + sens
    counts = np.asarray(counts, dtype=np.int64)
    if counts.size == 0 or int(counts.sum()) == 0:
        raise DataError("the table has no rows")
    canon = {c: _canonical_column(codes[c], labels[c]) for c in cols}
    merged = any(len(canon[c][1]) < len(labels[c]) for c in cols)
    if distinct and not merged:
        # an engine's GROUP BY: already one cell per combination, nothing to add up
        cell_codes = [canon[c][0] for c in cols]
        total = counts.astype(float)
        wsum = None if weights is None else np.asarray(weights, dtype=float)
    else:
        cards = [(canon[c][0], max(len(canon[c][1]), 1)) for c in cols]
        cell = combine_codes(iter(cards), counts.size)
        n_cells = int(cell.max()) + 1
        first = np.empty(n_cells, dtype=np.int64)
        first[cell[::-1]] = np.arange(cell.size - 1, -1, -1)
        total = np.bincount(cell, weights=counts, minlength=n_cells)
        wsum = None if weights is None else np.bincount(cell, weights=weights, minlength=n_cells)
        cell_codes = [canon[c][0][first] for c in cols]
    order = _lexicographic_order(cell_codes, [max(len(canon[c][1]), 1) for c in cols])
    return Histogram(
        quasi_identifiers=qis,
        sensitive=sens,
        codes={
            c: compact_codes(k[order], len(canon[c][1]))
            for c, k in zip(cols, cell_codes, strict=True)
        },
        labels={c: canon[c][1] for c in cols},
        counts=np.rint(total[order]).astype(np.int64),
        weights=None if wsum is None else wsum[order],
    )


@dataclass(frozen=True)
class KeyCoding:
    """Each cell as one integer, for engines that count cells by a single key.

    ``code_of_raw[c][i]`` is the canonical code of the ``i``-th value an engine found in column
    ``c`` (its own numbering); ``labels[c]`` are the canonical values. The key packs the codes
    in mixed radix, the first column most significant, so ascending keys are the histogram's
    canonical cell order: the cells need one sort of integers, no gathers of labels.
    """

    columns: tuple[str, ...]
    code_of_raw: Mapping[str, NDArray[Any]]
    labels: Mapping[str, pd.Index]
    radices: tuple[int, ...]

    @property
    def strides(self) -> tuple[int, ...]:
        out, step = [], 1
        for radix in reversed(self.radices):
            out.append(step)
            step *= radix
        return tuple(reversed(out))


def key_coding(columns: Sequence[str], raw_labels: Mapping[str, pd.Index]) -> KeyCoding | None:
    """The coding of ``columns`` from each column's distinct values in any order (a missing
    value at most once per spelling); None when the key space does not fit in 62 bits."""
    code_of_raw, labels, radices = {}, {}, []
    space = 1
    for c in columns:
        raw = pd.Index(raw_labels[c])
        codes, values = _canonical_column(np.arange(len(raw), dtype=np.int64), raw)
        code_of_raw[c], labels[c] = codes, values
        radices.append(max(len(values), 1))
        space *= radices[-1]
    if space >= 2**62:
        return None
    return KeyCoding(tuple(columns), code_of_raw, labels, tuple(radices))


def histogram_of_keys(
    quasi_identifiers: Sequence[str],
    sensitive: Sequence[str],
    coding: KeyCoding,
    keys: NDArray[Any],
    counts: NDArray[Any],
    weights: NDArray[Any] | None = None,
) -> Histogram:
    """The canonical histogram of distinct cell keys (``coding``'s) and their counts: the same
    histogram :func:`build_histogram` makes of the decoded cells."""
    qis, sens = tuple(quasi_identifiers), tuple(sensitive)
    check_roles(qis, sens)
    if coding.columns != qis + sens:
        raise ParameterError("the key coding was made for other columns")
    counts = np.asarray(counts, dtype=np.int64)
    if counts.size == 0 or int(counts.sum()) == 0:
        raise DataError("the table has no rows")
    keys = np.asarray(keys, dtype=np.int64)
    # the arrays given are let go as soon as their sorted copies exist (when the caller keeps
    # no other reference): cells of 10^8 records run to tens of millions
    space = 1
    for radix in coding.radices:
        space *= radix
    order = _order_of_distinct(keys, space)
    keys = keys[order]
    counts = counts[order]
    weights = None if weights is None else np.asarray(weights, dtype=float)[order]
    del order
    # each column decoded into its small type through one scratch array of the keys' size
    codes = {}
    scratch = np.empty_like(keys)
    for c, stride, radix in zip(coding.columns, coding.strides, coding.radices, strict=True):
        if stride > 1:
            np.floor_divide(keys, stride, out=scratch)
            col = scratch
        else:
            col = keys
        if c != coding.columns[0]:
            np.remainder(col, radix, out=scratch)
            col = scratch
        codes[c] = compact_codes(col, radix)
    del scratch, keys
    return Histogram(
        quasi_identifiers=qis,
        sensitive=sens,
        codes=codes,
        labels=dict(coding.labels),
        counts=counts,
        weights=weights,
    )


def require_source_columns(
    have: Sequence[str],
    quasi_identifiers: Sequence[str],
    sensitive: Sequence[str] = (),
    weights: str | None = None,
) -> None:
    """Every requested column is in the source (``have``), or one error naming what is not,
    worded as for a table in memory."""
    names = pd.DataFrame(columns=list(have))
    require_columns(names, list(quasi_identifiers), role="quasi-identifier")
    require_columns(names, list(sensitive), role="sensitive attribute")
    require_columns(names, [weights] if weights else [], role="weight column")
    check_roles(quasi_identifiers, sensitive)


def _lexicographic_order(columns: list[NDArray[Any]], cards: list[int]) -> NDArray[Any]:
    """The order sorting the rows by the first column, then the next...: one mixed-radix key
    and one sort while the key fits in int64 (several times faster than ``lexsort``)."""
    space = 1
    for card in cards:
        space *= card
    if space >= 2**62:
        return np.asarray(np.lexsort(columns[::-1]))
    key = np.zeros(columns[0].size, dtype=np.int64)
    for col, card in zip(columns, cards, strict=True):
        key *= card
        key += col
    return np.argsort(key, kind="stable")


def _order_of_distinct(keys: NDArray[Any], space: int) -> NDArray[Any]:
    """The order sorting distinct non-negative keys below ``space``. Where key and position fit
    in 63 bits together, one sort of the packed values (NumPy's vectorised sort, about ten times
    faster than ``argsort`` on millions of int64) gives it; else ``argsort``."""
    bits = max(int(keys.size - 1).bit_length(), 1)
    if space << bits >= 2**63:
        return np.asarray(np.argsort(keys))
    packed = keys << bits
    packed |= np.arange(keys.size, dtype=np.int64)
    packed.sort()
    packed &= (1 << bits) - 1
    return packed


def check_roles(quasi_identifiers: Sequence[str], sensitive: Sequence[str]) -> None:
    if not quasi_identifiers:
        raise ParameterError("no quasi-identifier given: name at least one column")
    cols = list(quasi_identifiers) + list(sensitive)
    dupes = sorted({c for c in cols if cols.count(c) > 1})
    both = sorted(set(quasi_identifiers) & set(sensitive))
    if both:
        raise ParameterError(
            f"columns cannot be both quasi-identifier and sensitive: {', '.join(map(str, both))}"
        )
    if dupes:
        raise ParameterError(f"column listed twice: {', '.join(map(str, dupes))}")


def histogram_of_frame(
    df: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive: Sequence[str] = (),
    weights: str | None = None,
) -> Histogram:
    """The histogram of an in-memory table (rows grouped with missing values kept)."""
    cols = list(quasi_identifiers) + list(sensitive)
    require_source_columns(list(df.columns), quasi_identifiers, sensitive, weights)
    if len(df) == 0:
        raise DataError("the table has no rows")
    codes, labels = {}, {}
    for c in cols:
        k, u = pd.factorize(df[c], use_na_sentinel=False)
        codes[c], labels[c] = k.astype(np.int64, copy=False), pd.Index(u)
    cell = combine_codes(((codes[c], max(len(labels[c]), 1)) for c in cols), len(df))
    n_cells = int(cell.max()) + 1
    first = np.empty(n_cells, dtype=np.int64)
    first[cell[::-1]] = np.arange(cell.size - 1, -1, -1)
    counts = np.bincount(cell, minlength=n_cells)
    wsum = None
    if weights:
        w = pd.to_numeric(df[weights], errors="raise").to_numpy(dtype=float)
        wsum = np.bincount(cell, weights=w, minlength=n_cells)
    return build_histogram(
        quasi_identifiers,
        sensitive,
        {c: codes[c][first] for c in cols},
        labels,
        counts,
        wsum,
        distinct=True,
    )


def histogram_class_data(
    hist: Histogram, star: Sequence[str] | None = None
) -> tuple[ClassData, int]:
    """The classes of the table ``hist`` counts, for checking models on them, and how many
    records were left out: what :func:`~anonweb.core.models.counts.class_data` gives for the
    table with its suppressed records (``*`` in every quasi-identifier of ``star``, by default
    all of them) excluded; they still count in each sensitive column's overall distribution."""
    qis = list(hist.quasi_identifiers if star is None else star)
    suppressed = hist.suppressed_classes(qis)
    kept = np.flatnonzero(~suppressed)
    renumber = np.full(hist.class_sizes.size, -1, dtype=np.int64)
    renumber[kept] = np.arange(kept.size)
    cell_class = renumber[hist.class_of_cell]
    in_class = cell_class >= 0

    def counts(name: str) -> SensitiveCounts:
        values, codes = hist.labels[name], hist.sensitive_codes(name)
        totals = np.bincount(codes, weights=hist.counts, minlength=len(values))
        domain = SensitiveDomain(str(name), values, np.rint(totals).astype(np.int64))
        return SensitiveCounts.from_codes(
            domain,
            cell_class[in_class],
            codes[in_class],
            int(kept.size),
            weights=hist.counts[in_class].astype(float),
        )

    left_out = int(hist.class_sizes[suppressed].sum())
    return ClassData(hist.class_sizes[kept], counts), left_out
