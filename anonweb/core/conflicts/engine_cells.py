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
  float64 it is (``0.10000000149011612``).

Sensitive values are compared as the in-memory check codes them (:func:`~.linkage._released_codes`):
as Python objects once the two columns are put together, missing values one value; so 1, 1.0
and True are one value, 0.0 and -0.0 too, an integer beside floats is the float it becomes, and
the number 1 is not the text "1". :func:`value_sql` writes each value as a text that equal
values share: ``n:`` and the number (an integral one as an integer), ``s:`` and a text, ``o:``
and any other value's text.

DuckDB writes a double as Python does (the shortest text that reads back, ``1e+16``,
``0.30000000000000004``, ``-0.0``, ``inf``), so a float's text is DuckDB's. A table held in
memory is read by the check as it is: its columns of other dtypes (objects, dates, nullable
dtypes) have their texts written by pandas beside them. Columns of other types in a file (dates,
times, decimals) are compared by DuckDB's text, their missing values as ``None``.
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


@dataclass(frozen=True)
class Cells:
    """How the in-memory check reads one released column: ``kind`` is ``int`` (NumPy integers,
    never missing), ``float`` (float64: floats, or integers with a missing value), ``float32``,
    ``bool`` (booleans, missing as ``None``), ``masked`` (a pandas nullable dtype: missing as
    ``<NA>``), ``text`` (text and any other type, missing as ``None``); ``domain`` is what
    its values are to Python (``n`` numbers, ``s`` texts, ``o`` others); ``written`` and
    ``valued`` name the columns holding pandas' own text and :func:`value_sql`'s value of each
    cell, for a table in memory of another dtype."""

    kind: str
    written: str | None = None
    boolean: bool = False
    domain: str = "n"
    valued: str | None = None


def promoted(a: Cells, b: Cells) -> bool:
    """Whether the column is written as float64 once the two releases' are put together."""
    return a.kind != b.kind and a.kind in _NUMBERS and b.kind in _NUMBERS


def text_sql(cells: Cells, ref: str, written: str | None = None, *, as_float: bool = False) -> str:
    """SQL of the cell ``ref`` as pandas writes it (never NULL); ``written`` is the reference
    of the column ``cells.written``; ``as_float``: as float64 (:func:`promoted`)."""
    kind = cells.kind
    if cells.written is not None:  # a table in memory's text column (never of numbers)
        return written or ref
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
        if not isinstance(dtype, np.dtype) or dtype.kind not in "iufb":
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
    and the nullable dtypes its pandas metadata names."""
    import pyarrow.parquet as pq

    meta = pq.read_schema(str(path)).pandas_metadata or {}
    numpy_types = {str(c.get("name")): str(c.get("numpy_type")) for c in meta.get("columns", [])}
    integers = [c for c, t in types.items() if t in _INTEGERS]
    gaps: dict[str, bool] = {}
    if integers:
        parts = ", ".join(f"bool_or({quote(c)} IS NULL)" for c in integers)
        row = con.execute(f"SELECT {parts} FROM read_parquet({literal(str(path))})").fetchall()[0]
        gaps = {c: bool(g) for c, g in zip(integers, row, strict=True)}
    out = {}
    for c, t in types.items():
        numpy_type = numpy_types.get(c, "")
        domain = "s" if t == "VARCHAR" else "n" if t in _NUMERIC_TYPES else "o"
        if numpy_type[:1].isupper() or numpy_type in ("boolean", "string"):
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
