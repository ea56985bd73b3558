"""A released column's cells in DuckDB as the in-memory check reads them, for the join out of
core (:mod:`.engine_linkage`) to decide equality exactly as :mod:`.linkage` does.

The in-memory check compares two releases' cells as pandas writes them, ``astype(str)``, each
column in the dtype pandas reads it in (:func:`~.linkage.find_join`: equal texts, or both
missing), and singles records out on the texts of the two columns put together
(:func:`~.linkage._linked`: the dtype both take, so an integer beside floats is written as a
float). That text depends on the dtype, not only on the value, and DuckDB's own text differs
from it where the dtype is not DuckDB's type:

* an integer column with a missing value is read by pandas as floats (``3.0``, ``nan``), and
  two such releases agree on 2⁵³ and 2⁵³ + 1, both the float 2⁵³;
* a missing value is ``nan`` in a float column (a NULL and a NaN alike), ``None`` in a text or
  boolean one, ``<NA>`` in a column pandas reads with a nullable dtype (named in the file's
  pandas metadata): a text ``None`` or ``nan`` in the other release agrees with it;
* booleans are ``True`` and ``False`` (DuckDB writes ``true``);
* a float32 column's text is float32's shortest (``0.1``), but beside float64 it becomes the
  float64 it is (``0.10000000149011612``);
* a column of timestamps is written in one format for the whole column, the shortest that
  holds every value of it: the dates alone when every one is at midnight, else to the second,
  or with 3, 6 or 9 digits of the second as the finest fraction needs (``10:00:00.500`` where
  the finest is half a second); two such columns put together take the format of both. A
  timestamp with a time zone, or one beside a column of another kind, is written as Python
  writes it (``10:00:00.500000``, ``+01:00`` after it); a missing one is ``NaT``;
* a categorical column (a dictionary column of the file) writes its values as Python does
  and a missing value as ``nan``.

Sensitive values are compared as the in-memory check codes them (:func:`~.linkage._released_codes`):
as Python objects once the two columns are put together, missing values one value; so 1, 1.0
and True are one value, 0.0 and -0.0 too, an integer beside floats is the float it becomes, and
the number 1 is not the text "1". :func:`value_sql` writes each value as a text that equal
values share: ``n:`` and the number (an integral one as an integer), ``s:`` and a text, ``o:``
and any other value's text.

DuckDB writes a double as Python does (the shortest text that reads back, ``1e+16``,
``0.30000000000000004``, ``-0.0``, ``inf``), so a float's text is DuckDB's; a timestamp's is
made from its parts (:func:`stamp_sql`), and as a value it is Python's text of it. A table held
in memory is read by the check as it is: its columns of other dtypes (objects, dates, nullable
dtypes) have their texts written by pandas beside them, but for timestamps, which are written
as a file's are (their format depends on the column beside them). Columns of other types in a
file (dates, times, decimals) are compared by DuckDB's text, their missing values as ``None``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from anonweb.core.engine.base import fresh_name
from anonweb.core.engine.duckdb_engine import INTEGER_TYPES, literal, quote

_INTEGERS = INTEGER_TYPES
_NUMERIC_TYPES = _INTEGERS | {"FLOAT", "DOUBLE", "BOOLEAN"}
# the kinds of column pandas holds as NumPy numbers: put together, they become float64 (where
# they differ), and each cell is written as that float
_NUMBERS = frozenset({"int", "float", "float32"})


# the formats of a column of timestamps without a time zone, coarsest first: the date alone,
# to the second, to the millisecond, microsecond and nanosecond (pandas' own choice)
STAMPS = ("date", "s", "ms", "us", "ns")
_DIGITS = {"ms": 3, "us": 6, "ns": 9}


@dataclass(frozen=True)
class Cells:
    """How the in-memory check reads one released column: ``kind`` is ``int`` (NumPy integers,
    never missing), ``float`` (float64: floats, or integers with a missing value), ``float32``,
    ``bool`` (booleans, missing as ``None``), ``masked`` (a pandas nullable dtype: missing as
    ``<NA>``), ``stamp`` (timestamps, missing as ``NaT``), ``category`` (a categorical, missing
    as ``nan``), ``text`` (text and any other type, missing as ``None``); ``domain`` is what
    its values are to Python (``n`` numbers, ``s`` texts, ``o`` others); ``written`` and
    ``valued`` name the columns holding pandas' own text and :func:`value_sql`'s value of each
    cell, for a table in memory of another dtype. Timestamps have ``stamp``, the format of
    their column (:data:`STAMPS`), or ``zone``, their time zone."""

    kind: str
    written: str | None = None
    boolean: bool = False
    domain: str = "n"
    valued: str | None = None
    stamp: str = "date"
    zone: str | None = None


def promoted(a: Cells, b: Cells) -> bool:
    """Whether the column is written as float64 once the two releases' are put together."""
    return a.kind != b.kind and a.kind in _NUMBERS and b.kind in _NUMBERS


