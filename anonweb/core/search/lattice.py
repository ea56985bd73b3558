"""Integer encoding of quasi-identifiers for the generalization lattice, and class grouping.

Each quasi-identifier is encoded once: the column's values become hierarchy row indices, and for
every level an int code per value (codes of the same generalized label are equal). The table is
then reduced to its distinct (QI codes, sensitive codes) rows with a weight, so grouping a node
touches only those rows: one int64 key per row (mixed radix of the level codes) and a bincount.
"""

from __future__ import annotations

import ctypes
import math
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.engine.histogram import Histogram, compact_codes
from anonweb.core.errors import DataError, ParameterError
from anonweb.core.io.frame import require_columns
from anonweb.core.io.hierarchy import MISSING, UNCOVERED, Hierarchy
from anonweb.core.risk.classes import code_dtype

MISSING_LABEL = None  # a missing value stays missing below the root
_BIG = np.iinfo(np.int64).max


class EncodedQI:
    """A quasi-identifier's hierarchy read as int codes, and the hierarchy row of each record.

    ``row_index`` (per data row: hierarchy row, ``len(rows)`` for a missing value) may be given
    as a function that builds it: a table encoded through its distinct rows needs it only to
    write a release, so the per-row array is not built before then.
    """

    def __init__(
        self,
        name: str,
        hierarchy: Hierarchy,
        row_index: NDArray[Any] | Callable[[], NDArray[Any]],
        level_codes: list[NDArray[Any]],  # per level: code per hierarchy row (+1 for missing)
        labels: list[NDArray[Any]],  # per level: generalized label per code
        shares: list[NDArray[Any]],  # per level: ARX domain share of each code
    ) -> None:
        self.name, self.hierarchy = name, hierarchy
        self.level_codes, self.labels, self.shares = level_codes, labels, shares
        self._row_index = row_index

    @property
    def row_index(self) -> NDArray[Any]:
        if callable(self._row_index):
            self._row_index = self._row_index()
        return self._row_index

    @row_index.setter
    def row_index(self, value: NDArray[Any]) -> None:
        self._row_index = value

    @property
    def height(self) -> int:
        return len(self.level_codes)

    def cards(self) -> list[int]:
        return [len(lab) for lab in self.labels]


# up to this many distinct objects in a column are read at their addresses (a list of them)
_FEW_OBJECTS = 1 << 16


def factorize_values(
    series: pd.Series, *, use_na_sentinel: bool = True, dtype: Any = np.int64
) -> tuple[NDArray[Any], pd.Index]:
    """``pd.factorize`` of a column: a code per row and the distinct values, first seen first.

    A text column read from a file holds each distinct text as one object, repeated; hashing
    every cell's text costs most of the encoding. So the cells of an object column are numbered
    by identity first (the objects' addresses, as integers: a cheap integer factorization),
    and only the few objects found are then compared by value. Equal objects are equal values,
    and equal values held by distinct objects are merged by the second step, so the codes and
    values are exactly those of ``pd.factorize``. The codes are of ``dtype`` (int32 halves
    the memory a million codes are read from).
    """
    values = series.to_numpy()
    if values.dtype != object or len(values) < 1024:
        codes, uniques = pd.factorize(values, use_na_sentinel=use_na_sentinel)
        return codes.astype(dtype, copy=False), pd.Index(uniques)
    values = np.ascontiguousarray(values)  # holds the objects while their addresses are read
    by_identity, objects = _object_codes(values)
    if objects is None:
        # codes are numbered in order of first appearance, so the cell where their running
        # maximum first reaches a code is that code's first cell: one pass, no scatter
        seen = np.maximum.accumulate(by_identity)
        objects = values.take(np.searchsorted(seen, np.arange(int(seen[-1]) + 1)))
    by_value, uniques = pd.factorize(objects, use_na_sentinel=use_na_sentinel)
    return by_value.astype(dtype, copy=False).take(by_identity), pd.Index(uniques)


def hierarchy_rows(series: pd.Series, hierarchy: Hierarchy) -> tuple[NDArray[Any], NDArray[Any]]:
    """A code per row and the hierarchy row of each code (``len(hierarchy.rows)`` for a missing
    value); raises if a value is not covered. The codes are numbered in the order of the rows
    they find (ascending, each once): records sorted by their codes are sorted by their
    hierarchy rows, and two values of one row (39 and '39') share a code. The work per row is
    one pass that numbers the values (:func:`_value_codes`); the hierarchy is looked up once
    per distinct value (by value: 39.0 of a float column finds the line 39)."""

    def rows_of(values: Any) -> NDArray[Any]:
        found = hierarchy.rows_of(values)
        if len(found) and int(found.min()) < 0:  # missing or not covered
            if (found == UNCOVERED).any():
                hierarchy.validate_covers(series)  # raises, naming the values in both forms
            found[found == MISSING] = len(hierarchy.rows)
        return found

    codes, rows = _value_codes(series, rows_of)
    return codes, np.asarray(rows)


def _value_codes(
    series: pd.Series, label: Callable[[Any], NDArray[Any]] | None = None
) -> tuple[NDArray[Any], Any]:
    """Codes from 0 (in the smallest type that holds them) and the value of each code (a
    missing value is one of them, as a ``pd.Index``), in any order. A column of small integers
    (ages, years, counts) is numbered by its offset from the smallest value, without hashing.
    A text column is numbered by the objects its cells hold (by their slots in memory,
    :func:`_slot_codes`, or else by hashing their addresses, :func:`_object_codes`): two codes
    may then hold equal values. Anything else by :func:`factorize_values`.

    With ``label`` (the distinct values found -> an int64 each; equal values must get equal
    ones), each cell's code is instead the rank of its value's label among those found, and
    the labels (ascending, each once) are returned in place of the values: the labels of the
    values found are then placed where every cell reads its code (the table of offsets, the
    table of slots), with no further pass over the cells."""
    values = series.to_numpy()
    if values.dtype.kind in "iu" and len(values) >= 1024:
        lo, hi = int(values.min()), int(values.max())
        if hi - lo < min(4 * len(values), 1 << 24):
            offsets = values - lo
            present = np.flatnonzero(np.bincount(offsets, minlength=hi - lo + 1))
            found = (present + lo).astype(values.dtype)
            if label is None:
                labels, rank = pd.Index(found, dtype=values.dtype), np.arange(len(present))
            else:
                labels, rank = _ranked(label(found))
            ids = np.zeros(hi - lo + 1, dtype=code_dtype(len(labels)))
            ids[present] = rank
            return ids.take(offsets), labels
    if values.dtype == object and len(values) >= 1024:
        values = np.ascontiguousarray(values)  # holds the objects while their addresses are read
        by_slot = _slot_codes(values, label)
        if by_slot is not None:
            codes, labels, objects = by_slot
            return codes, (labels if label is not None else pd.Index(objects, dtype=object))
        codes, objects = _object_codes(values)
        if objects is not None:
            if label is not None:
                return _by_label(codes, label(objects))
            return codes.astype(code_dtype(len(objects)), copy=False), pd.Index(
                objects, dtype=object
            )
    codes, uniques = factorize_values(series, use_na_sentinel=False, dtype=np.int32)
    if label is not None:
        return _by_label(codes, label(uniques))
    return codes, uniques


def _by_label(codes: NDArray[Any], labels: NDArray[Any]) -> tuple[NDArray[Any], NDArray[Any]]:
    """``codes`` renumbered by the rank of their label (``labels[code]``) among the labels
    present, and those labels, ascending."""
    present, rank = _ranked(labels)
    return rank.astype(code_dtype(len(present))).take(codes), present


def _ranked(labels: NDArray[Any]) -> tuple[NDArray[Any], NDArray[Any]]:
    """``np.unique(labels, return_inverse=True)``: the distinct labels, ascending, and the
    rank of each label among them. A few labels (a column's distinct values) are ranked in
    Python, cheaper than NumPy's calls for so few."""
    if len(labels) > 256:
        present, rank = np.unique(labels, return_inverse=True)
        return present, rank.reshape(-1)
    values = labels.tolist()
    distinct = sorted(set(values))
    at = {v: i for i, v in enumerate(distinct)}
    return np.array(distinct, dtype=labels.dtype), np.array([at[v] for v in values], dtype=np.intp)


def _addresses(values: NDArray[Any]) -> NDArray[Any]:
    """The address of the object each cell of the contiguous object array ``values`` holds."""
    cells = (ctypes.c_ssize_t * len(values)).from_address(values.ctypes.data)
    return np.frombuffer(memoryview(cells), dtype=np.intp)


def _objects_at(addresses: NDArray[Any]) -> list[Any]:
    """The objects at ``addresses``: each must be held by a live array while this runs."""
    return [ctypes.cast(int(a), ctypes.py_object).value for a in addresses.tolist()]


# cells read to find a column's distinct objects before numbering every cell by slot
_SAMPLED_CELLS = 4096
# the most slots (an object's address over 16) a column's distinct objects may span
_SLOTS = 1 << 22
# sampled objects outside the table that every cell is compared with
_FAR_OBJECTS = 2
# cells whose slots are found at a time (their offsets: half a megabyte)
_SLOT_BLOCK = 1 << 16


