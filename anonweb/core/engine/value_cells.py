"""A histogram split for readers that work class by class: the quasi-identifier rows alone, and
each sensitive column's counts as (row, value, count) columns grouped by value.

A histogram holds a cell per distinct (quasi-identifier row, sensitive values) combination: at
10^8 records, 29.7 M cells for 8.9 M distinct quasi-identifier rows. Whatever groups classes
(the what-if) needs the distinct quasi-identifier rows with their records
(:func:`qi_histogram`), and, to count sensitive values per class, the cells reduced to one
sensitive column each (:class:`ValueCells`): a row number (``int32`` while it fits), a count
(``int32`` while it fits) and the value, held once per value rather than once per cell. So no
key, code matrix or ``int64`` column as long as the cells is built, here or by the reader: the
counts of one value are read as one short column at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from anonweb.core.engine.histogram import Histogram
from anonweb.core.errors import ParameterError
from anonweb.core.risk.classes import class_dtype

# cells sorted at a time (the temporaries of a sort of this many, not of all cells)
CHUNK = 1 << 20


@dataclass(frozen=True, eq=False)
class ValueCells:
    """One sensitive column's records per (row, value): the entries of value ``v`` are
    ``starts[v]:starts[v + 1]``, each a row number (``rows``) and its records (``counts``).

    Within a value the entries keep the order they were given in (rows ascending when the
    cells came in row order, as a histogram's do); a (row, value) pair may appear more than
    once (cells that differ in another sensitive column: ``unique`` is then False), so
    readers add the counts up.
    """

    rows: NDArray[Any]
    counts: NDArray[Any]
    starts: NDArray[Any]
    # whether each (row, value) pair appears once (one sensitive column's cells)
    unique: bool = False

    @property
    def n_values(self) -> int:
        return len(self.starts) - 1

    @property
    def entries(self) -> int:
        return len(self.rows)

    def value(self, v: int) -> tuple[NDArray[Any], NDArray[Any]]:
        """The rows holding value ``v`` and their records."""
        s, e = int(self.starts[v]), int(self.starts[v + 1])
        return self.rows[s:e], self.counts[s:e]

    def totals(self) -> NDArray[Any]:
        """Records per value over every row (``int64``)."""
        return np.array(
            [int(self.value(v)[1].sum(dtype=np.int64)) for v in range(self.n_values)],
            dtype=np.int64,
        )

    def through(self, to_rows: NDArray[Any], n_rows: int) -> ValueCells:
        """The same entries with each row ``r`` read as ``to_rows[r]`` (rows merged by an
        encoding: two spellings of one value)."""
        mapped = np.empty(self.entries, dtype=class_dtype(n_rows))
        for s in range(0, self.entries, CHUNK):
            np.take(to_rows, self.rows[s : s + CHUNK], out=mapped[s : s + CHUNK])
        # rows renumbered one to one keep each pair once; rows merged may repeat one
        return ValueCells(mapped, self.counts, self.starts, self.unique and len(to_rows) == n_rows)

    @property
    def nbytes(self) -> int:
        return int(self.rows.nbytes + self.counts.nbytes + self.starts.nbytes)


def value_cells(
    rows: NDArray[Any],
    values: NDArray[Any],
    counts: NDArray[Any],
    n_values: int,
    n_rows: int,
    *,
    unique: bool = False,
) -> ValueCells:
    """The cells (``rows[i]``, ``values[i]``, ``counts[i]``) grouped by value, each value's
    entries in their given order: a counting sort, a chunk of cells at a time. ``unique``
    says no (row, value) pair is given twice."""
    n = len(rows)
    if len(values) != n or len(counts) != n:
        raise ParameterError("rows, values and counts of the cells differ in length")
    per_value = np.zeros(n_values, dtype=np.int64)
    for s in range(0, n, CHUNK):
        per_value += np.bincount(values[s : s + CHUNK], minlength=n_values)
    starts = np.zeros(n_values + 1, dtype=np.int64)
    np.cumsum(per_value, out=starts[1:])
    top = int(counts.max()) if n else 0
    out_rows = np.empty(n, dtype=class_dtype(n_rows))
    out_counts = np.empty(n, dtype=class_dtype(top + 1))
    fill = starts[:-1].copy()
    for s in range(0, n, CHUNK):
        v = values[s : s + CHUNK]
        order = np.argsort(v, kind="stable")
        here = np.bincount(v, minlength=n_values)
        first = np.cumsum(here) - here  # where each value's entries start in the chunk
        v_sorted = v.take(order)
        dest = fill.take(v_sorted) + (np.arange(len(v), dtype=np.int64) - first.take(v_sorted))
        out_rows[dest] = rows[s : s + CHUNK].take(order)
        out_counts[dest] = counts[s : s + CHUNK].take(order)
        fill += here
    return ValueCells(out_rows, out_counts, starts, unique)


def qi_histogram(hist: Histogram) -> Histogram:
    """The histogram of the quasi-identifiers alone: one cell per class of ``hist`` (its
    level-0 quasi-identifier row), in the classes' order, with the class's records."""
    first = hist.first_cell
    return Histogram(
        quasi_identifiers=hist.quasi_identifiers,
        sensitive=(),
        codes={q: hist.codes[q].take(first) for q in hist.quasi_identifiers},
        labels={q: hist.labels[q] for q in hist.quasi_identifiers},
        counts=hist.class_sizes,
    )


def sensitive_cells(hist: Histogram, name: str) -> ValueCells:
    """Sensitive column ``name``'s cells of ``hist`` by value, each entry's row the class
    (:attr:`Histogram.class_of_cell`: the row of :func:`qi_histogram`)."""
    values = hist.sensitive_codes(name)
    classes = hist.class_of_cell
    # with one sensitive column the cells are its (class, value) pairs, each once
    return value_cells(
        classes,
        values,
        hist.counts,
        len(hist.labels[name]),
        int(hist.class_sizes.size),
        unique=len(hist.sensitive) == 1,
    )


def is_identity(mapping: NDArray[Any]) -> bool:
    """Whether ``mapping[i] == i`` for every ``i``."""
    return bool((mapping == np.arange(len(mapping))).all())