def text_sql(
    cells: Cells, ref: str, written: str | None = None, *, beside: Cells | None = None
) -> str:
    """SQL of the cell ``ref`` as pandas writes it (never NULL); ``written`` is the reference
    of the column ``cells.written``; ``beside``: the other release's column, when the two are
    put together and written as one (:func:`promoted`, :func:`stamp_sql`)."""
    kind = cells.kind
    as_float = beside is not None and promoted(cells, beside)
    if cells.written is not None:  # a table in memory's text column (never of numbers)
        return written or ref
    if kind == "stamp":
        alike = beside is None or (beside.kind == "stamp" and beside.zone is None)
        if cells.zone is None and alike:
            # the column's own format, or the one of the two put together
            stamp = (
                cells.stamp if beside is None else max(cells.stamp, beside.stamp, key=STAMPS.index)
            )
            return f"coalesce({stamp_sql(ref, stamp)}, 'NaT')"
        return f"coalesce({stamp_sql(ref, None, cells.zone)}, 'NaT')"  # as Python writes it
    if kind == "category":
        return f"coalesce({_python_text(cells, ref)}, 'nan')"
    if kind == "float" or (as_float and kind in _NUMBERS):
        return f"coalesce(CAST(CAST({ref} AS DOUBLE) AS VARCHAR), 'nan')"
    if kind == "float32":
        return f"coalesce(CAST({ref} AS VARCHAR), 'nan')"
    if kind == "int":
        return f"CAST({ref} AS VARCHAR)"
    missing = "<NA>" if kind == "masked" else "None"
    if kind == "bool" or cells.boolean:
        return f"CASE WHEN {ref} THEN 'True' WHEN NOT {ref} THEN 'False' ELSE '{missing}' END"
    return f"coalesce(CAST({ref} AS VARCHAR), '{missing}')"


def stamp_sql(ref: str, stamp: str | None, zone: str | None = None) -> str:
    """SQL of the timestamp ``ref`` as text (NULL when missing): in the column format ``stamp``
    pandas writes a column of timestamps in, or, without one, as Python writes a timestamp
    (``str(pd.Timestamp)``: the fraction of the second, if any, to the microsecond or the
    nanosecond it needs; the offset of the time zone ``zone`` after it)."""
    local = ref if zone is None else f"timezone({literal(zone)}, {ref})"
    if stamp == "date":
        return f"strftime({local}, '%Y-%m-%d')"
    second = f"strftime({local}, '%Y-%m-%d %H:%M:%S')"
    nanos = f"strftime({local}, '%n')"  # the nanoseconds of the second, nine digits
    if stamp in _DIGITS:
        return f"({second} || '.' || left({nanos}, {_DIGITS[stamp]}))"
    if stamp is not None:
        return second
    fraction = (
        f"CASE WHEN {nanos} = '000000000' THEN '' WHEN right({nanos}, 3) = '000' "
        f"THEN '.' || left({nanos}, 6) ELSE '.' || {nanos} END"
    )
    offset = ""
    if zone is not None:
        minutes = f"datediff('minute', timezone('UTC', {ref}), {local})"
        offset = (
            f" || CASE WHEN {minutes} < 0 THEN '-' ELSE '+' END "
            f"|| lpad(CAST(abs({minutes}) // 60 AS VARCHAR), 2, '0') || ':' "
            f"|| lpad(CAST(abs({minutes}) % 60 AS VARCHAR), 2, '0')"
        )
    return f"({second} || {fraction}{offset})"