def _slot_codes(
    values: NDArray[Any], label: Callable[[NDArray[Any]], NDArray[Any]] | None = None
) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any] | None] | None:
    """The cells of the contiguous object array ``values`` numbered by the object each holds,
    in the order of the objects' addresses (codes of the smallest type); the address of each
    code (ascending) and an object array of the object each code stands for. With ``label``
    (an object array -> an int64 each), numbered by the objects' labels instead: the codes
    are the ranks of the labels, returned in place of the addresses, and objects of one label
    share a code (no objects are returned). None where this way does not pay (the objects
    sampled are far apart in memory, or the column holds many).

    No hashing of the cells: the distinct objects of a few thousand evenly spread cells are
    found first, and every cell then reads its number in a table indexed by its object's
    address over 16 (from just below the lowest sampled). Every object takes at least 16 bytes
    (its reference count and type) and the sampled ones start on a multiple of 16, so no other
    object's address falls in a sampled one's slot: a cell whose slot holds a number holds
    that very object. A cell whose object was not sampled finds the number past them (as does
    a cell outside the table: indices are clipped to its ends), and those few cells are
    numbered by hashing their addresses.

    The table spans the sampled objects that hold the most sampled cells within ``_SLOTS``
    slots; a few objects far from them (None, or the NaN a reader puts in an empty text cell,
    made long before the texts) are found by comparing every cell's address with theirs. The
    objects are read from the cells that hold them (one of each), not at their addresses."""
    addresses = _addresses(values)
    n = len(addresses)
    # a small column samples fewer cells (a thousand, or a cell in 32): hashing a sample costs
    # more than the few cells it then misses (Adult's 30,162 rows: 8 % less time)
    step = max(1, n // min(_SAMPLED_CELLS, max(1024, n // 32)))
    # the sampled cells' distinct objects hashed (a few thousand addresses: a fraction of the
    # time of sorting them), then the few found sorted by address, with a cell holding each
    which, found = pd.factorize(addresses[::step])
    order = np.argsort(found)
    sample = found.take(order)
    cell = _first_index(which, len(found))
    cell *= step
    cell = cell.take(order)
    if int(sample[-1]) - int(sample[0]) <= 16 * max(_SLOTS - 3, 0):
        first, last = 0, len(sample)  # (the usual case: all of them within the slots' span)
    else:
        # the window of slots holding the most sampled cells: objects ``first`` to
        # ``last`` - 1
        counts = np.bincount(which, minlength=len(found)).take(order)
        ends = np.searchsorted(sample, sample + 16 * max(_SLOTS - 3, 0), side="right")
        held = np.concatenate([[0], np.cumsum(counts)])
        first = int(np.argmax(held[ends] - held[:-1]))
        last = int(ends[first])
    inside, far = sample[first:last], np.concatenate([sample[:first], sample[last:]])
    if len(far) > _FAR_OBJECTS:
        return None
    low = int(inside[0]) - 16  # slot 0 is below every object inside: cells below it clip to it
    if bool((inside & 15).any()):  # (``low`` is aligned as the first of them is)
        return None
    slots = (inside - low) >> 4
    size = int(slots[-1]) + 2  # and the last slot is above them all
    if size > _SLOTS:
        return None
    if len(far):
        sample = np.concatenate([inside, far])
        cell = np.concatenate([cell[first:last], cell[:first], cell[last:]])
    objects = values.take(cell)
    # the code of each sampled object: the rank of its label (its address, by default: the
    # sample's order, as far objects are only those past the window's ends)
    if label is None:
        labels, rank = sample, np.arange(len(sample))
        if len(far):
            labels, rank = np.unique(sample, return_inverse=True)
    else:
        labels, rank = _ranked(label(objects))
    unseen = len(labels)  # the code of a cell whose object was not sampled
    table = np.full(size, unseen, dtype=code_dtype(unseen + 1))
    table[slots] = rank[: len(inside)]
    far_codes = list(zip(far.tolist(), rank[len(inside) :].tolist()))
    codes = np.empty(n, dtype=table.dtype)
    # the slots of a block of cells at a time: the block's offsets stay in cache between the
    # subtraction, the shift and the lookup
    offsets = np.empty(min(n, _SLOT_BLOCK), dtype=np.int64)
    as_unsigned = offsets.view(np.uint64)
    for start in range(0, n, _SLOT_BLOCK):
        stop = min(start + _SLOT_BLOCK, n)
        block, unsigned = offsets[: stop - start], as_unsigned[: stop - start]
        np.subtract(addresses[start:stop], low, out=block)
        # a logical shift (of the same bits read unsigned): NumPy's arithmetic one of int64
        # has no vector instruction before AVX-512 and costs twice as much. A cell below
        # ``low`` (a negative offset) becomes a huge one, clipped to the last slot as a cell
        # above the table
        np.right_shift(unsigned, np.uint64(4), out=unsigned)
        table.take(block, mode="clip", out=codes[start:stop])
        for address, code in far_codes:
            np.putmask(codes[start:stop], addresses[start:stop] == address, code)
    del offsets
    holders = None if label is not None else objects
    if label is None and len(far):
        holders = np.empty(unseen, dtype=object)
        holders[rank] = objects
    if int(codes.max()) < unseen:  # (every cell's object sampled: the usual case)
        return codes.astype(code_dtype(unseen), copy=False), labels, holders
    missed = np.flatnonzero(codes == unseen)
    if len(missed) > n // 16:
        return None  # many objects the sample did not find: hashing every cell costs less
    extra, more = _numbered(addresses.take(missed))
    if unseen + len(more) > _FEW_OBJECTS:
        return None
    more_objects = values.take(missed.take(_first_index(extra, len(more))))
    more_labels = more if label is None else label(more_objects)
    merged, where = _ranked(np.concatenate([labels, more_labels]))
    dtype = code_dtype(len(merged))
    moved = where[: len(labels)]  # the rank among all of each label the sample found
    more_codes = where[len(labels) :]
    # labels the sample did not find that fall between its own: its codes move up to their
    # ranks among all (the cells not sampled keep a code past them, overwritten below)
    between = sorted(set(more_codes[more_codes < moved[-1]].tolist()) - set(moved.tolist()))
    if len(between) > 4:  # many: each cell's new code read in a table
        codes = np.append(moved, 0).astype(dtype).take(codes)
    else:  # a few: a comparison and an addition per cell for each (no index widened)
        codes = codes.astype(dtype, copy=False)
        if between:
            codes[missed] = 0
        for rank in between:
            np.add(codes, codes >= rank, out=codes, casting="unsafe")
    codes[missed] = more_codes.astype(dtype).take(extra)
    if holders is None:
        return codes, merged, None
    every = np.empty(len(merged), dtype=object)
    every[more_codes] = more_objects
    every[moved] = holders
    return codes, merged, every


def _numbered(keys: NDArray[Any]) -> tuple[NDArray[Any], NDArray[Any]]:
    """``pd.factorize(keys)``: the number of each key, first seen first, and the keys. A few
    (the cells a sample missed) are numbered in Python, cheaper than pandas' calls for so
    few."""
    if len(keys) > 256:
        numbers, distinct = pd.factorize(keys)
        return np.asarray(numbers), np.asarray(distinct)
    at: dict[int, int] = {}
    numbers = [at.setdefault(k, len(at)) for k in keys.tolist()]
    return np.array(numbers, dtype=np.intp), np.array(list(at), dtype=keys.dtype)


def _object_codes(values: NDArray[Any]) -> tuple[NDArray[Any], NDArray[Any] | None]:
    """The cells of an object column numbered by the object each holds, first seen first, and
    those objects (None when they are more than ``_FEW_OBJECTS``: not read one by one). The
    value of each cell is then ``objects[codes]``, found without comparing values: the first
    step of :func:`factorize_values`, whose second (merging equal values held by distinct
    objects) can be left to whoever reads the values once per object."""
    values = np.ascontiguousarray(values)  # holds the objects while their addresses are read
    by_identity, found = pd.factorize(_addresses(values))
    by_identity = by_identity.astype(np.int64, copy=False)
    if len(found) > _FEW_OBJECTS:
        return by_identity, None
    # the few objects themselves, read at their addresses (``values`` holds every one of
    # them), first seen first: no further pass over the rows
    objects = np.empty(len(found), dtype=object)
    objects[:] = _objects_at(found)
    return by_identity, objects


def hierarchy_levels(
    hierarchy: Hierarchy,
) -> tuple[list[NDArray[Any]], list[NDArray[Any]], list[NDArray[Any]]]:
    """Per level of ``hierarchy``: the code of each hierarchy row (one more entry, for a
    missing value), the label of each code, and ARX's domain share of each code."""
    rows = hierarchy.rows
    size = len(rows)
    level_codes, labels, shares = [], [], []
    top = hierarchy.height - 1
    for level in range(hierarchy.height):
        # a dict numbers the labels in order of first appearance, as factorize would; the
        # hierarchy has few rows, so this is cheaper than building a Series per level
        seen: dict[str, int] = {}
        col = [seen.setdefault(row[level], len(seen)) for row in rows]
        n_labels = len(seen)
        lab: list[Any] = list(seen)
        # The root absorbs missing values too, so the top node is a single class.
        if level == top:
            col.append(col[0])
        else:
            col.append(n_labels)
            lab.append(np.nan)  # what factorize kept for the missing pseudo-value
        level_code = np.array(col, dtype=np.int64)
        counts = np.bincount(level_code[:size], minlength=len(lab)).astype(float)
        counts[counts == 0] = 1.0  # the missing pseudo-value is its own leaf
        level_codes.append(level_code)
        labels.append(np.array(lab, dtype=object))
        shares.append(counts / size)
    return level_codes, labels, shares


def encode_qi(series: pd.Series, hierarchy: Hierarchy) -> EncodedQI:
    """Encode ``series`` against ``hierarchy``; raises if a value is not covered."""
    codes, rows = hierarchy_rows(series, hierarchy)
    return EncodedQI(str(series.name), hierarchy, rows.take(codes), *hierarchy_levels(hierarchy))


def encode_sensitive(series: pd.Series) -> tuple[NDArray[Any], pd.Index]:
    """Codes per row and the distinct values (missing is a value of its own)."""
    return factorize_values(series, use_na_sentinel=False)


class EncodedTable:
    """A table reduced to distinct (QI, sensitive) rows with weights, ready for node grouping."""

    def __init__(
        self,
        df: pd.DataFrame,
        quasi_identifiers: Sequence[str],
        hierarchies: Mapping[str, Hierarchy],
        sensitive: Sequence[str] = (),
    ) -> None:
        if not quasi_identifiers:
            raise ParameterError("at least one quasi-identifier is needed")
        require_columns(df, list(quasi_identifiers), role="quasi-identifier")
        require_columns(df, list(sensitive), role="sensitive column")
        missing = [q for q in quasi_identifiers if q not in hierarchies]
        if missing:
            raise ParameterError(
                f"no hierarchy given for quasi-identifier(s): {', '.join(missing)}"
            )
        if len(df) == 0:
            raise DataError("the table has no rows")
        # each column numbered once; the records are then reduced to their distinct rows from
        # those numbers, and the hierarchies are looked up on the distinct rows only
        parts = [hierarchy_rows(df[q], hierarchies[q]) for q in quasi_identifiers]
        sens = [factorize_values(df[s], use_na_sentinel=False, dtype=np.int32) for s in sensitive]
        distinct = _distinct_records(
            [c for c, _ in parts] + [c for c, _ in sens],
            [len(r) for _, r in parts] + [len(u) for _, u in sens],
            [r for _, r in parts] + [None] * len(sens),
            [len(hierarchies[q].rows) + 1 for q in quasi_identifiers] + [len(u) for _, u in sens],
        )
        base = distinct[0]
        qis = [
            EncodedQI(q, hierarchies[q], self._row_index_of(base[:, i]), *levels)
            for i, q in enumerate(quasi_identifiers)
            for levels in [hierarchy_levels(hierarchies[q])]
        ]
        self._build(len(df), qis, list(sensitive), sens, None, distinct)

    def _row_index_of(self, base_col: NDArray[Any]) -> Callable[[], NDArray[Any]]:
        """The per-record hierarchy rows of a QI, built from the distinct rows when asked for."""
        return lambda: base_col.take(self.row_to_base)

    @classmethod
    def from_histogram(cls, hist: Histogram, hierarchies: Mapping[str, Hierarchy]) -> EncodedTable:
        """The table a histogram counts, encoded from its cells: each cell stands for its
        records (its count is the weight), so nothing here grows with the rows. ``row_to_base``
        and the QIs' ``row_index`` are then per cell, not per record."""
        missing = [q for q in hist.quasi_identifiers if q not in hierarchies]
        if missing:
            raise ParameterError(
                f"no hierarchy given for quasi-identifier(s): {', '.join(missing)}"
            )
        qis = []
        for q in hist.quasi_identifiers:
            # the column's distinct values are encoded once; each cell then reads its value's
            # hierarchy row, in the smallest type that holds the hierarchy's rows
            enc = encode_qi(pd.Series(hist.labels[q], name=q), hierarchies[q])
            rows = compact_codes(enc.row_index, len(hierarchies[q].rows) + 1)
            enc.row_index = rows.take(hist.codes[q])
            qis.append(enc)
        sens = [(np.asarray(hist.codes[s]), hist.labels[s]) for s in hist.sensitive]
        table = cls.__new__(cls)
        table._build(hist.rows, qis, list(hist.sensitive), sens, hist.counts)
        return table

    def _build(
        self,
        n: int,
        qis: list[EncodedQI],
        sensitive: list[str],
        sens: list[tuple[NDArray[Any], pd.Index]],
        row_weights: NDArray[Any] | None,
        distinct: tuple[NDArray[Any], NDArray[Any], NDArray[Any]] | None = None,
    ) -> None:
        self.n = n
        # records per input row: None for a table's rows, the counts for a histogram's cells
        self.row_weights = row_weights
        self.qis = qis
        self.sensitive = sensitive
        self.sa_values = [u for _, u in sens]
        radices = [len(q.hierarchy.rows) + 1 for q in self.qis] + [len(u) for u in self.sa_values]
        if distinct is None:
            cols = [q.row_index for q in self.qis] + [c for c, _ in sens]
            distinct = _distinct_rows(cols, radices)
        base, self.row_to_base, weights = distinct
        if row_weights is not None:
            weights = np.bincount(
                self.row_to_base, weights=row_weights.astype(float), minlength=len(weights)
            )
            weights = np.rint(weights)
        self.weights = weights.astype(np.int64)
        self.m = len(self.weights)
        d = len(self.qis)
        # hierarchy codes (for metrics) and the same codes compacted to the values present,
        # which keeps the mixed-radix key space, and so the grouping, small. What is present
        # is found on the hierarchy's few rows; the distinct rows are then read once per level
        # each QI's column of hierarchy rows in the index type, converted once for its count
        # and its gather
        base_cols = [base[:, i].astype(np.intp) for i in range(d)]
        # per QI: the compacted code of each hierarchy row at each level (levels x rows),
        # read by the distinct rows
        compact: list[NDArray[Any]] = []
        # per QI and level: the hierarchy code of each compacted code (the inverse)
        self.present_codes: list[list[NDArray[Any]]] = []
        self.cards: list[list[int]] = []
        # per QI: records per hierarchy row (the last one for missing values)
        self.row_records: list[NDArray[Any]] = []
        weights = self.weights.astype(float)  # as a weighted count reads them, converted once
        # the distinct rows spread over 8 counters per hierarchy row: they come sorted, so runs
        # of rows share a hierarchy row, and one counter would add each row's weight to what
        # the row before has just written (a wait per row on the last addition); 8 take turns
        # (a third less time)
        lanes = np.arange(self.m, dtype=np.intp) & 7
        for i, q in enumerate(self.qis):
            spread = base_cols[i] << 3
            spread |= lanes
            records = np.bincount(spread, weights, minlength=8 * len(q.level_codes[0]))
            records = records.reshape(-1, 8).sum(axis=1)
            self.row_records.append(records.astype(np.int64))
            # every level at once: the codes present flagged in one array (level after level,
            # ``width`` codes each), ranked by a running sum along each level, and each
            # hierarchy row's rank read where its code is
            levels = np.array(q.level_codes)
            width = max(len(lab) for lab in q.labels)
            at = levels + (np.arange(len(levels)) * width)[:, None]
            present = np.zeros(len(levels) * width, dtype=bool)
            present[at[:, records > 0]] = True
            present = present.reshape(len(levels), width)
            ranks = np.cumsum(present, axis=1, dtype=np.int32)  # (int64: a slow cast)
            ranks -= 1
            compact.append(ranks.ravel().take(at))
            cards = np.count_nonzero(present, axis=1).tolist()
            self.cards.append(cards)
            # the codes present, level after level, cut at each level's count
            flagged = np.flatnonzero(present) % width
            ends = np.cumsum(cards).tolist()
            self.present_codes.append([flagged[e - c : e] for c, e in zip(cards, ends)])
        # one row per (QI, level): a node's codes are a few contiguous rows
        self.all_cards = np.array([c for cards in self.cards for c in cards], dtype=np.int64)
        # a byte per code while every level has at most 256 values present: whoever combines
        # codes into keys widens them first (the keys' type is chosen from the key space)
        dtype = code_dtype(int(self.all_cards.max()))
        self.all_codes = np.empty((len(self.all_cards), self.m), dtype=dtype)
        # one gather per QI of the distinct rows' hierarchy rows, every level at once: the
        # codes of a level are composed with its compaction on the hierarchy's few rows first
        at, cards = 0, self.all_cards.tolist()
        for to_compact, rows in zip(compact, base_cols):
            # the levels of more than one value present, gathered in one call (those below
            # the root, as a rule); a level of one value (the root) codes every row 0
            many = [level for level in range(len(to_compact)) if cards[at + level] > 1]
            if many == list(range(len(many))):
                out = self.all_codes[at : at + len(many)]
                np.take(to_compact[: len(many)].astype(dtype), rows, axis=1, out=out, mode="clip")
                self.all_codes[at + len(many) : at + len(to_compact)] = 0
            else:
                for level, (level_compact, out) in enumerate(zip(to_compact, self.all_codes[at:])):
                    if level in many:
                        np.take(level_compact.astype(dtype), rows, out=out, mode="clip")
                    else:
                        out.fill(0)
            at += len(to_compact)
        self.offsets = np.cumsum(np.array([0] + [len(c) for c in self.cards[:-1]]))
        self.codes = [
            list(self.all_codes[o : o + len(c)]) for o, c in zip(self.offsets.tolist(), self.cards)
        ]
        self._offsets = [int(o) for o in self.offsets]
        self._cards = [int(c) for c in self.all_cards]
        self.width = self.all_codes.shape[0]
        self.sa_codes = [base[:, d + j] for j in range(len(sens))]
        # the distinct rows' hierarchy rows, one column per QI: ``qi_rows`` is read from them
        self._qi_columns: NDArray[Any] | None = base[:, :d]
        self._qi_rows: NDArray[Any] | None = None
        self.heights = np.array([q.height for q in self.qis])
        # distinct rows that differ only in their sensitive values fall in one class at every
        # node: grouping a node from scratch needs only the distinct quasi-identifier rows
        self.base_to_qi: NDArray[Any] | None = None
        self.qi_codes, self.qi_weights, self.qi_first = self.all_codes, self.weights, None
        if sens:
            _, base_to_qi, _ = _distinct_rows([base[:, i] for i in range(d)], radices[:d])
            n_qi = int(base_to_qi.max()) + 1
            if n_qi < self.m:
                self.base_to_qi = base_to_qi
                self.qi_weights = np.bincount(base_to_qi, weights=self.weights, minlength=n_qi)
                self.qi_first = _first_index(base_to_qi, n_qi)
                self.qi_codes = np.ascontiguousarray(self.all_codes[:, self.qi_first])

    @property
    def qi_rows(self) -> NDArray[Any]:
        """Per distinct row, the hierarchy row of each QI's value (rows x QIs): what a class
        is found by in a population table (:mod:`anonweb.core.models.population_table`).
        Built when first asked for: only a model that compares with a population reads it."""
        if self._qi_rows is None:
            assert self._qi_columns is not None, "the hierarchy rows were let go"
            # written column by column: twice as fast as converting the column-major copy
            columns = self._qi_columns
            self._qi_rows = np.stack([columns[:, i] for i in range(columns.shape[1])], axis=1)
        return self._qi_rows

    @qi_rows.deleter
    def qi_rows(self) -> None:
        self._qi_rows = self._qi_columns = None

    def level_codes(self, i: int, level: int, rows: NDArray[Any]) -> NDArray[Any]:
        """The hierarchy codes (``full_codes[i][level]``) of the distinct rows ``rows``: read
        through the compacted codes (a search asks for a few rows, its suppressed classes':
        no per-level copy of every row's codes is built for them), or from ``full_codes``
        once built (a what-if that let the compacted codes go)."""
        full = self.__dict__.get("full_codes")
        if full:
            return np.asarray(full[i][level].take(rows))
        compacted = self.all_codes[self._offsets[i] + level].take(rows)
        return np.asarray(self.present_codes[i][level].take(compacted))

    @cached_property
    def full_codes(self) -> list[list[NDArray[Any]]]:
        """Per QI and level, the hierarchy code of each distinct row, in the smallest type
        that holds the level's labels (built when first asked for)."""
        return [
            [
                present.astype(code_dtype(len(labels))).take(self.all_codes[o + level])
                for level, (present, labels) in enumerate(zip(self.present_codes[i], q.labels))
            ]
            for i, (q, o) in enumerate(zip(self.qis, self._offsets))
        ]

    @cached_property
    def row_codes(self) -> NDArray[Any]:
        """The codes one row per distinct row: rolling up gathers a few hundred scattered rows,
        and each then costs one or two cache lines instead of one per QI. Built on first use
        (a what-if never rolls up from row codes, and this copy is as large as the codes)."""
        return np.ascontiguousarray(self.all_codes.T)

    def group(
        self, levels: Sequence[int] | NDArray[Any], rows: NDArray[Any] | None = None
    ) -> tuple[NDArray[Any], int]:
        """Class id of each distinct row (or of each of ``rows``) at a node, and the class count."""
        inv, n_classes, _ = self.group_sizes(levels, rows)
        return inv, n_classes

    def group_sizes(
        self,
        levels: Sequence[int] | NDArray[Any],
        rows: NDArray[Any] | None = None,
        weights: NDArray[Any] | None = None,
        codes: NDArray[Any] | None = None,
    ) -> tuple[NDArray[Any], int, NDArray[Any] | None]:
        """:meth:`group`, and with ``weights`` (positive, one per row grouped) their sum per
        class, taken from the count that finds the classes when it can. Without ``rows``,
        ``codes`` (laid out as ``all_codes``) may name other rows to group."""
        codes = self.all_codes if codes is None else codes
        cols, cards, space = self._node_columns(levels)
        if rows is None and space < 2**62:
            key = _node_key(codes, cols, cards, space)
        elif rows is not None and space < 2**62 and len(rows) > 1024:
            # many rows: one gather per column of the node's codes, multiplied and added in
            # place (cheaper than gathering the rows' codes first once rows run to thousands)
            key = self.all_codes[cols[0]].take(rows).astype(_key_type(space, len(rows)))
            for c, card in zip(cols[1:], cards[1:]):
                key *= card
                key += self.all_codes[c].take(rows)
        elif rows is not None and space < 2**62:  # the rows' codes, then the node's columns
            sub = self.row_codes.take(rows, axis=0).take(cols, axis=1)
            radix = [math.prod(cards[i + 1 :]) for i in range(len(cards))]
            key = sub @ np.array(radix, dtype=np.int32 if space < 2**31 else np.int64)
        else:  # too many combinations for one int64: combine column by column, renumbering
            sub = codes[cols] if rows is None else self.row_codes[rows][:, cols].T
            key = sub[0].astype(np.int64)
            for j in range(1, sub.shape[0]):
                key = pd.factorize(key * cards[j] + sub[j])[0].astype(np.int64)
            space = int(key.max()) + 1 if len(key) else 0
        # a count over the key space is the cheapest way to ids while the space is at most a
        # few times the rows; beyond that, hashing the keys (sorting them costs more)
        if space <= len(key) and weights is not None:
            # a space no larger than the rows: one count of the weights over it finds the
            # classes and their sizes at once (in key order, each class's weights added in row
            # order, as below)
            counts = np.bincount(key, weights, minlength=space)
            occupied = np.flatnonzero(counts > 0)  # positive weights (see _rows_grouped)
            n_classes = len(occupied)
            ids = np.empty(space, dtype=np.int64)
            ids[occupied] = np.arange(n_classes)
            return ids.take(key), n_classes, counts.take(occupied)
        # a small space is flagged whatever the rows: a node rolled up from a thousand classes
        # over 15,750 keys is grouped in 14 us instead of hashing's 21
        if space <= max(8 * len(key), _FLAGGED_SPACE):
            # the keys present marked in a byte per key (a table over the space costs up to
            # eight slots a row: bytes, not counts), ids in key order written where the keys
            # are (a scatter of the few classes, not a cumulative sum of the space) in int32
            # while they fit, and gathered with ``take`` (several times cheaper than indexing)
            present = np.zeros(space, dtype=bool)
            present[key] = True
            occupied = np.flatnonzero(present)
            del present
            n_classes = len(occupied)
            narrow = n_classes < 2**31 and len(key) > _WIDE_KEYS
            ids = np.empty(space, dtype=np.int32 if narrow else np.int64)
            ids[occupied] = np.arange(n_classes)
            del occupied
            inv = ids.take(key).astype(np.int64, copy=False)
            del ids, key
            # each class's weights added in row order, as a count over the keys adds them
            sizes = None if weights is None else np.bincount(inv, weights, minlength=n_classes)
            return inv, n_classes, sizes
        inv, uniq = pd.factorize(key)
        n_classes = len(uniq)
        if weights is None:
            return inv, n_classes, None
        return inv, n_classes, np.bincount(inv, weights=weights, minlength=n_classes)

    @property
    def rows_grouped(self) -> int:
        """The rows a node is grouped from when no finer node's classes are at hand."""
        return int(self._rows_to_group()[0].shape[1])

    def key_space(self, levels: Sequence[int] | NDArray[Any]) -> int:
        """The number of keys a node's classes are counted over."""
        return self._node_columns(levels)[2]

    def _node_columns(
        self, levels: Sequence[int] | NDArray[Any]
    ) -> tuple[list[int], list[int], int]:
        """The rows of ``all_codes`` a node's key combines, their cards and the key space."""
        cols = [o + int(lv) for o, lv in zip(self._offsets, levels)]
        # a QI at a level of one value (its root) adds nothing to the key: left out
        cols = [c for c in cols if self._cards[c] > 1] or cols[:1]
        cards = [self._cards[c] for c in cols]
        return cols, cards, math.prod(cards)

    @cached_property
    def _weights_counted(self) -> NDArray[Any]:
        """The distinct rows' weights as a weighted count reads them: as floats, converted
        once rather than by every count (a tenth of grouping Adult's distinct rows), while
        the copy is small."""
        return self.weights.astype(float) if self.m <= _FLOAT_COPY else self.weights

    def _row_numbers(self, rows: int) -> NDArray[Any]:
        """``np.arange(rows)``, made once per table (every node grouped from the distinct rows
        numbers them)."""
        got = self._numbers.get(rows)
        if got is None:
            got = self._numbers[rows] = np.arange(rows)
        return got

    @cached_property
    def _numbers(self) -> dict[int, NDArray[Any]]:
        return {}

    def _rows_grouped(
        self, levels: Sequence[int] | NDArray[Any], weights: NDArray[Any], codes: NDArray[Any]
    ) -> tuple[NDArray[Any], NDArray[Any], Callable[[], NDArray[Any]]]:
        """A node's classes over all the rows of ``codes`` (laid out as ``all_codes``): a
        row of each, the sum of ``weights`` in each, and a function giving each row's class.

        Where the key space is no larger than the rows, one weighted count over the keys
        finds the classes (in key order) and their sizes, and a row numbers' scatter over the
        keys a row of each (the last, as :func:`_first_index` finds it): each row's class is
        then found only when asked for (a release's rows, a sensitive column's counts), not
        for every node checked. Otherwise as :meth:`group_sizes`."""
        cols, cards, space = self._node_columns(levels)
        rows = codes.shape[1]
        # a count over a space up to 8 times the rows still costs less than numbering the
        # keys present first (as :meth:`group_sizes` does there): Adult's nodes with 31,500
        # keys over 12,458 rows are grouped in 70 us instead of 130
        if space > 8 * rows:
            inv, n_classes, sizes = self.group_sizes(levels, None, weights, codes)
            assert sizes is not None
            return _first_index(inv, n_classes), sizes, lambda: inv
        # the count and the scatter index with int64 as it is: a narrower key is converted
        # by each of them (twice the time of both on Adult's distinct rows)
        key = _node_key(codes, cols, cards, space).astype(np.int64, copy=False)
        counts = np.bincount(key, weights, minlength=space)
        # the weights are positive: a class is a positive count. Compared first, the counts
        # are read as bytes (``flatnonzero`` of floats costs ten times as much: 120 us over
        # 31,500 keys)
        occupied = np.flatnonzero(counts > 0)
        last = np.empty(space, dtype=np.int64)
        last[key] = self._row_numbers(rows)

        def classes_of_rows() -> NDArray[Any]:
            ids = np.empty(space, dtype=np.int64)
            ids[occupied] = np.arange(len(occupied))
            return ids.take(key)

        return last.take(occupied), counts.take(occupied), classes_of_rows

    def classes(
        self,
        levels: Sequence[int] | NDArray[Any],
        parent: ClassTable | None,
        sa: Sequence[int],
        lazy: bool = False,
    ) -> ClassTable:
        """The classes of a node, rolled up from a finer node's classes when one is given.

        Rolling up is exact because every class of a finer node lies inside one class of a
        coarser node; it touches one row per parent class instead of one per distinct row.
        With ``lazy``, the sensitive-value histograms are left to :meth:`ClassTable.hist`,
        which builds them on first use (a node that fails k-anonymity never needs them).
        """
        if parent is None:
            if self.base_to_qi is None or self.qi_first is None:
                rep, sizes, inv_of = self._rows_grouped(
                    levels, self._weights_counted, self.all_codes
                )
            else:
                rep_qi, sizes, qi_inv_of = self._rows_grouped(
                    levels, self.qi_weights, self.qi_codes
                )
                rep = self.qi_first[rep_qi]
                to_qi = self.base_to_qi

                def inv_of() -> NDArray[Any]:
                    return np.asarray(qi_inv_of()[to_qi])

            n_classes = len(rep)
            if (lazy and self.sa_values) or (not lazy and sa):
                # the sensitive counts are built from the class of each distinct row
                rows_inv = inv_of()
                hists = {} if lazy else {j: self.sa_histogram(j, rows_inv, n_classes) for j in sa}
                source = (self, None, rows_inv) if lazy and self.sa_values else None
                return ClassTable(
                    tuple(levels), rep, sizes.astype(np.int64), hists, rows_inv, source
                )
            return ClassTable(tuple(levels), rep, sizes.astype(np.int64), {}, None, None, inv_of)
        inv, n_classes, summed = self.group_sizes(levels, parent.rep, parent.sizes)
        assert summed is not None
        sizes = summed.astype(np.int64)
        hists = {} if lazy else {j: _sum_rows(parent.hist(j), inv, n_classes) for j in sa}
        rep = np.empty(n_classes, dtype=np.int64)
        rep[inv] = parent.rep  # any parent class inside a class represents it
        return ClassTable(
            tuple(levels),
            rep,
            sizes,
            hists,
            None,
            (self, parent, inv) if lazy and self.sa_values else None,
        )

    def _rows_to_group(self) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any] | None]:
        """What a node is grouped from when no finer node's classes are at hand: the codes
        of the distinct quasi-identifier rows (laid out as ``all_codes``), their weights as
        a count reads them, and the distinct row (of ``all_codes``) each stands for (None:
        the rows are the distinct rows themselves)."""
        if self.base_to_qi is None or self.qi_first is None:
            return self.all_codes, self._weights_counted, None
        return self.qi_codes, self.qi_weights, self.qi_first

    def classes_many(
        self,
        nodes: NDArray[Any],
        parents: Sequence[ClassTable | None],
        sa: Sequence[int],
    ) -> ClassBatch:
        """The classes of several nodes at once, each rolled up from its finer node's classes
        (a parent None: grouped from the distinct rows, as :meth:`classes` does).

        One key, one count (or hashing) and one bincount serve the whole batch, instead of a
        dozen small array operations per node. Each node's classes are numbered together, in any
        order (no result depends on it); every node's key space must fit an int64.
        """
        nodes = np.asarray(nodes, dtype=np.int64)
        cols = self.offsets + nodes  # nodes x QIs
        cards = self.all_cards[cols]
        strides = np.ones_like(cards)
        strides[:, :-1] = np.cumprod(cards[:, :0:-1], axis=1)[:, ::-1]
        spaces = [math.prod(c) for c in cards.tolist()]
        codes, row_weights, first = self._rows_to_group()
        n_rows = codes.shape[1]
        # per node: the rows grouped (a row of ``all_codes`` each) and their weights
        sources = [
            (self._row_numbers(n_rows) if first is None else first, row_weights)
            if p is None
            else (p.rep, p.sizes)
            for p in parents
        ]
        lens = np.array([len(r) for r, _ in sources], dtype=np.int64)
        seg = np.repeat(np.arange(len(parents)), lens)
        rows = np.concatenate([r for r, _ in sources])
        # node by node, the parent's rows of codes (a few contiguous bytes each), the node's
        # columns of them, and their key: cheaper than building one index of every code read.
        # A node without a parent is keyed over the distinct rows as :meth:`classes` keys it
        # (the same mixed radix: the columns left out there hold one code, 0)
        if max(spaces) < 2**53:
            # every key and every partial sum a whole number a float holds exactly: each
            # node's strides laid out over all the columns of codes (0 elsewhere), so that the
            # key is one floating product of the parent's rows of codes (BLAS), with no
            # gather of the node's columns (on Adult, a third less time than the integer
            # product of the columns gathered, exactly the same keys)
            radix = np.zeros((len(nodes), self.row_codes.shape[1]))
            radix[np.arange(len(nodes))[:, None], cols] = strides
            strides = radix
            cols = np.zeros((len(nodes), 0), dtype=np.int64)  # every column: none taken
        else:
            strides = strides.astype(np.int64)
        key = np.concatenate(
            [
                _node_key(codes, *self._node_columns(lv)).astype(np.int64, copy=False)
                if p is None
                else (
                    self.row_codes.take(p.rep, axis=0).astype(np.float64) @ s
                    if not c.size
                    else self.row_codes.take(p.rep, axis=0).take(c, axis=1) @ s
                )
                for p, lv, c, s in zip(parents, nodes, cols, strides)
            ]
        ).astype(np.int64, copy=False)
        weights = np.concatenate([w for _, w in sources])
        sizes: NDArray[Any] | None = None
        inv: NDArray[Any] | None = None
        rep: NDArray[Any] | None = None
        if sum(spaces) < 2**62:  # the nodes' key spaces side by side: one key for the batch
            base = np.cumsum([0] + spaces[:-1])
            # rows come node after node and nodes' keys differ, so ids numbered in key order
            # (a count over the spaces, while they are small) or in order of first appearance
            # (hashing) come node after node too, as ``starts`` needs
            key = key + base[seg]
            total = sum(spaces)
            if total <= 8 * len(key):
                counts = np.bincount(key, weights=weights, minlength=total)
                uniq = np.flatnonzero(counts > 0)
                n_classes = len(uniq)
                sizes = counts[uniq]
                # a row of each class scattered over the keys (the last, as ``rep[inv] =
                # rows`` leaves it): the class of each row is found only if asked for
                last = np.empty(total, dtype=np.int64)
                last[key] = rows
                rep = last.take(uniq)
                del last
                counted_key = key

                def classes_of_rows() -> NDArray[Any]:
                    ids = np.empty(total, dtype=np.int64)
                    ids[uniq] = np.arange(n_classes)
                    return np.asarray(ids.take(counted_key))

            else:
                inv, uniq = pd.factorize(key)
                n_classes = len(uniq)
            class_seg = np.searchsorted(base, uniq, side="right") - 1
        else:
            order = np.lexsort((key, seg))
            skey, sseg = key[order], seg[order]
            new = np.empty(len(order), dtype=bool)
            new[:1] = True
            new[1:] = (skey[1:] != skey[:-1]) | (sseg[1:] != sseg[:-1])
            ids = np.cumsum(new) - 1
            inv = np.empty(len(order), dtype=np.int64)
            inv[order] = ids
            n_classes = int(ids[-1]) + 1 if len(ids) else 0
            class_seg = sseg[new]
        del key
        if inv is not None:
            found = inv

            def classes_of_rows() -> NDArray[Any]:
                return found

        counts = np.bincount(class_seg, minlength=len(parents))
        starts = np.concatenate(([0], np.cumsum(counts)))
        if sizes is None:
            assert inv is not None
            sizes = np.bincount(inv, weights=weights, minlength=n_classes)
        if rep is None:
            assert inv is not None
            rep = np.empty(n_classes, dtype=np.int64)
            rep[inv] = rows
        ends = np.cumsum(lens).tolist()
        to_qi = self.base_to_qi if first is not None else None

        def groups() -> list[NDArray[Any]]:
            # the class (numbered within its node) of each parent class, for histograms built
            # later; of each distinct row for a node grouped from the distinct rows
            local = classes_of_rows() - starts[seg]
            out = [local[e - n : e] for e, n in zip(ends, lens.tolist())]
            if to_qi is not None:
                out = [g if p is not None else g.take(to_qi) for g, p in zip(out, parents)]
            return out

        hists: dict[int, NDArray[Any]] = {}
        if sa and all(p is not None for p in parents):
            # every node rolled up: the parents' counts summed by class in one pass
            found_inv = classes_of_rows()
            hists = {
                j: _sum_rows(
                    np.concatenate([p.hist(j) for p in parents if p is not None]),
                    found_inv,
                    n_classes,
                )
                for j in sa
            }
        elif sa:
            by_node = groups()
            hists = {
                j: np.concatenate(
                    [
                        self.sa_histogram(j, g, int(counts[b]))
                        if p is None
                        else _sum_rows(p.hist(j), g, int(counts[b]))
                        for b, (p, g) in enumerate(zip(parents, by_node))
                    ]
                )
                for j in sa
            }
        return ClassBatch(
            [tuple(int(x) for x in lv) for lv in nodes],
            starts,
            np.asarray(class_seg),
            rep,
            sizes.astype(np.int64),
            hists,
            (self, list(parents), groups),
        )

    def sa_histogram(self, sa_index: int, inv: NDArray[Any], n_classes: int) -> NDArray[Any]:
        """Matrix (classes x sensitive values) of record counts."""
        nsa = len(self.sa_values[sa_index])
        flat = inv * nsa + self.sa_codes[sa_index]
        hist = np.bincount(flat, weights=self.weights, minlength=n_classes * nsa)
        return hist.reshape(n_classes, nsa)

    def sa_global(self, sa_index: int) -> NDArray[Any]:
        nsa = len(self.sa_values[sa_index])
        return np.bincount(self.sa_codes[sa_index], weights=self.weights, minlength=nsa)


