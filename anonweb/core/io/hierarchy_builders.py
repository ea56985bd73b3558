"""Builders for generalization hierarchies, and resolving the hierarchy specs of a plan.

Every builder returns a :class:`~anonweb.core.io.hierarchy.Hierarchy` whose level 0 lists the
column's distinct values exactly as ``str(value)`` (so it covers the column by construction) and
whose last level is the root ``*``:

* :func:`interval_hierarchy` — numbers into intervals ``[lo, hi[`` of a fixed width or between
  custom breaks, with bottom and top coding (``<18``, ``>=90``), wider at each level by ``fanout``;
* :func:`grouping_hierarchy` — ordered values into consecutive groups (``a-c``), ``fanout`` groups
  per group above;
* :func:`mask_hierarchy` — characters masked from the right, one per level (ZIP codes);
* :func:`date_hierarchy` — day -> month -> year -> decade.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from anonweb.core import schema as sch
from anonweb.core.errors import HierarchyError, ParameterError
from anonweb.core.io.hierarchy import Hierarchy, read_hierarchy

ROOT = "*"

# What one builder may create, checked from its parameters and the column's range before a
# single label is made: a width of 1e-9 over ages would otherwise ask for 10^11 intervals.
MAX_INTERVALS = 1_000_000
# Levels between a value and the root (a masked value has one per character).
MAX_LEVELS = 64


def _distinct(values: Sequence[Any] | pd.Series) -> list[Any]:
    s = pd.Series(values)
    return list(pd.unique(s[s.notna()]))


def _number(value: Any, attribute: str | None) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        name = f" in {attribute!r}" if attribute else ""
        raise HierarchyError(f"interval hierarchy: {value!r}{name} is not a number") from None


def _fmt(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


def interval_hierarchy(
    values: Sequence[Any] | pd.Series,
    *,
    width: float | None = None,
    breaks: Sequence[float] | None = None,
    start: float | None = None,
    bottom: float | None = None,
    top: float | None = None,
    fanout: int = 2,
    levels: int | None = None,
    attribute: str | None = None,
) -> Hierarchy:
    """Intervals of ``width`` (anchored at ``start`` or below the minimum) or between ``breaks``.

    Values below ``bottom`` become ``<bottom`` and values from ``top`` up ``>=top`` at every
    interval level; so do values outside the ``breaks`` (``<first``, ``>=last``) or below
    ``start``, which no interval contains. Each higher level merges ``fanout`` neighbouring intervals; ``levels`` caps
    the number of interval levels (default: until one interval is left).
    """
    if (width is None) == (breaks is None):
        raise ParameterError("an interval hierarchy needs either a width or a list of breaks")
    if width is not None and width <= 0:
        raise ParameterError(f"the interval width must be positive, got {width}")
    if fanout < 2:
        raise ParameterError(f"fanout must be at least 2, got {fanout}")
    distinct = _distinct(values)
    nums = np.array([_number(v, attribute) for v in distinct], dtype=float)
    if len(nums) == 0:
        raise HierarchyError("interval hierarchy: the column has no values")
    lo_all = bottom if bottom is not None else float(nums.min())
    hi_all = top if top is not None else float(nums.max())
    if breaks is not None:
        cuts = sorted(float(b) for b in breaks)
    else:
        assert width is not None  # exactly one of width and breaks, checked above
        if not (math.isfinite(lo_all) and math.isfinite(hi_all)):
            raise HierarchyError(
                f"interval hierarchy{_of(attribute)}: the column holds an infinite number; "
                "set bottom and top, or use breaks"
            )
        first = start if start is not None else math.floor(lo_all / width) * width
        span = (hi_all - first) / width
        if not span < MAX_INTERVALS:
            anchor = start if start is not None else lo_all
            raise ParameterError(
                f"interval hierarchy{_of(attribute)}: a width of {width:g} makes {span + 1:,.0f} "
                f"intervals between {_fmt(first)} and {_fmt(hi_all)}; at most "
                f"{MAX_INTERVALS:,} are allowed, so choose a width of at least "
                f"{_round_up((hi_all - anchor) / (MAX_INTERVALS - 2)):.3g}"
            )
        count = max(1, math.floor(span) + 1)
        cuts = [first + i * width for i in range(count + 1)]
    cuts = [c for c in cuts if (bottom is None or c >= bottom) and (top is None or c <= top)]
    if bottom is not None and (not cuts or cuts[0] > bottom):
        cuts.insert(0, bottom)
    if top is not None and cuts[-1] < top:
        cuts.append(top)
    if len(cuts) < 2:
        raise ParameterError("the breaks must define at least one interval")
    rows = [
        [_fmt_value(v)] + _interval_path(x, cuts, fanout, levels) + [ROOT]
        for v, x in zip(distinct, nums)
    ]
    return Hierarchy(rows=tuple(tuple(r) for r in rows), attribute=attribute)


def _round_up(x: float) -> float:
    """``x`` rounded up to three significant digits."""
    step = 10.0 ** (math.floor(math.log10(x)) - 2)
    return math.ceil(x / step) * step


def _of(attribute: str | None) -> str:
    return f" for {attribute!r}" if attribute else ""


def _fmt_value(v: Any) -> str:
    return str(v)


def _interval_path(
    x: float,
    cuts: list[float],
    fanout: int,
    levels: int | None,
) -> list[str]:
    n_int = len(cuts) - 1
    n_levels = max(1, math.ceil(math.log(n_int, fanout)) if n_int > 1 else 1)
    if levels is not None:
        n_levels = min(n_levels, levels)
    # A value outside the cuts (below the first break, from the last one up, or below a width's
    # ``start``) lies in none of the intervals: labelling it as the nearest one would publish
    # age 99 as "[45, 65[". It is coded open-ended instead, as bottom and top coding are, and
    # keeps that label at every level, so each label maps to one label above it.
    if x < cuts[0]:
        return [f"<{_fmt(cuts[0])}"] * n_levels
    if x >= cuts[-1]:
        return [f">={_fmt(cuts[-1])}"] * n_levels
    i = int(np.searchsorted(cuts, x, side="right") - 1)
    path: list[str] = []
    for level in range(n_levels):
        span = fanout**level
        a = (i // span) * span
        b = min(a + span, n_int)
        path.append(f"[{_fmt(cuts[a])}, {_fmt(cuts[b])}[")
    return path


def grouping_hierarchy(
    values: Sequence[Any] | pd.Series,
    *,
    group_size: int,
    order: Sequence[Any] | None = None,
    fanout: int = 2,
    attribute: str | None = None,
) -> Hierarchy:
    """Ordered values in consecutive groups of ``group_size``, labelled ``first-last``."""
    if group_size < 1 or fanout < 2:
        raise ParameterError("group_size must be >= 1 and fanout >= 2")
    distinct = [str(v) for v in _distinct(values)]
    if order is not None:
        order = [str(v) for v in order]
        missing = sorted(set(distinct) - set(order))
        if missing:
            raise HierarchyError(
                f"the order for {attribute or 'the column'!r} misses: {', '.join(missing)}"
            )
        ordered = [v for v in order if v in set(distinct)]
    else:
        ordered = sorted(distinct, key=_natural_key)
    rows: list[list[str]] = [[v] for v in ordered]
    span = group_size
    while span < len(ordered):
        for i, row in enumerate(rows):
            a = (i // span) * span
            b = min(a + span, len(ordered)) - 1
            row.append(ordered[a] if a == b else f"{ordered[a]}-{ordered[b]}")
        span *= fanout
    for row in rows:
        row.append(ROOT)
    return Hierarchy(rows=tuple(tuple(r) for r in rows), attribute=attribute)


def _natural_key(v: str) -> tuple[int, float, str]:
    try:
        return (0, float(v), v)
    except ValueError:
        return (1, 0.0, v)


def mask_hierarchy(
    values: Sequence[Any] | pd.Series, *, char: str = "*", attribute: str | None = None
) -> Hierarchy:
    """Mask one more character from the right per level (``53715`` -> ``5371*`` -> ...)."""
    distinct = [str(v) for v in _distinct(values)]
    length = max((len(v) for v in distinct), default=1)
    if length > MAX_LEVELS:
        raise ParameterError(
            f"mask hierarchy{_of(attribute)}: the longest value has {length:,} characters and "
            f"masking makes one level per character; at most {MAX_LEVELS} levels are allowed "
            "(use groups or an uploaded hierarchy for long text)"
        )
    rows = []
    for v in distinct:
        padded = v.rjust(length)
        row = [v] + [(padded[: length - j] + char * j).strip() for j in range(1, length)]
        rows.append(row + [ROOT])
    return Hierarchy(rows=tuple(tuple(r) for r in rows), attribute=attribute)


DATE_LEVELS = ("month", "year", "decade")


def date_hierarchy(
    values: Sequence[Any] | pd.Series,
    *,
    levels: Sequence[str] = DATE_LEVELS,
    fmt: str | None = None,
    attribute: str | None = None,
) -> Hierarchy:
    """Dates generalized to month (``2021-03``), year (``2021``), decade (``2020s``), then ``*``."""
    unknown = [lv for lv in levels if lv not in ("week", *DATE_LEVELS)]
    if unknown:
        raise ParameterError(f"unknown date level(s): {', '.join(unknown)} (month, year, decade)")
    distinct = _distinct(values)
    parsed = pd.to_datetime(pd.Series([str(v) for v in distinct]), format=fmt, errors="coerce")
    # a column of timestamps is dates already: each read as it is, not through one format
    # inferred from the first text (timestamps with and without a fraction of the second)
    parsed = pd.Series(
        [
            pd.Timestamp(v) if isinstance(v, dt.date) and fmt is None else p
            for v, p in zip(distinct, parsed, strict=True)
        ],
        dtype=object,
    )
    bad = [str(v) for v, p in zip(distinct, parsed) if pd.isna(p)]
    if bad:
        raise HierarchyError(f"date hierarchy: not dates: {', '.join(repr(v) for v in bad[:10])}")
    label = {
        "week": lambda d: f"{d.isocalendar().year}-W{d.isocalendar().week:02d}",
        "month": lambda d: f"{d.year:04d}-{d.month:02d}",
        "year": lambda d: f"{d.year:04d}",
        "decade": lambda d: f"{d.year // 10 * 10}s",
    }
    rows = [[str(v)] + [label[lv](d) for lv in levels] + [ROOT] for v, d in zip(distinct, parsed)]
    return Hierarchy(rows=tuple(tuple(r) for r in rows), attribute=attribute)


# Each builder takes the column, then its own keyword parameters (BUILDER_SCHEMAS).
BUILDERS: dict[str, Callable[..., Hierarchy]] = {
    "interval": interval_hierarchy,
    "grouping": grouping_hierarchy,
    "mask": mask_hierarchy,
    "date": date_hierarchy,
}

_BOUND = 1e15  # interval cuts beyond this lose integer precision as floats
_LEVELS = MAX_LEVELS

# The parameters each builder accepts, checked when a plan is submitted.
BUILDER_SCHEMAS: dict[str, sch.Schema] = {
    "interval": sch.obj(
        {
            "width": sch.number(
                "Width of the smallest intervals", exclusive_minimum=0, maximum=_BOUND
            ),
            "breaks": sch.array(
                sch.number(minimum=-_BOUND, maximum=_BOUND),
                "Custom interval boundaries instead of a width",
                min_items=2,
                max_items=10_000,
                unique=True,
            ),
            "start": sch.number(
                "Where the first interval starts (default: below the smallest value)",
                minimum=-_BOUND,
                maximum=_BOUND,
            ),
            "bottom": sch.number(
                "Values below this become '<bottom' (bottom coding)",
                minimum=-_BOUND,
                maximum=_BOUND,
            ),
            "top": sch.number(
                "Values from this up become '>=top' (top coding)", minimum=-_BOUND, maximum=_BOUND
            ),
            "fanout": sch.integer(
                "Intervals merged into one at each higher level", minimum=2, maximum=1000, default=2
            ),
            "levels": sch.integer(
                "Most interval levels (default: until one interval is left)",
                minimum=1,
                maximum=_LEVELS,
            ),
        },
        exactly_one=[["width"], ["breaks"]],
        labels={
            "width": "Interval width",
            "breaks": "Interval boundaries",
            "start": "First interval starts at",
            "bottom": "Bottom coding below",
            "top": "Top coding from",
            "fanout": "Intervals merged per level",
            "levels": "Most levels",
        },
        title="Intervals",
        description="Numbers into intervals [lo, hi[, wider at each level.",
    ),
    "grouping": sch.obj(
        {
            "group_size": sch.integer(
                "Values per group at the first level", minimum=1, maximum=1_000_000
            ),
            "order": sch.array(
                sch.one_of(sch.string(), sch.number()),
                "The order of the values (default: natural order)",
                min_items=1,
                max_items=1_000_000,
                unique=True,
            ),
            "fanout": sch.integer(
                "Groups merged into one at each higher level", minimum=2, maximum=1000, default=2
            ),
        },
        required=["group_size"],
        labels={
            "group_size": "Values per group",
            "order": "Order of the values",
            "fanout": "Groups merged per level",
        },
        title="Ordered groups",
        description="Ordered values in consecutive groups labelled first-last.",
    ),
    "mask": sch.obj(
        {
            "char": sch.string("The masking character", min_length=1, max_length=1, default="*"),
        },
        labels={
            "char": "Masking character",
        },
        title="Mask from the right",
        description="One more character masked from the right at each level (ZIP codes).",
    ),
    "date": sch.obj(
        {
            "levels": sch.array(
                sch.string(enum=("week", *DATE_LEVELS)),
                "Levels above the day, in order",
                min_items=1,
                max_items=4,
                unique=True,
                default=list(DATE_LEVELS),
            ),
            "fmt": sch.string(
                "strftime format of the dates (default: ISO, YYYY-MM-DD)", max_length=50
            ),
        },
        labels={
            "levels": "Levels above the day",
            "fmt": "Date format",
        },
        title="Dates",
        description="Day, then month, year, decade, then *.",
    ),
}

_ROWS_SCHEMA = sch.obj(
    {
        "rows": sch.array(
            sch.array(
                sch.one_of(sch.string(max_length=None), sch.number()), min_items=2, max_items=100
            ),
            "ARX hierarchy lines: value, level 1, ..., '*'",
            min_items=1,
        )
    },
    required=["rows"],
)
_PATH_SCHEMA = sch.obj(
    {
        "path": sch.string("A hierarchy file in ARX's format", min_length=1, max_length=4096),
        "sep": sch.string("Field separator of the file", min_length=1, max_length=1),
    },
    required=["path"],
)


_UPLOADED_SCHEMA = sch.obj(
    {
        "uploaded": sch.string(
            "SHA-256 of a hierarchy stored with the dataset (resolved when the plan runs)",
            pattern=r"^[0-9a-f]{64}$",
        ),
        "values": sch.integer("Values the stored hierarchy lists", minimum=0),
        "levels": sch.integer("Levels of the stored hierarchy", minimum=0),
    },
    required=["uploaded"],
)
_UPLOADED_SCHEMA["properties"]["uploaded"]["x-pattern-hint"] = (
    "the SHA-256 of a hierarchy uploaded on the dataset page, as the suggested plan writes it"
)


def hierarchy_spec_errors(column: str, spec: Any, *, files: bool = True) -> list[str]:
    """Every problem of one hierarchy spec of a plan, found without reading data.

    ``files=False`` refuses specs that read a file on the server (plans from the web)."""
    where = f"hierarchy for {column!r}"
    if isinstance(spec, str) or (isinstance(spec, Mapping) and "path" in spec):
        if not files:
            return [
                f"{where}: upload the hierarchy file on the dataset page instead of naming "
                "a path on the server"
            ]
        if isinstance(spec, str):
            return [] if spec else [f"{where}: the file name is empty"]
        return [f"{where}: {e}" for e in sch.check(_PATH_SCHEMA, spec)]
    if not isinstance(spec, Mapping):
        return [f"{where}: expected a file path, rows or a builder"]
    if "uploaded" in spec:
        return [f"{where}: {e}" for e in sch.check(_UPLOADED_SCHEMA, spec)]
    if "rows" in spec:
        errors = [f"{where}: {e}" for e in sch.check(_ROWS_SCHEMA, spec)]
        if not errors:
            try:
                Hierarchy(rows=tuple(tuple(r) for r in spec["rows"]), attribute=column)
            except HierarchyError as exc:
                errors.append(str(exc))
        return errors
    if "builder" in spec:
        name = spec["builder"]
        if name not in BUILDER_SCHEMAS:
            known = ", ".join(BUILDER_SCHEMAS)
            return [f"{where}: unknown builder {name!r} (one of {known})"]
        params = {k: v for k, v in spec.items() if k != "builder"}
        errors = sch.check(BUILDER_SCHEMAS[name], params)
        return [f"{where} ({name} builder): {e}" for e in errors]
    return [f"{where}: expected a file path, rows or a builder"]


def builder_schemas() -> dict[str, sch.Schema]:
    """Each builder's parameters as JSON Schema (``{"builder": name}`` plus these)."""
    return {name: dict(schema) for name, schema in BUILDER_SCHEMAS.items()}


