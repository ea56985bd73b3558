"""What an engine counts of single columns, for the utility of a release
(:mod:`anonweb.core.utility.measures`): a column's distinct values and their counts, a numeric
column's summary (how many finite numbers, their range, whether all are whole, mean and
standard deviation), and its finite numbers counted in given bins.

Each engine counts these where the rows are (pandas in memory, DuckDB and Spark in queries);
the functions here are the in-memory definitions, which the pandas engine and a release's
utility measured in memory both call, and which the other engines' queries follow (a bin holds
``edges[i] <= x < edges[i + 1]``, the last one its right edge too, as ``numpy.histogram``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray


@dataclass(frozen=True)
class NumberSummary:
    """The finite numbers of a numeric column (NaN, infinities and blanks left out): their
    count, range (NaN when there is none), whether every one is a whole number, mean and
    population standard deviation."""

    finite: int
    low: float
    high: float
    whole: bool
    mean: float
    std: float


@dataclass(frozen=True)
class ColumnCounts:
    """One column of a table as an engine counted it: ``rows`` cells; ``numeric`` when it
    holds numbers (not booleans); ``values`` its distinct values present and their counts
    (when asked for), ``missing`` its blank cells; ``numbers`` its :class:`NumberSummary`
    (when asked for, numeric columns only)."""

    rows: int
    numeric: bool
    values: pd.Series | None = None
    missing: int = 0
    numbers: NumberSummary | None = None


def is_numeric(values: pd.Series) -> bool:
    """A column of numbers: a numeric dtype, not booleans."""
    return bool(
        pd.api.types.is_numeric_dtype(values.dtype) and not pd.api.types.is_bool_dtype(values)
    )


def finite_numbers(values: pd.Series) -> NDArray[np.float64]:
    """The column's finite numbers as floats (text that is not a number, blanks, NaN and
    infinities left out)."""
    out = pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    return np.asarray(out[np.isfinite(out)], dtype=np.float64)


def number_summary(finite: NDArray[np.float64]) -> NumberSummary:
    """The summary of an array of finite numbers."""
    if not len(finite):
        return NumberSummary(0, math.nan, math.nan, True, math.nan, math.nan)
    return NumberSummary(
        finite=len(finite),
        low=float(finite.min()),
        high=float(finite.max()),
        whole=bool(np.all(finite == np.floor(finite))),
        mean=float(finite.mean()),
        std=float(finite.std()),  # population standard deviation
    )


def series_counts(values: pd.Series, *, distinct: bool, numbers: bool) -> ColumnCounts:
    """A column in memory counted: its distinct values with ``distinct``, its summary with
    ``numbers`` (when it is numeric)."""
    numeric = is_numeric(values)
    counted = None
    missing = 0
    if distinct:
        counted = values.value_counts(dropna=True, sort=False)
        counted = counted[counted > 0]  # a categorical's unused categories
        missing = int(values.isna().sum())
    summary = number_summary(finite_numbers(values)) if numbers and numeric else None
    return ColumnCounts(len(values), numeric, counted, missing, summary)


def extreme_ranges(table: Any, columns: Sequence[str]) -> dict[str, float]:
    """Each column's range from an engine's Arrow row of its largest and smallest values
    (columns ``2i`` and ``2i + 1``), each value read as the pandas engine reads it
    (:func:`~anonweb.core.io.arrow_cells.arrow_to_pandas`: a float32 as its shortest text), so
    the difference is the one pandas takes; NaN for a column without a value."""
    from anonweb.core.io.arrow_cells import arrow_to_pandas

    out = {}
    for i, c in enumerate(columns):
        hi, lo = (arrow_to_pandas(table.column(2 * i + k)).iloc[0] for k in (0, 1))
        out[c] = math.nan if pd.isna(hi) or pd.isna(lo) else float(hi - lo)
    return out


def bin_counts(finite: NDArray[np.float64], edges: NDArray[np.float64]) -> NDArray[np.int64]:
    """How many of ``finite`` fall in each bin: ``edges[i] <= x < edges[i + 1]``, the last bin
    holding its right edge, numbers outside every bin left out (``numpy.histogram``)."""
    counts, _ = np.histogram(finite, bins=edges)
    return np.asarray(counts, dtype=np.int64)