@dataclass
class ClassTable:
    """Equivalence classes of a node: a representative distinct row, size and SA counts each.

    Class ids are those :meth:`EncodedTable.group` assigns for the node and the parent used.
    """

    levels: tuple[int, ...]
    rep: NDArray[Any]
    sizes: NDArray[Any]
    hists: dict[int, NDArray[Any]]
    inv: NDArray[Any] | None = None  # class of each distinct row, when grouped from them
    # where missing histograms come from: (table, finer node's classes or None for the distinct
    # rows, class of each of those); dropped once every histogram is built
    source: tuple[Any, ...] | None = field(default=None, repr=False)
    # what finds ``inv`` when it is asked for (grouped from the distinct rows without it)
    inv_of: Callable[[], NDArray[Any]] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.sizes)

    def row_classes(self) -> NDArray[Any] | None:
        """The class of each distinct row (``inv``), found now if it was left for later;
        None for classes rolled up from a finer node's."""
        if self.inv is None and self.inv_of is not None:
            self.inv, self.inv_of = self.inv_of(), None
        return self.inv

    def for_rolling_up(self) -> ClassTable:
        """The same classes holding only what a coarser node is rolled up from (a
        representative, the size and the sensitive counts per class): nothing per distinct row.
        Histograms still to come from the distinct rows are built now, so that the class of
        every distinct row (``inv``, as long as the table) is not kept with the classes."""
        if self.source is not None and self.source[1] is None:
            for j in range(len(self.source[0].sa_values)):
                self.hist(j)
        if (
            self.inv is None
            and self.inv_of is None
            and (self.source is None or self.source[1] is not None)
        ):
            return self
        return ClassTable(self.levels, self.rep, self.sizes, self.hists, None, self.source)

    def hist(self, j: int) -> NDArray[Any]:
        """The (classes x sensitive values) counts of sensitive column ``j``, built if needed."""
        h = self.hists.get(j)
        if h is None:
            if self.source is None:
                raise KeyError(f"no histogram of sensitive column {j} was kept for this node")
            table, parent, groups = self.source
            if parent is None:
                h = table.sa_histogram(j, groups, len(self))
            else:
                h = _sum_rows(parent.hist(j), groups, len(self))
            self.hists[j] = h
            if len(self.hists) == len(table.sa_values):
                self.source = None
        return h


