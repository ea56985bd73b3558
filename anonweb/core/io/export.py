"""Writing a released table: CSV with spreadsheet formulas neutralised (CSV injection), and the
formats a release is downloaded in (:data:`DOWNLOAD_FORMATS`).

The release path (:mod:`anonweb.core.release.publish`) and every interface that writes a release
(the web job, the API's downloads, ``manage.py anonymize``) use :func:`safe_csv_bytes`.
"""

from __future__ import annotations

import csv
import io
import re

import pandas as pd

from anonweb.core.errors import ParameterError

# The formats a release is downloaded in, with their media types: the release page, the API and
# a recipient's link all offer exactly these.
DOWNLOAD_FORMATS: dict[str, str] = {
    "csv": "text/csv",
    "parquet": "application/vnd.apache.parquet",
    "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
}


def download_format(value: str | None) -> str:
    """The download format a request names (``csv`` when it names none), or a ParameterError
    saying which ones there are."""
    fmt = (value or "").strip().lower() or "csv"
    if fmt not in DOWNLOAD_FORMATS:
        raise ParameterError(
            f"unknown download format {value!r}: choose one of {', '.join(DOWNLOAD_FORMATS)}"
        )
    return fmt


# A cell starting with one of these is run as a formula by spreadsheet programs (CSV injection).
FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r", "\n")
# A line inside a cell: a reader that splits rows on a bare CR or LF would start a new cell
# there, so what follows a line break is neutralised as the start of a cell is.
_AFTER_LINE_BREAK = re.compile(r"(\r\n|\r|\n)(?=[=+\-@\t])")


def neutralise_cell(value: object) -> object:
    """Prefix text that a spreadsheet would evaluate with a quote (OWASP's advice), at the start
    of the cell and after every line break inside it."""
    if not isinstance(value, str):
        return value
    if value.startswith(FORMULA_PREFIXES):
        value = "'" + value
    if "\r" in value or "\n" in value:
        value = _AFTER_LINE_BREAK.sub(lambda m: m.group(1) + "'", value)
    return value


def neutralise_frame(df: pd.DataFrame) -> pd.DataFrame:
    """A copy for a spreadsheet (CSV or xlsx): text cells and column names neutralised; numbers
    are left as numbers. The input is not modified."""
    out = df.copy()
    for col in out.columns:
        if not pd.api.types.is_numeric_dtype(out[col]):
            out[col] = out[col].map(neutralise_cell)
    out.columns = [neutralise_cell(str(c)) for c in out.columns]
    return out


def safe_csv_bytes(df: pd.DataFrame, *, sep: str = ",") -> bytes:
    """CSV for download: text cells neutralised; numbers are left as numbers.

    Rows end with CRLF (RFC 4180). Python's writer quotes a cell holding any character of the
    line terminator, so with CRLF every cell containing a CR or an LF is quoted; with a bare LF
    terminator a cell holding a lone CR went out unquoted, and readers split the row there."""
    out = neutralise_frame(df)
    buf = io.StringIO()
    out.to_csv(buf, index=False, sep=sep, quoting=csv.QUOTE_MINIMAL, lineterminator="\r\n")
    return buf.getvalue().encode("utf-8")


# Characters an xlsx cannot hold (XML 1.0 has no C0 control but tab, LF and CR): openpyxl
# refuses a cell with one. Vertical tab and form feed separate words, so they become spaces; the
# others show nothing and are dropped.
_XLSX_ILLEGAL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_XLSX_SPACES = {"\x0b": " ", "\x0c": " "}


def xlsx_cell(value: object) -> object:
    """A text cell as an xlsx can hold it (see :data:`_XLSX_ILLEGAL`); other values as they are."""
    if not isinstance(value, str) or not _XLSX_ILLEGAL.search(value):
        return value
    return _XLSX_ILLEGAL.sub(lambda m: _XLSX_SPACES.get(m.group(0), ""), value)


def safe_xlsx_bytes(df: pd.DataFrame) -> bytes:
    """An xlsx workbook of the table for download: text cells neutralised as in the CSV, and
    characters a workbook cannot hold replaced. The input is not modified."""
    out = neutralise_frame(df)
    for col in out.columns:
        if not pd.api.types.is_numeric_dtype(out[col]):
            out[col] = out[col].map(xlsx_cell)
    out.columns = [xlsx_cell(c) for c in out.columns]
    buf = io.BytesIO()
    out.to_excel(buf, index=False, engine="openpyxl")
    return buf.getvalue()