def _python_text(cells: Cells, ref: str) -> str:
    """SQL of the value ``ref`` as Python writes it (``str``; NULL when missing): booleans
    ``True`` and ``False``, numbers and texts as DuckDB writes them (as Python does)."""
    if cells.boolean:
        return f"CASE WHEN {ref} THEN 'True' WHEN NOT {ref} THEN 'False' END"
    return f"CAST({ref} AS VARCHAR)"


_INT64 = "9223372036854775808.0"  # 2**63: doubles below it in size and integral are int64s


def value_sql(cells: Cells, ref: str, valued: str | None = None, *, as_float: bool = False) -> str:
    """SQL of the cell ``ref`` as a text that values Python counts equal share (NULL when
    missing), as the in-memory check codes a sensitive column; ``valued`` is the reference of
    the column ``cells.valued``; ``as_float``: as float64 (:func:`promoted`)."""
    if cells.valued is not None:
        return valued or ref
    kind = cells.kind
    if cells.domain == "s":
        return f"('s:' || {ref})"
    if kind == "stamp":  # Python's text of the timestamp: equal ones alike, in any unit
        return f"('o:' || {stamp_sql(ref, None, cells.zone)})"
    if cells.domain == "o":
        return f"('o:' || CAST({ref} AS VARCHAR))"
    if kind == "bool" or cells.boolean:
        return f"CASE WHEN {ref} THEN 'n:1' WHEN NOT {ref} THEN 'n:0' END"
    if (kind == "int" and not as_float) or kind == "masked":
        return f"('n:' || CAST({ref} AS VARCHAR))"
    x = f"CAST({ref} AS DOUBLE)"
    return (
        f"CASE WHEN {ref} IS NULL OR isnan({x}) THEN NULL "
        f"WHEN {x} = floor({x}) AND abs({x}) < {_INT64} THEN 'n:' || CAST(CAST({x} AS BIGINT) "
        f"AS VARCHAR) ELSE 'n:' || CAST({x} AS VARCHAR) END"
    )


def python_value(v: Any) -> str | None:
    """:func:`value_sql`'s text of one Python value (of a table in memory)."""
    if v is None or v is pd.NA or v is pd.NaT:
        return None
    if isinstance(v, bool | np.bool_):
        return "n:1" if v else "n:0"
    if isinstance(v, int | np.integer):
        return f"n:{int(v)}"
    if isinstance(v, float | np.floating):
        x = float(v)
        if x != x:
            return None
        if x == np.floor(x) and abs(x) < 2.0**63:
            return f"n:{int(x)}"
        return f"n:{x!r}"
    if isinstance(v, str):
        return f"s:{v}"
    return f"o:{v}"


def missing_sql(cells: Cells, ref: str) -> str:
    """SQL of whether pandas reads the cell ``ref`` as missing (a NaN of a float column too)."""
    if cells.kind in ("float", "float32"):
        return f"({ref} IS NULL OR isnan(CAST({ref} AS DOUBLE)))"
    return f"({ref} IS NULL)"


def frame_cells(frame: pd.DataFrame, taken: Sequence[str]) -> tuple[pd.DataFrame, dict[str, Cells]]:
    """A table in memory with pandas' text of each cell of its columns of other dtypes than
    NumPy numbers and booleans beside them (under names apart from ``taken``), and how each
    column is read."""
    cells: dict[str, Cells] = {}
    written: dict[str, pd.Series] = {}
    names = [*taken, *map(str, frame.columns)]
    for c in frame.columns:
        dtype = frame[c].dtype
        if pd.api.types.is_datetime64_any_dtype(dtype):  # formatted as a file's (stamp_formats)
            cells[str(c)] = Cells("stamp", domain="o", zone=_zone(getattr(dtype, "tz", None)))
        elif not isinstance(dtype, np.dtype) or dtype.kind not in "iufb":
            text, value = (fresh_name(f"__{x}_{c}", names) for x in ("text", "value"))
            names += [text, value]
            written[text] = frame[c].astype(str)
            values = frame[c].astype(object).map(python_value)
            written[value] = values.astype(object).where(values.notna(), None)
            cells[str(c)] = Cells("text", text, valued=value)
        elif dtype.kind in "iu":
            cells[str(c)] = Cells("int")
        elif dtype.kind == "b":
            cells[str(c)] = Cells("bool")
        else:
            cells[str(c)] = Cells("float32" if dtype == np.float32 else "float")
    return (frame.assign(**written) if written else frame), cells