@dataclass
class ClassBatch:
    """The classes of several nodes side by side: node ``b`` owns classes ``starts[b]:starts[b+1]``."""

    levels: list[tuple[int, ...]]
    starts: NDArray[Any]
    node_of: NDArray[Any]  # per class: its node's position in the batch
    rep: NDArray[Any]
    sizes: NDArray[Any]
    hists: dict[int, NDArray[Any]]
    # (table, the parents (None: the distinct rows), per node the class of each parent class
    # or distinct row, or what finds these when first asked for): what a node's histograms
    # not built with the batch are built from
    source: (
        tuple[
            Any,
            list[ClassTable | None],
            list[NDArray[Any]] | Callable[[], list[NDArray[Any]]],
        ]
        | None
    ) = field(default=None, repr=False)

    def table(self, b: int) -> ClassTable:
        lo, hi = int(self.starts[b]), int(self.starts[b + 1])
        hists = {j: h[lo:hi] for j, h in self.hists.items()}
        source = None
        if self.source is not None and len(hists) < len(self.source[0].sa_values):
            table, parents, groups = self.source
            if callable(groups):
                groups = groups()
                self.source = (table, parents, groups)
            source = (table, parents[b], groups[b])
        return ClassTable(self.levels[b], self.rep[lo:hi], self.sizes[lo:hi], hists, None, source)

    def per_node(self, values: NDArray[Any]) -> NDArray[Any]:
        """Sum a per-class quantity over each node's classes."""
        return np.bincount(self.node_of, weights=values, minlength=len(self.levels))


