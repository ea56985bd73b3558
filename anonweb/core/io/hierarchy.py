"""Generalization hierarchies in ARX's CSV format.

A hierarchy file has no header; each line is ``value;level1;...;*``: column 0 is the original
value, column *i* its generalization at level *i*, the last column the root.

A data value is looked up by value, not by its text alone (:meth:`Hierarchy.rows_of`): first as
written (``str(value)``), then, for a number, as the number the hierarchy's line denotes, so that
39, 39.0 (an integer column with a blank, read as float64) and ``np.int64(39)`` all find the line
``39;...``. A date at midnight also finds its ISO date. Text never matches a number: the code
``02138`` stays distinct from 2138.
Builders for intervals, masking, dates and groupings live in
:mod:`anonweb.core.io.hierarchy_builders`.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import math
import numbers
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.errors import HierarchyError


@dataclass(frozen=True)
class Hierarchy:
    """A value generalization hierarchy: ``rows[i][j]`` is value *i* at level *j*.

    Level 0 is the original value. All rows have the same number of levels (``height``).
    """

    rows: tuple[tuple[str, ...], ...]
    attribute: str | None = None
    _index: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)
    _numbers: dict[float, int] | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        rows = tuple(tuple(str(v) for v in row) for row in self.rows)
        object.__setattr__(self, "rows", rows)
        name = f" for {self.attribute!r}" if self.attribute else ""
        if not rows:
            raise HierarchyError(f"the hierarchy{name} is empty")
        widths = {len(r) for r in rows}
        if len(widths) != 1:
            bad = next(i for i, r in enumerate(rows) if len(r) != len(rows[0]))
            raise HierarchyError(
                f"the hierarchy{name} has rows of different lengths: line 1 has "
                f"{len(rows[0])} levels, line {bad + 1} ({rows[bad][0]!r}) has {len(rows[bad])}"
            )
        index: dict[str, int] = {}
        for i, row in enumerate(rows):
            if row[0] in index:
                raise HierarchyError(f"the hierarchy{name} lists {row[0]!r} twice")
            index[row[0]] = i
        # Consistency: a value at level j must always generalize to the same value at j+1,
        # otherwise the levels do not form a tree and generalizing could split a class.
        for level in range(1, len(rows[0]) - 1):
            parent: dict[str, str] = {}
            for row in rows:
                seen = parent.setdefault(row[level], row[level + 1])
                if seen != row[level + 1]:
                    raise HierarchyError(
                        f"the hierarchy{name} is inconsistent: {row[level]!r} at level {level} "
                        f"generalizes to both {seen!r} and {row[level + 1]!r}"
                    )
        object.__setattr__(self, "_index", index)

    @property
    def height(self) -> int:
        """Number of levels including level 0 (ARX's "height")."""
        return len(self.rows[0])

    @property
    def values(self) -> tuple[str, ...]:
        return tuple(row[0] for row in self.rows)

    def mapping(self, level: int) -> dict[str, str]:
        """Original value -> generalized value at ``level``."""
        self._check_level(level)
        return {row[0]: row[level] for row in self.rows}

    def row_of(self, value: object) -> int:
        """The hierarchy row listing ``value``: :data:`MISSING` for a missing value,
        :data:`UNCOVERED` when no line matches (see the module docstring for the matching)."""
        kind = type(value)
        if kind is str:  # text is found as written, or not at all
            return self._index.get(cast(str, value), UNCOVERED)
        if kind is not int and _is_missing(value):  # (a Python int is never missing)
            return MISSING
        found = self._index.get(str(value))
        if found is not None:
            return found
        if isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_):
            number = float(value)
            if math.isfinite(number):
                return self._number_index().get(number, UNCOVERED)
            return UNCOVERED
        if isinstance(value, dt.date):
            stamp = pd.Timestamp(value)
            if stamp == stamp.normalize():
                return self._index.get(stamp.date().isoformat(), UNCOVERED)
        return UNCOVERED

    def rows_of(self, values: Iterable[object]) -> NDArray[Any]:
        """:meth:`row_of` for each value (an int64 array)."""
        if isinstance(values, pd.Index | pd.Series | np.ndarray):
            values = values.tolist()  # Python scalars: str(np.float64(39.0)) is '39.0' too
        index, row_of = self._index, self.row_of
        # text (the usual cell) looked up here, without a call per value
        found = [index.get(v, UNCOVERED) if type(v) is str else row_of(v) for v in values]
        return np.array(found, dtype=np.int64)

    def _number_index(self) -> dict[float, int]:
        # Lines whose value reads as one number; a number two lines share ('1', '1.0') is left
        # out, and so is text with a leading zero (a code such as '02138', not a quantity).
        if self._numbers is None:
            found: dict[float, int] = {}
            shared: set[float] = set()
            for i, row in enumerate(self.rows):
                text = row[0].strip()
                if not _NUMBER.fullmatch(text) or _LEADING_ZERO.match(text):
                    continue
                number = float(text)
                if number in found:
                    shared.add(number)
                found[number] = i
            object.__setattr__(
                self, "_numbers", {k: v for k, v in found.items() if k not in shared}
            )
        assert self._numbers is not None
        return self._numbers

    def uncovered(self, values: Iterable[object]) -> list[str]:
        """The distinct values (as text) that the hierarchy does not list, sorted."""
        return sorted({str(v) for v in pd.unique(_as_array(values)) if self.row_of(v) == UNCOVERED})

    def validate_covers(self, series: pd.Series | Iterable[object]) -> None:
        """Raise :class:`HierarchyError` naming every value the hierarchy does not list.

        A value that is not text is shown as written and said to be a number (or a date), since
        a column read as numbers is the usual cause (``39.0`` against ``39``).
        """
        distinct = pd.unique(_as_array(series))
        missing = [v for v in distinct if self.row_of(v) == UNCOVERED]
        if not missing:
            return
        missing.sort(key=str)
        name = self.attribute or getattr(series, "name", None) or "the column"
        shown = ", ".join(_plainly(v) for v in missing[:20])
        more = f" and {len(missing) - 20} more" if len(missing) > 20 else ""
        sample = ", ".join(repr(r[0]) for r in self.rows[:3])
        raise HierarchyError(
            f"the hierarchy for {name!r} does not cover {len(missing)} value(s): {shown}{more} "
            f"(its values look like {sample})"
        )

    def generalize(self, series: pd.Series, level: int) -> pd.Series:
        """Generalize a column to ``level``; missing values stay missing below the root and
        become the root at the top level (the root stands for any value, "not recorded" too).

        Level 0 returns the column unchanged. Raises :class:`HierarchyError` if a value is not
        covered.
        """
        self._check_level(level)
        self.validate_covers(series)
        if level == 0:
            return series.copy()
        codes, uniques = pd.factorize(series, use_na_sentinel=True)
        rows = self.rows_of(uniques)
        absent = self.rows[0][-1] if level == self.height - 1 else None
        labels = np.array([self.rows[r][level] for r in rows] + [absent], dtype=object)
        return pd.Series(labels[codes], index=series.index, name=series.name, dtype=object)

    def to_rows(self) -> list[list[str]]:
        return [list(r) for r in self.rows]

    def to_csv(self, sep: str = ";") -> str:
        buf = io.StringIO()
        writer = csv.writer(buf, delimiter=sep, lineterminator="\n")
        writer.writerows(self.rows)
        return buf.getvalue()

    def _check_level(self, level: int) -> None:
        if not 0 <= level < self.height:
            raise HierarchyError(
                f"level {level} is out of range for the hierarchy"
                f"{' of ' + repr(self.attribute) if self.attribute else ''} (0..{self.height - 1})"
            )