def file_cells(con: Any, path: str | Path, types: Mapping[str, str]) -> dict[str, Cells]:
    """How pandas reads each column (of DuckDB type ``types``) of the Parquet file ``path``:
    by its type, whether an integer column has a missing value (one pass over those columns),
    the format of its timestamps (:func:`stamp_formats`), whether it is a dictionary column
    (pandas reads a categorical) and the nullable dtypes its pandas metadata names."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pq.read_schema(str(path))
    meta = schema.pandas_metadata or {}
    numpy_types = {str(c.get("name")): str(c.get("numpy_type")) for c in meta.get("columns", [])}
    read = f"read_parquet({literal(str(path))})"
    integers = [c for c, t in types.items() if t in _INTEGERS]
    gaps: dict[str, bool] = {}
    if integers:
        parts = ", ".join(f"bool_or({quote(c)} IS NULL)" for c in integers)
        row = con.execute(f"SELECT {parts} FROM {read}").fetchall()[0]
        gaps = {c: bool(g) for c, g in zip(integers, row, strict=True)}
    arrow = {str(f.name): f.type for f in schema}
    zones = {c: _zone(getattr(arrow.get(c), "tz", None)) for c, t in types.items() if _stamp(t)}
    stamps = stamp_formats(con, read, [c for c, zone in zones.items() if zone is None])
    out = {}
    for c, t in types.items():
        numpy_type = numpy_types.get(c, "")
        domain = "s" if t == "VARCHAR" else "n" if t in _NUMERIC_TYPES else "o"
        if c in zones:
            out[c] = Cells("stamp", domain="o", stamp=stamps.get(c, "date"), zone=zones[c])
        elif c in arrow and pa.types.is_dictionary(arrow[c]):
            out[c] = Cells("category", boolean=t == "BOOLEAN", domain=domain)
        elif numpy_type[:1].isupper() or numpy_type in ("boolean", "string"):
            out[c] = Cells("masked", boolean=t == "BOOLEAN", domain=domain)
        elif t in _INTEGERS:
            out[c] = Cells("float" if gaps[c] else "int")
        elif t == "DOUBLE":
            out[c] = Cells("float")
        elif t == "FLOAT":
            out[c] = Cells("float32")
        elif t == "BOOLEAN":
            out[c] = Cells("bool")
        else:
            out[c] = Cells("text", domain=domain)
    return out


def _stamp(kind: str) -> bool:
    """Whether the DuckDB type ``kind`` is a timestamp's (pandas reads it as datetime64)."""
    return kind.startswith("TIMESTAMP")


def _zone(tz: Any) -> str | None:
    return None if tz is None else str(tz)


def stamp_formats(con: Any, rel: str, columns: Sequence[str]) -> dict[str, str]:
    """The format pandas writes each column of timestamps (without a time zone) of ``rel`` in,
    from one pass over them: the coarsest of :data:`STAMPS` that holds all of its values."""
    if not columns:
        return {}
    parts = []
    for c in columns:
        nanos = f"strftime({quote(c)}, '%n')"
        parts.append(
            f"CASE WHEN coalesce(bool_and(strftime({quote(c)}, '%H:%M:%S') = '00:00:00' AND "
            f"{nanos} = '000000000'), true) THEN 'date' "
            f"WHEN bool_and({nanos} = '000000000') THEN 's' "
            f"WHEN bool_and(right({nanos}, 6) = '000000') THEN 'ms' "
            f"WHEN bool_and(right({nanos}, 3) = '000') THEN 'us' ELSE 'ns' END"
        )
    row = con.execute(f"SELECT {', '.join(parts)} FROM {rel}").fetchall()[0]
    return {c: str(f) for c, f in zip(columns, row, strict=True)}