def _sum_rows(matrix: NDArray[Any], groups: NDArray[Any], n_groups: int) -> NDArray[Any]:
    """Sum the rows of ``matrix`` by group.

    As the product of a sparse matrix (a 1 in each row's column, at its group's row) with
    ``matrix``, in scipy's compiled loop: for each row in order, its group's row += it. Each
    cell of the result is then the sum of the same numbers in the same order as one bincount
    over all cells (the fallback) adds them, so the figures are the same to the last bit, in a
    third of the time (Adult, δ-disclosure at k=5, 2 %: 776 roll-ups of 6.8 million cells,
    22 ms against 7.5): the bincount needs a key per cell, the loop none."""
    width = matrix.shape[1]
    matvecs = _csc_matvecs()
    if matvecs is not None and matrix.dtype == np.float64 and len(groups) == len(matrix):
        rows = len(groups)
        out = np.zeros((n_groups, width))
        if rows and width:
            groups = np.ascontiguousarray(groups, dtype=np.int64)
            # the compiled loop writes where the groups say, unchecked: one look at them
            # (a negative group, read unsigned, is past every bound too)
            if int(groups.view(np.uint64).max()) >= n_groups:
                raise ValueError("a group number lies outside 0 .. n_groups - 1")
            ptr, ones = _unit_columns(rows)
            matvecs(n_groups, rows, width, ptr, groups, ones, np.ascontiguousarray(matrix), out)
        return out
    cells = (groups[:, None] * width + np.arange(width)).ravel()
    return np.bincount(cells, weights=matrix.ravel(), minlength=n_groups * width).reshape(
        n_groups, width
    )


