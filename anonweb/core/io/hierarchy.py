"""Generalization hierarchies in ARX's CSV format.

A hierarchy file has no header; each line is ``value;level1;...;*``: column 0 is the original
value, column *i* its generalization at level *i*, the last column the root. Values are compared
as strings (``str(value)`` of the data column, so the integer 39 matches the line ``39;...``).
Builders for intervals, masking, dates and groupings live in :mod:`anonweb.core.io.hierarchy_builders`.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from anonweb.core.errors import HierarchyError


@dataclass(frozen=True)
class Hierarchy:
    """A value generalization hierarchy: ``rows[i][j]`` is value *i* at level *j*.

    Level 0 is the original value. All rows have the same number of levels (``height``).
    """

    rows: tuple[tuple[str, ...], ...]
    attribute: str | None = None
    _index: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)

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

    def uncovered(self, values: Iterable[object]) -> list[str]:
        """The distinct values (as strings) that the hierarchy does not list, sorted."""
        missing = {str(v) for v in values if not _is_missing(v)} - set(self._index)
        return sorted(missing)

    def validate_covers(self, series: pd.Series) -> None:
        """Raise :class:`HierarchyError` listing every value of ``series`` not in the hierarchy."""
        missing = self.uncovered(pd.unique(series))
        if missing:
            name = self.attribute or series.name
            shown = ", ".join(repr(v) for v in missing[:20])
            more = f" and {len(missing) - 20} more" if len(missing) > 20 else ""
            raise HierarchyError(
                f"the hierarchy for {name!r} does not cover {len(missing)} value(s): {shown}{more}"
            )

    def generalize(self, series: pd.Series, level: int) -> pd.Series:
        """Generalize a column to ``level``; missing values stay missing.

        Raises :class:`HierarchyError` if a value is not covered.
        """
        self._check_level(level)
        self.validate_covers(series)
        if level == 0:
            return series.copy()
        mapping = self.mapping(level)
        return series.map(lambda v: v if _is_missing(v) else mapping[str(v)])

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


def _is_missing(value: object) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


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