MISSING = -2  # row_of() of a missing value
UNCOVERED = -1  # row_of() of a value no line lists
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_LEADING_ZERO = re.compile(r"^[+-]?0\d")


def _is_missing(value: object) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _as_array(values: Iterable[object]) -> NDArray[Any] | pd.Series | pd.Index:
    if isinstance(values, pd.Series | pd.Index | np.ndarray):
        return values
    return np.array(list(values), dtype=object)


def _plainly(value: object) -> str:
    """A value as a privacy officer reads it: text quoted, a number or a date as written
    (``39.0 (a number)``: a column read as numbers against a hierarchy of ``39`` is the usual
    cause), never a Python or NumPy representation."""
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, bool):
        return f"{value} (true or false)"
    if isinstance(value, numbers.Real):
        return f"{value} (a number)"
    if isinstance(value, dt.datetime | dt.date | pd.Timestamp):
        stamp = pd.Timestamp(value)
        text = stamp.date().isoformat() if stamp == stamp.normalize() else stamp.isoformat()
        return f"{text} (a date)"
    return repr(str(value))


def parse_hierarchy(text: str, *, sep: str = ";", attribute: str | None = None) -> Hierarchy:
    """Parse ARX's hierarchy CSV text (no header, ``value;level1;...;*``)."""
    if not text.strip():
        raise HierarchyError(
            f"the hierarchy{' for ' + repr(attribute) if attribute else ''} is empty"
        )
    reader = csv.reader(io.StringIO(text.replace("\r\n", "\n").replace("\r", "\n")), delimiter=sep)
    rows: list[Sequence[str]] = [row for row in reader if any(cell.strip() for cell in row)]
    if all(len(r) == 1 for r in rows):
        raise HierarchyError(
            f"the hierarchy{' for ' + repr(attribute) if attribute else ''} has a single column: "
            f"expected 'value{sep}level1{sep}...{sep}*' lines separated by {sep!r}"
        )
    return Hierarchy(rows=tuple(tuple(c.strip() for c in r) for r in rows), attribute=attribute)


def read_hierarchy(
    path: str | Path, *, sep: str | None = None, attribute: str | None = None
) -> Hierarchy:
    """Read a hierarchy file; ``sep`` defaults to ``;`` (ARX) or ``,`` if no ``;`` appears."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise HierarchyError(f"cannot read hierarchy file {str(path)!r}: {exc.strerror}") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    if sep is None:
        sep = ";" if ";" in text else ("\t" if "\t" in text else ",")
    return parse_hierarchy(text, sep=sep, attribute=attribute)