_MATVECS: list[Any] = []  # scipy's sparse (columns) x dense product, found once (None: none)


def _csc_matvecs() -> Any:
    """scipy's compiled loop of a sparse-by-dense product (``Y[i] += a * X[j]`` for each entry
    a at (i, j), column after column), or None where this scipy does not have it under that
    name (:func:`_sum_rows` then counts with a bincount). A module of scipy's own, present in
    every scipy the project accepts, read once: its public sparse matrices cost more to build
    per call than a small roll-up's whole sum."""
    if not _MATVECS:
        from scipy.sparse import _sparsetools

        _MATVECS.append(getattr(_sparsetools, "csc_matvecs", None))
    return _MATVECS[0]


_UNIT: list[tuple[NDArray[Any], NDArray[Any]]] = []


def _unit_columns(rows: int) -> tuple[NDArray[Any], NDArray[Any]]:
    """The column starts (0..rows) and the entries (ones) of a sparse matrix with one entry of
    1 per column: views of the longest pair made so far, which grows when it is too short."""
    if not _UNIT or len(_UNIT[0][1]) < rows:
        size = max(rows, 2 * len(_UNIT[0][1]) if _UNIT else 1024)
        _UNIT[:] = [(np.arange(size + 1, dtype=np.int64), np.ones(size))]
    ptr, ones = _UNIT[0]
    return ptr[: rows + 1], ones[:rows]


