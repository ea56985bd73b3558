"""Equivalence classes over the quasi-identifiers: the one grouping every measure builds on.

Rows with equal quasi-identifier values form a class. A missing value is a value of its own:
rows are never dropped (pandas' default ``dropna=True`` would silently remove them and
over-report k). The grouping is done once, as integer codes per row; k, risks, l-diversity and
t-closeness are then NumPy aggregations (``bincount``) over those codes.

The codes partition the rows as ``df.groupby(qis, dropna=False, observed=True).ngroup()`` does,
computed faster: each column is factorized to integers and the columns are combined into one
int64 key (mixed radix), which is factorized again (or, when the key space is small, mapped
through a dense slot table). Hashing tuples of Python objects is avoided.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.errors import DataError, ParameterError
from anonweb.core.io.frame import require_columns

# Keep the mixed-radix key well inside int64 before multiplying by the next radix.
_KEY_LIMIT = 2**62


# A suppressed record: ``*`` in every quasi-identifier (what the search and ``suppress`` write).
SUPPRESSED = "*"


def suppressed_records(df: pd.DataFrame, quasi_identifiers: Sequence[str]) -> NDArray[Any]:
    """Rows suppressed outright: ``*`` in every one of ``quasi_identifiers``.

    As in ARX (its outlier handling), such records are taken out of the privacy models'
    evaluation: they form no equivalence class, so k and every risk after a release are measured
    on the other records, the figures the search itself reports. They still count in the table's
    distribution of a sensitive attribute (t-closeness' reference). When every row reads ``*``
    (each QI at its hierarchy's root), nothing was suppressed: all rows form one class."""
    star = np.zeros(len(df), dtype=bool)
    qis = [q for q in quasi_identifiers if q in df.columns]
    if not qis:
        return star
    star[:] = True
    for q in qis:
        here = star_values(df[q])
        if here is None:
            return np.zeros(len(df), dtype=bool)
        star &= here
    return no_star_when_all(star)


def star_values(col: pd.Series) -> NDArray[Any] | None:
    """Which values of ``col`` read ``*`` (what :func:`suppressed_records` tests per column);
    None for a column of numbers or dates, which holds no ``*``."""
    if not (
        pd.api.types.is_object_dtype(col)
        or pd.api.types.is_string_dtype(col)
        or isinstance(col.dtype, pd.CategoricalDtype)
    ):
        return None
    # Series.eq, not NumPy's ==: a blank (None, NaN, pd.NA) compares as False, never as NA
    return np.asarray(col.eq(SUPPRESSED).fillna(False).to_numpy(dtype=bool))


def no_star_when_all(star: NDArray[Any]) -> NDArray[Any]:
    """Every row reading ``*`` is no suppression: all rows form one class."""
    if star.all():
        star[:] = False
    return star


def code_dtype(n_values: int) -> np.dtype[Any]:
    """The smallest integer type holding the codes ``0..n_values - 1``: ``uint8`` up to 256
    values, ``uint16`` up to 65,536, then ``int32`` and ``int64``. Indexing, ``take`` and
    ``bincount`` read every one of them as they read ``int64``."""
    if n_values <= 1 << 8:
        return np.dtype(np.uint8)
    if n_values <= 1 << 16:
        return np.dtype(np.uint16)
    if n_values <= 1 << 31:
        return np.dtype(np.int32)
    return np.dtype(np.int64)


def class_dtype(n: int) -> np.dtype[Any]:
    """The signed integer type of numbers up to ``n`` (class numbers, positions, counts of
    at most ``n``): ``int32`` while they fit, else ``int64``. Signed, so that the difference
    of two of them cannot wrap."""
    return np.dtype(np.int32) if n < 1 << 31 else np.dtype(np.int64)


def check_columns(df: pd.DataFrame, quasi_identifiers: Sequence[str]) -> list[str]:
    """Validate the frame and the quasi-identifier list; return the QIs as a list."""
    if not isinstance(df, pd.DataFrame):
        raise DataError(f"expected a table (pandas DataFrame), got {type(df).__name__}")
    if isinstance(quasi_identifiers, str):
        quasi_identifiers = [quasi_identifiers]
    qis = list(quasi_identifiers)
    if not qis:
        raise ParameterError("no quasi-identifier given: name at least one column")
    dupes = sorted({q for q in qis if qis.count(q) > 1})
    if dupes:
        raise ParameterError(f"quasi-identifier listed twice: {', '.join(map(str, dupes))}")
    require_columns(df, qis, role="quasi-identifier")
    if len(df) == 0:
        raise DataError("the table has no rows")
    return qis


def dense_codes(values: pd.Series | NDArray[Any]) -> tuple[NDArray[Any], int]:
    """Codes 0..m-1 in order of first appearance, every code used (missing = own code), and m."""
    codes, uniques = pd.factorize(values, use_na_sentinel=False)
    return codes.astype(np.int64, copy=False), len(uniques)


def column_codes(values: pd.Series | NDArray[Any]) -> tuple[NDArray[Any], int]:
    """Integer codes below m for a column (equal values, equal codes; missing = own code), and m.

    Only the partition matters, so some codes may go unused: categoricals keep their category
    codes and integer columns with a narrow range are shifted to start at 0, both without the
    hashing that :func:`dense_codes` needs.
    """
    dtype = getattr(values, "dtype", None)
    if isinstance(dtype, pd.CategoricalDtype):
        codes = np.asarray(pd.Series(values).cat.codes, dtype=np.int64)
        card = len(dtype.categories)
        if (codes < 0).any():
            codes[codes < 0] = card
            card += 1
        return codes, max(card, 1)
    if dtype is not None and dtype.kind in "iu" and len(values):
        if isinstance(dtype, pd.api.extensions.ExtensionDtype):
            # Nullable integers (``Int64``): a missing value is a value of its own, coded
            # below the smallest integer present.
            series = pd.Series(values, copy=False)
            missing = series.isna().to_numpy()
            if missing.all():
                return np.zeros(series.size, dtype=np.int64), 1
            present = series.to_numpy(dtype=np.int64, na_value=0)
            lo = int(present[~missing].min())
            hi = int(present[~missing].max())
            if hi - lo <= 2 * present.size + 1024:
                codes = present - lo + 1
                codes[missing] = 0
                return codes, hi - lo + 2
            return dense_codes(series)
        arr = np.asarray(values, dtype=np.int64)
        lo, hi = int(arr.min()), int(arr.max())
        if hi - lo <= 2 * arr.size + 1024:
            return arr - lo, hi - lo + 1
    return dense_codes(values)


def combine_codes(columns: Iterable[tuple[NDArray[Any], int]], rows: int) -> NDArray[Any]:
    """Group codes 0..C-1 for rows described by several code columns.

    ``columns`` may be a generator, so that only one column's codes exist besides the key.
    """
    it = iter(columns)
    first = next(it, None)
    if first is None:
        return np.zeros(rows, dtype=np.int64)
    key, radix = first
    for codes, card in it:
        if radix * card >= _KEY_LIMIT:
            # Compact the partial key first: only combinations that occur need a code.
            key, radix = dense_codes(key)
        key = key * card + codes
        radix *= card
    if radix <= 8 * rows + (1 << 16):
        # A key space within a few times the table: a dense table of slots (9 bytes a slot) is
        # far cheaper than hashing (10M rows, 9M classes: about 1 s against 4.6 s). Codes then
        # follow the key order.
        present = np.zeros(radix, dtype=bool)
        present[key] = True
        small = np.int32 if radix < 2**31 else np.int64  # half the memory traffic
        slot_code: NDArray[Any] = np.cumsum(present, dtype=small)
        slot_code -= 1
        return np.asarray(slot_code[key].astype(np.int64))
    return dense_codes(key)[0]


def group_codes(df: pd.DataFrame, columns: Sequence[str]) -> NDArray[Any]:
    """Per-row class id: the partition of ``groupby(columns, dropna=False).ngroup()``.

    The numbering of the classes may differ from pandas'; the classes are the same.
    """
    return combine_codes((column_codes(df[c]) for c in columns), len(df))


@dataclass(frozen=True)
class EquivalenceClasses:
    """The partition of the rows into classes.

    ``codes[i]`` is the class of row ``i`` (by position), ``sizes[j]`` the size of class ``j``;
    ``first_row[j]`` is the position of one row of class ``j`` (its QI values describe it).
    """

    quasi_identifiers: tuple[str, ...]
    codes: NDArray[Any] = field(repr=False, compare=False)
    sizes: NDArray[Any] = field(repr=False, compare=False)

    @cached_property
    def first_row(self) -> NDArray[Any]:
        # Computed on demand: only describing classes needs it (a second pass over the rows).
        # Whichever write lands for a class, it is a member row and carries the QI values.
        first = np.empty(self.sizes.size, dtype=np.int64)
        first[self.codes[::-1]] = np.arange(self.codes.size - 1, -1, -1)
        return first

    @property
    def rows(self) -> int:
        # the records (sizes add up to them): classes read from a histogram carry one code per
        # class, not per record
        return int(self.sizes.sum())

    @property
    def count(self) -> int:
        return int(self.sizes.size)

    @property
    def k(self) -> int:
        return int(self.sizes.min())

    @property
    def uniques(self) -> int:
        return int(np.count_nonzero(self.sizes == 1))

    def record_sizes(self) -> NDArray[Any]:
        """Size of each row's class, by row position."""
        return np.asarray(self.sizes[self.codes])

    def size_distribution(self) -> list[dict[str, int]]:
        """``[{size, classes, records}]`` ascending by size: the histogram behind k."""
        sizes, counts = size_counts(self.sizes)
        return [
            {"size": int(s), "classes": int(c), "records": int(s * c)}
            for s, c in zip(sizes.tolist(), counts.tolist())
        ]

    def describe(
        self,
        df: pd.DataFrame | Callable[[NDArray[Any]], pd.DataFrame],
        classes: NDArray[Any] | None = None,
    ) -> list[dict[Any, Any]]:
        """QI values (JSON-safe) of the given classes (all by default), one dict per class."""
        idx = self.first_row if classes is None else self.first_row[classes]
        # ``df`` may also be a function giving the rows at given positions (rows built on
        # demand: a histogram's millions of classes need not be a table to describe a few)
        sub = (df(idx) if callable(df) else df.iloc[idx])[list(self.quasi_identifiers)]
        return [
            {col: json_value(v) for col, v in zip(sub.columns, row, strict=True)}
            for row in sub.itertuples(index=False, name=None)
        ]


def equivalence_classes(
    df: pd.DataFrame, *, quasi_identifiers: Sequence[str]
) -> EquivalenceClasses:
    """Partition the rows of ``df`` by their quasi-identifier values (the frame is not modified)."""
    qis = check_columns(df, quasi_identifiers)
    codes = group_codes(df, qis)
    return EquivalenceClasses(tuple(qis), codes, np.bincount(codes))


def json_value(value: object) -> object:
    """A cell value as JSON-safe Python: NaN/None/NaT become None, NumPy scalars plain."""
    if value is None:
        return None
    # pd.isna on a list or array answers per element; only a scalar can be "missing" here.
    if pd.api.types.is_scalar(value) and pd.isna(value):
        return None
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


def size_counts(sizes: NDArray[Any]) -> tuple[NDArray[Any], NDArray[Any]]:
    """The class sizes present, ascending, and how many classes have each. A count over the
    sizes while the largest is not far above the number of classes; else a sort of the sizes
    (a few classes of 10^7 records each would make the count an array of 10^7 slots)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    if len(sizes) == 0 or int(sizes.max()) <= 4 * len(sizes) + 1024:
        counts = np.bincount(sizes)
        present = np.flatnonzero(counts)
        return present, counts[present]
    present, counts = np.unique(sizes, return_counts=True)
    return present, counts
