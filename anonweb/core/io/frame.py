"""Reading and validating tables: CSV/TSV (separator sniffed), Excel and Parquet."""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from anonweb.core.errors import DataError

# Re-exported: the names callers import from here.
from anonweb.core.io.ingest import EXCEL_SUFFIXES as EXCEL_SUFFIXES
from anonweb.core.io.ingest import PARQUET_SUFFIXES as PARQUET_SUFFIXES
from anonweb.core.io.ingest import TEXT_SUFFIXES as TEXT_SUFFIXES
from anonweb.core.io.ingest import load_table as load_table
from anonweb.core.io.sources import DEFAULT_NA_VALUES as DEFAULT_NA_VALUES
from anonweb.core.io.sources import SNIFF_DELIMITERS as SNIFF_DELIMITERS
from anonweb.core.io.sources import sniff_separator as sniff_separator


def _decode_sep(sep: str | None) -> str | None:
    if sep is None:
        return None
    aliases = {"\\t": "\t", "tab": "\t", "TAB": "\t", "semicolon": ";", "comma": ","}
    return aliases.get(sep, sep)


def read_table(
    source: str | Path | io.IOBase,
    *,
    sep: str | None = None,
    fmt: str | None = None,
    na_values: Iterable[str] | None = None,
    name: str | None = None,
    sheet: str | None = None,
    decimal: str = ".",
) -> pd.DataFrame:
    """Read a table from a path or a binary file object.

    ``sheet`` names the sheet of an Excel workbook (needed when it has several); ``decimal`` is
    the decimal mark of a text file (``.`` or ``,``).

    ``fmt`` is one of ``csv``, ``excel`` or ``parquet`` and defaults to the file's suffix.
    ``sep`` defaults to sniffing. Missing values are the usual spellings plus ``?`` (UCI Adult).
    Columns get the types an upload gets (:mod:`anonweb.core.io.ingest`): integers stay
    integers when cells are blank (``Int64``), codes with leading zeros stay text; a Parquet
    file's cells keep their types, each read as every engine reads it
    (:mod:`anonweb.core.io.arrow_cells`).
    Raises :class:`DataError` with a one-line reason for anything it cannot read.
    """
    if fmt not in (None, "csv", "excel", "parquet"):
        raise DataError(f"unknown format {fmt!r}: use csv, excel or parquet")
    return load_table(
        # Any binary file object works (Django's upload files too): the reader reads and seeks
        source,  # type: ignore[arg-type]
        fmt=fmt,
        sep=_decode_sep(sep),
        name=name,
        na_values=list(na_values) if na_values is not None else None,
        sheet=sheet,
        decimal=decimal,
    )


def require_columns(df: pd.DataFrame, columns: Sequence[str], *, role: str = "column") -> None:
    """Raise :class:`DataError` naming every requested column the frame lacks."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        known = ", ".join(map(str, df.columns))
        raise DataError(
            f"unknown {role}{'s' if len(missing) > 1 else ''}: {', '.join(map(str, missing))} "
            f"(the table has: {known})"
        )


def parse_column_list(raw: str | None) -> list[str]:
    """Split ``"a,b , c"`` into ``["a", "b", "c"]``; empty input gives ``[]``."""
    if not raw:
        return []
    return [part.strip() for part in raw.split(",") if part.strip()]