def _node_key(
    codes: NDArray[Any], cols: Sequence[int], cards: Sequence[int], space: int
) -> NDArray[Any]:
    """A node's key of every row of ``codes``: a multiply-add over the node's rows of codes,
    in place (no copy of the codes is gathered), in the narrowest type the key space allows
    (a node low in the lattice of Adult has a space of a few thousand keys: two bytes a key
    cost a third of the arithmetic of eight)."""
    key = codes[cols[0]].astype(_key_type(space, codes.shape[1]))
    for c, card in zip(cols[1:], cards[1:]):
        key *= card
        key += codes[c]
    return np.asarray(key)


def _first_index(inv: NDArray[Any], n_classes: int) -> NDArray[Any]:
    # any row of a class represents it: all its rows share the node's codes
    rep = np.empty(n_classes, dtype=np.int64)
    rep[inv] = np.arange(len(inv))
    return rep


_HIGH = np.uint64(0x8080808080808080)


def pack_levels(levels: NDArray[Any]) -> NDArray[Any]:
    """Pack rows of small levels (< 128) into uint64 words, one byte per level.

    With levels packed, "every level of a <= the same level of b" for a whole array of nodes is
    one subtraction per word: in each byte ``(b | 0x80) - a`` keeps its high bit exactly when
    b >= a, and never borrows from the next byte.
    """
    levels = np.atleast_2d(np.asarray(levels))
    n, d = levels.shape
    if sys.byteorder == "little":
        # the levels as bytes, a row padded to whole words, read as words: byte i of a word is
        # its (i + 1)-th lowest, as the shifts below place it (one copy, no pass per level)
        as_bytes = np.zeros((n, 8 * ((d + 7) // 8)), dtype=np.uint8)
        as_bytes[:, :d] = levels
        return as_bytes.view(np.uint64)
    levels = levels.astype(np.uint64)
    words = np.zeros((n, (d + 7) // 8), dtype=np.uint64)
    for i in range(d):
        words[:, i // 8] |= levels[:, i] << np.uint64(8 * (i % 8))
    return words


def packed_leq(a: NDArray[Any], b: NDArray[Any]) -> NDArray[Any]:
    """Row-wise: all levels of ``a`` <= those of ``b`` (one side may be a single packed row;
    rows of the two sides broadcast against each other, packed words being the last axis)."""
    if a.shape[-1] == 1 and b.shape[-1] == 1:
        # up to 8 QIs: one word per node, compared without a reduction over words (half
        # the time on a lattice of a few thousand nodes, and this runs for every node checked)
        a1, b1 = a[..., 0], b[..., 0]
        return np.asarray(((b1 | _HIGH) - a1) & _HIGH == _HIGH)
    return np.asarray((((b | _HIGH) - a) & _HIGH == _HIGH).all(axis=-1))


class ClassTableCache:
    """Class tables of checked nodes, to roll coarser nodes up from.

    Bounded by slots and by total classes kept; when full, the table with the most classes goes
    first, since small tables are the cheap ones to roll up from.
    """

    def __init__(self, d: int, capacity: int = 2048, max_total: int = 1_000_000) -> None:
        self.packed = np.zeros((capacity, (d + 7) // 8), dtype=np.uint64)
        self.sizes = np.full(capacity, _BIG, dtype=np.int64)
        self.used = np.zeros(capacity, dtype=bool)
        self.tables: list[ClassTable | None] = [None] * capacity
        self.max_total = max_total
        self.total = 0
        self.count = 0  # slots in use
        self.high = 0  # slots beyond this were never used

    def add(self, packed_node: NDArray[Any], ct: ClassTable) -> None:
        n = len(ct)
        if n > self.max_total // 8:
            return  # rolling up from a table this large saves little and costs memory
        while self.count == len(self.used) or self.total + n > self.max_total:
            worst = int(np.argmax(np.where(self.used, self.sizes, -1)))
            if self.sizes[worst] <= n:
                return
            self._drop(worst)
        # slots are taken in order until one is dropped: no scan for the first free one
        slot = self.high if self.high < len(self.used) else int(np.argmin(self.used))
        # the cache is bounded by classes: what it keeps must not grow with the distinct rows
        ct = ct.for_rolling_up()
        self.packed[slot], self.sizes[slot], self.tables[slot] = packed_node, n, ct
        self.used[slot] = True
        self.count += 1
        self.total += n
        self.high = max(self.high, slot + 1)

    def _drop(self, slot: int) -> None:
        self.total -= int(self.sizes[slot])
        self.used[slot], self.sizes[slot], self.tables[slot] = False, _BIG, None
        self.count -= 1

    def parent(self, packed_node: NDArray[Any]) -> ClassTable | None:
        """The cached specialization of the node with the fewest classes."""
        return self.parents(packed_node[None])[0]

    def parents(self, packed_nodes: NDArray[Any]) -> list[ClassTable | None]:
        """:meth:`parent` of each of several nodes, in one comparison with the cache."""
        h = self.high
        if h == 0:
            return [None] * len(packed_nodes)
        below = self.used[:h] & packed_leq(self.packed[:h], packed_nodes[:, None])
        best = np.argmin(np.where(below, self.sizes[:h], _BIG), axis=1)
        found = below[np.arange(len(best)), best]
        return [self.tables[int(b)] if f else None for b, f in zip(best.tolist(), found.tolist())]


# key spaces up to this size are numbered by flagging the keys present (a byte each, in
# cache), however few the rows grouped: cheaper than hashing them
_FLAGGED_SPACE = 1 << 16
# up to this many rows, a node's keys and class ids are int64 whatever their range
_WIDE_KEYS = 1 << 16
# up to this many distinct rows, the search keeps their weights as floats too (8 MB at most)
_FLOAT_COPY = 1 << 20


def _key_type(space: int, rows: int) -> Any:
    """The type of a node's keys over ``rows`` rows: two bytes while the space allows (the
    multiply-adds cost a third of int64's, more than the widening where the keys index), four
    while many rows make the memory count, eight otherwise."""
    if space <= 1 << 16:
        return np.uint16
    return np.int32 if space < 2**31 and rows > _WIDE_KEYS else np.int64


# the largest key space renumbered while folding: its flags (a byte per key) stay in cache. A
# space this large lets Adult's columns fold with one renumbering, not two (one pass fewer
# over the records)
LIMIT = 1 << 20
# up to this many records, distinct rows are sorted rather than hashed (:func:`_distinct_rows`)
_HASHED_RECORDS = 1 << 17
# up to this many records, the distinct records are found by folding the columns in their own
# order (the numbers come sorted); beyond it, fewest codes first, and the distinct sorted after
_SMALL_TABLE = 1 << 17


def _distinct_records(
    codes: list[NDArray[Any]],
    cards: list[int],
    to_rows: list[NDArray[Any] | None],
    radices: list[int],
) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any]]:
    """:func:`_distinct_rows` of the columns ``to_rows[j][codes[j]]`` (codes as they are where
    ``to_rows[j]`` is None), without building those columns. Each ``to_rows[j]`` must be
    ascending, each row once (as :func:`hierarchy_rows` numbers them): the records' order by
    codes is then their order by rows.

    The codes (from 0, below ``cards``) are folded into one mixed-radix key column by column,
    without hashing a key per record. A small table's columns are folded in their own order
    (:func:`_fold_in_order`): the numbers found come in the order of the rows, as
    :func:`_distinct_rows` sorts them, with nothing hashed or sorted. A large table's are
    folded fewest codes first (:func:`_fold_records`), which renumbers the key less often
    (each time a pass over the records), and its few distinct records are sorted after.
    """
    n = len(codes[0])
    if n <= _SMALL_TABLE:
        inverse, m = _fold_in_order(codes, cards)
        first = _first_index(inverse, m)  # a record of each: a few thousand scattered
        base = np.empty((m, len(codes)), dtype=code_dtype(max(radices)), order="F")
        for j, (col, to_row) in enumerate(zip(codes, to_rows)):
            if to_row is None:
                np.take(col, first, out=base[:, j])
            else:
                np.take(to_row, col.take(first), out=base[:, j])
        return base, inverse, np.bincount(inverse, minlength=m)
    key, space, occupied, counts, found = _fold_records(codes, cards)
    cols = [
        col.astype(np.int64) if to_row is None else to_row.take(col)
        for col, to_row in zip(found, to_rows)
    ]
    base, tmp_to_base, _ = _distinct_rows(cols, radices)
    weights = np.empty(len(counts), dtype=np.int64)
    weights[tmp_to_base] = counts
    # the distinct row of each key present, read once per record
    ids = np.empty(space, dtype=np.int64)
    ids[occupied] = tmp_to_base
    return base, ids.take(key), weights


def _fold_in_order(codes: list[NDArray[Any]], cards: list[int]) -> tuple[NDArray[Any], int]:
    """The number of each record's combination of codes, in the order of their mixed-radix
    keys (the first column most significant), and how many there are. The key is renumbered
    in key order (:func:`_ranks`) whenever its space would pass a few times the records, so
    the numbers keep the keys' order to the end."""
    n = len(codes[0])
    limit = max(1 << 12, 4 * n)
    # int64 keys: a small table's fit in cache, and a scatter indexes with int64 as it is
    key = codes[0].astype(np.int64)
    space = max(cards[0], 1)
    for col, card in zip(codes[1:], cards[1:]):
        card = max(card, 1)
        if space * card > limit:
            key, space = _ranks(key, space)
        key *= card
        key += col
        space *= card
    return _ranks(key, space)


def _ranks(key: NDArray[Any], space: int) -> tuple[NDArray[Any], int]:
    """Keys in ``[0, space)`` renumbered from 0 in key order (int64), and how many differ."""
    if space > 16 * len(key):  # too large a space to flag: hashed, the few present sorted
        ids, present = pd.factorize(key, sort=True)
        return ids.astype(np.int64, copy=False), len(present)
    # a flag per key present, and its rank from a running sum: no branch per key, as the
    # flagged keys' positions would take. The sum in int32 (a space of at most 16 keys per
    # record, a small table's): NumPy sums flags into int64 through a slow cast, ten times
    # the time, and widening the records' ranks after costs less
    flags = np.zeros(space, dtype=bool)
    flags[key] = True
    rank = np.cumsum(flags, dtype=np.int32)
    rank -= 1
    return rank.take(key).astype(np.int64), int(rank[-1]) + 1


def _fold_records(
    codes: list[NDArray[Any]], cards: list[int]
) -> tuple[NDArray[Any], int, NDArray[Any], NDArray[Any], list[NDArray[Any]]]:
    """The records keyed by their codes: the key of each record, the key space, the keys
    present, the count of each and its codes (one array per column). The codes are folded
    into one mixed-radix key column by column, renumbered by a count over the key space
    whenever that space would outgrow a table that stays in cache.

    Columns of few codes are folded first: the space then grows slowly, and fewer passes over
    the records renumber it. The codes of each number are read off the keys (a quotient and
    a remainder per column folded since the last renumbering), not from a record of it: no
    pass over the records finds one."""
    order = sorted(range(len(codes)), key=lambda j: cards[j])
    first = order[0]
    space = max(cards[first], 1)
    # keys in the narrowest type the space allows (two bytes while the first few columns are
    # folded): the folding reads and writes a fraction of int64's memory
    key: NDArray[Any] = codes[first].astype(_wide_enough(codes[first].dtype, space))
    # the codes of each number of the space last renumbered (before it: each code itself),
    # and the columns folded in since, with their cards
    known: dict[int, NDArray[Any]] = {first: np.arange(space, dtype=np.int64)}
    since: list[tuple[int, int]] = []
    for j in order[1:]:
        card = max(cards[j], 1)
        if space * card > LIMIT:
            key, occupied = _densify(key, space)
            known = _decode(occupied, known, since)
            space, since = len(occupied), []
        wide = _wide_enough(np.promote_types(key.dtype, codes[j].dtype), space * card)
        if wide != key.dtype:
            key = key.astype(wide)
        key *= card
        key += codes[j]
        space *= card
        since.append((j, card))
    if space > max(LIMIT, 8 * len(key)):  # too large a space to count over: renumbered
        key, occupied = _densify(key, space)
        known = _decode(occupied, known, since)
        space, since = len(occupied), []
    counts = np.bincount(key, minlength=space)
    occupied = np.flatnonzero(counts)
    known = _decode(occupied, known, since)
    return key, space, occupied, counts[occupied], [known[j] for j in range(len(codes))]


def _decode(
    occupied: NDArray[Any], known: dict[int, NDArray[Any]], since: list[tuple[int, int]]
) -> dict[int, NDArray[Any]]:
    """The codes of each occupied key: the columns folded ``since`` the last renumbering are
    its remainders, last first; the quotient left is the earlier number, whose codes are
    ``known``."""
    rest = occupied.astype(np.int64)
    out: dict[int, NDArray[Any]] = {}
    for j, card in reversed(since):
        rest, out[j] = np.divmod(rest, card)
    for j, was in known.items():
        out[j] = was.take(rest)
    return out


def _wide_enough(dtype: Any, space: int) -> np.dtype[Any]:
    """``dtype``, or the narrowest type wider than it that holds keys below ``space``."""
    return np.promote_types(dtype, code_dtype(space))


def _densify(key: NDArray[Any], space: int) -> tuple[NDArray[Any], NDArray[Any]]:
    """Keys in ``[0, space)`` renumbered from 0 in key order (in the narrowest type that
    holds the numbers), and the keys present."""
    if space > max(LIMIT, 8 * len(key)):  # too large a space to flag: hashed, then sorted
        ids, occupied = pd.factorize(key, sort=True)
        return ids.astype(code_dtype(len(occupied)), copy=False), occupied
    # a flag per key written where a record has it: a byte per key, not bincount's eight, and
    # no count read and added (a million keys over Adult's 642,880: 2.8 -> 1.7 ms)
    present = np.zeros(space, dtype=bool)
    present[key] = True
    occupied = np.flatnonzero(present)
    del present
    ids = np.empty(space, dtype=code_dtype(len(occupied)))
    ids[occupied] = np.arange(len(occupied))
    return ids.take(key), occupied


def _distinct_rows(
    cols: list[NDArray[Any]], radices: list[int]
) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any]]:
    space = 1
    for r in radices:
        space *= max(r, 1)
    if space < (1 << 62):
        key = np.zeros(len(cols[0]), dtype=np.int64)
        for col, r in zip(cols, radices):
            key *= max(r, 1)
            key += col
        if len(key) and bool((key[1:] >= key[:-1]).all()):
            # rows already in key order (the distinct rows of a sorted encoding, grouped on
            # their first columns): runs, numbered as a sort numbers them, without hashing
            new = np.empty(len(key), dtype=bool)
            new[0] = True
            np.not_equal(key[1:], key[:-1], out=new[1:])
            del key
            first = np.flatnonzero(new)
            inverse = np.cumsum(new, dtype=np.int64) - 1
            del new
            counts = np.diff(np.append(first, len(inverse)))
        elif 0 < len(key) <= _HASHED_RECORDS:
            # few rows (a small table's distinct records): sorting them costs a third of
            # hashing them and then sorting the distinct keys; the same numbering, in key order
            order = np.argsort(key)
            sorted_key = key.take(order)
            del key
            new = np.empty(len(order), dtype=bool)
            new[0] = True
            np.not_equal(sorted_key[1:], sorted_key[:-1], out=new[1:])
            del sorted_key
            inverse = np.empty(len(order), dtype=np.int64)
            inverse[order] = np.cumsum(new, dtype=np.int64) - 1
            first = order[new]  # a row of each distinct key, in key order
            counts = np.diff(np.append(np.flatnonzero(new), len(order)))
            del order, new
        else:
            # hashing, then sorting the few distinct keys: np.unique's order, without sorting
            # every row
            inverse, uniq = pd.factorize(key, sort=True)
            inverse = inverse.astype(np.int64, copy=False)
            counts = np.bincount(inverse, minlength=len(uniq))
            # each distinct row's values read from one of its rows (cheaper than dividing the
            # keys)
            first = _first_index(inverse, len(uniq))
            del key, uniq
        # every code is below its radix: the smallest type holding the largest radix
        base = np.empty((len(first), len(cols)), dtype=code_dtype(max(radices)), order="F")
        for j, col in enumerate(cols):
            base[:, j] = col.take(first)
        return base, inverse, counts
    matrix = np.column_stack(cols)
    base, inverse, counts = np.unique(matrix, axis=0, return_inverse=True, return_counts=True)
    return base, inverse.ravel(), counts