def build_hierarchy(spec: Mapping[str, Any], series: pd.Series) -> Hierarchy:
    """A hierarchy from a builder spec such as ``{"builder": "interval", "width": 10}``."""
    params = dict(spec)
    name = params.pop("builder")
    if name not in BUILDERS:
        raise ParameterError(f"unknown hierarchy builder {name!r} (one of {', '.join(BUILDERS)})")
    errors = sch.check(BUILDER_SCHEMAS[name], params)
    if errors:
        raise ParameterError(f"hierarchy builder {name!r} for {series.name!r}: {errors[0]}")
    try:
        return BUILDERS[name](series, attribute=str(series.name), **params)
    except TypeError as exc:
        raise ParameterError(f"hierarchy builder {name!r} for {series.name!r}: {exc}") from None


def resolve_hierarchies(
    specs: Mapping[str, Any], df: pd.DataFrame | None = None
) -> dict[str, Hierarchy]:
    """Turn a plan's ``hierarchies`` object into :class:`Hierarchy` objects by column.

    A spec is a file path, ``{"path": ..., "sep": ...}``, ``{"rows": [[...], ...]}`` or a
    builder spec (which needs the data, ``df``).
    """
    out: dict[str, Hierarchy] = {}
    for column, spec in specs.items():
        if isinstance(spec, Hierarchy):
            out[column] = spec
        elif isinstance(spec, str):
            out[column] = read_hierarchy(spec, attribute=column)
        elif isinstance(spec, Mapping) and "path" in spec:
            out[column] = read_hierarchy(spec["path"], sep=spec.get("sep"), attribute=column)
        elif isinstance(spec, Mapping) and "rows" in spec:
            out[column] = Hierarchy(rows=tuple(tuple(r) for r in spec["rows"]), attribute=column)
        elif isinstance(spec, Mapping) and "builder" in spec:
            if df is None or column not in df.columns:
                raise HierarchyError(f"hierarchy for {column!r}: the column is not in the table")
            out[column] = build_hierarchy(spec, df[column])
        else:
            raise HierarchyError(f"hierarchy for {column!r}: expected a path, rows or a builder")
    return out


def spec_is_fixed(spec: Any) -> bool:
    """Whether a plan's hierarchy spec maps each value the same way whatever the other rows hold.

    Uploaded tables and files are fixed; so are date levels, and intervals between given
    ``breaks`` or of a ``width`` anchored at ``start``/``bottom`` up to ``top``. Otherwise the
    builder reads the column (its minimum, maximum, distinct values or longest value) and one row
    can change how every other row is generalized.
    """
    if isinstance(spec, (str, Hierarchy)):
        return True
    if not isinstance(spec, Mapping):
        return False
    if "rows" in spec or "path" in spec or "uploaded" in spec:
        return True
    builder = spec.get("builder")
    if builder == "date":
        return True
    if builder == "interval":
        if spec.get("breaks") is not None:
            return True
        anchored = spec.get("start") is not None or spec.get("bottom") is not None
        return spec.get("width") is not None and anchored and spec.get("top") is not None
    return False


def validate_hierarchy(hierarchy: Hierarchy, series: pd.Series) -> None:
    """Raise :class:`HierarchyError` listing the values of ``series`` the hierarchy misses."""
    hierarchy.validate_covers(series)
