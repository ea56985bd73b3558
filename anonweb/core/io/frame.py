"""Reading and validating tables: CSV/TSV (separator sniffed), Excel and Parquet."""

from __future__ import annotations

import contextlib
import csv
import io
from collections.abc import Iterable, Sequence
from pathlib import Path

import pandas as pd

from anonweb.core.errors import DataError

SNIFF_DELIMITERS = ",;\t|"
TEXT_SUFFIXES = {".csv", ".tsv", ".txt", ".tab", ""}
EXCEL_SUFFIXES = {".xlsx", ".xlsm", ".xls"}
PARQUET_SUFFIXES = {".parquet", ".pq"}
DEFAULT_NA_VALUES = ["", "NA", "N/A", "NaN", "nan", "null", "NULL", "?"]


def sniff_separator(sample: str) -> str:
    """Guess the field separator of a delimited text sample.

    ``csv.Sniffer`` first; if it cannot decide, the candidate that occurs most often in the
    header line and the same number of times in the next lines wins.
    """
    lines = [line for line in sample.splitlines() if line.strip()]
    if not lines:
        raise DataError("the file is empty")
    with contextlib.suppress(csv.Error):
        return csv.Sniffer().sniff("\n".join(lines[:50]), delimiters=SNIFF_DELIMITERS).delimiter
    header = lines[0]
    best, best_count = ",", 0
    for cand in SNIFF_DELIMITERS:
        count = header.count(cand)
        if count > best_count:
            best, best_count = cand, count
    return best


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
) -> pd.DataFrame:
    """Read a table from a path or a binary file object.

    ``fmt`` is one of ``csv``, ``excel``, ``parquet`` and defaults to the file's suffix.
    ``sep`` defaults to sniffing. Missing values are the usual spellings plus ``?`` (UCI Adult).
    Raises :class:`DataError` with a one-line reason for anything it cannot read.
    """
    label = name or (str(source) if isinstance(source, (str, Path)) else "the upload")
    suffix = Path(name or (source if isinstance(source, (str, Path)) else "")).suffix.lower()
    fmt = fmt or (
        "excel" if suffix in EXCEL_SUFFIXES else "parquet" if suffix in PARQUET_SUFFIXES else "csv"
    )
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.exists():
            raise DataError(f"{label}: no such file")
        if path.is_dir():
            raise DataError(f"{label}: is a directory, not a file")
        if path.stat().st_size == 0:
            raise DataError(f"{label}: the file is empty")
    try:
        if fmt == "excel":
            df = pd.read_excel(source, dtype=object, engine="openpyxl")
        elif fmt == "parquet":
            df = pd.read_parquet(source)
        elif fmt == "csv":
            df = _read_delimited(source, sep=_decode_sep(sep), na_values=na_values, label=label)
        else:
            raise DataError(f"unknown format {fmt!r}: use csv, excel or parquet")
    except DataError:
        raise
    except UnicodeDecodeError:
        raise DataError(f"{label}: not UTF-8 or Latin-1 text") from None
    except (pd.errors.ParserError, ValueError, OSError, KeyError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise DataError(f"{label}: cannot be read as {fmt} ({first})") from None
    except Exception as exc:  # openpyxl/pyarrow raise their own types on corrupt files
        raise DataError(f"{label}: cannot be read as {fmt} ({type(exc).__name__})") from None
    return _check_frame(df, label)


def _read_text(source: str | Path | io.IOBase) -> str:
    if isinstance(source, (str, Path)):
        raw = Path(source).read_bytes()
    else:
        raw = source.read()
        if isinstance(raw, str):
            return raw
    for encoding in ("utf-8-sig", "latin-1"):
        try:
            return raw.decode(encoding)
        except UnicodeDecodeError:
            continue
    raise UnicodeDecodeError("utf-8", b"", 0, 1, "undecodable")  # pragma: no cover


def _read_delimited(source, *, sep, na_values, label) -> pd.DataFrame:
    text = _read_text(source)
    if not text.strip():
        raise DataError(f"{label}: the file is empty")
    sep = sep or sniff_separator(text[:65536])
    df = pd.read_csv(
        io.StringIO(text),
        sep=sep,
        skipinitialspace=True,
        na_values=list(na_values) if na_values is not None else DEFAULT_NA_VALUES,
        keep_default_na=False,
        skip_blank_lines=True,
        engine="c",
        dtype=str,
    )
    return infer_types(df)


_LEADING_ZERO = r"^[+-]?0\d"


def _as_numbers(distinct: pd.Series) -> pd.Series | None:
    """The distinct values as numbers, or None if any is not a number or has a leading zero."""
    if not len(distinct) or distinct.str.contains(_LEADING_ZERO, regex=True).any():
        return None
    try:
        return pd.to_numeric(distinct, errors="raise")
    except (ValueError, TypeError):
        return None


def infer_types(df: pd.DataFrame) -> pd.DataFrame:
    """Numbers become numbers, except codes written with a leading zero (ZIP ``02138``, IDs),
    which stay text so that masking and matching see them as they were written."""
    out = {}
    for col in df.columns:
        s = df[col]
        if s.dtype == object:
            # Decide on the distinct values: few for categorical columns, and a failed parse
            # stops at the first non-number instead of coercing every cell.
            codes, uniques = pd.factorize(s)
            distinct = pd.Series(uniques, dtype=object)
            numbers = _as_numbers(distinct)
            if numbers is not None:
                s = _spread(numbers, codes, s)
        out[col] = s
    return pd.DataFrame(out, index=df.index)


def _spread(numbers: pd.Series, codes, s: pd.Series) -> pd.Series:
    """The column's values from its parsed distinct values: parsing each distinct value once
    instead of every cell makes reading a 26,000-row file several times faster."""
    if numbers.dtype.kind not in "if":  # unusual results (uint64, object): parse every cell
        return pd.to_numeric(s)
    missing = codes < 0
    values = numbers.to_numpy()[codes]
    if missing.any():
        values = values.astype(float)
        values[missing] = float("nan")
    return pd.Series(values, index=s.index, name=s.name)


def _check_frame(df: pd.DataFrame, label: str) -> pd.DataFrame:
    if df.shape[1] == 0:
        raise DataError(f"{label}: no columns found")
    if len(df) == 0:
        raise DataError(f"{label}: has a header but no data rows")
    df.columns = [str(c).strip() for c in df.columns]
    dupes = sorted({c for c in df.columns if list(df.columns).count(c) > 1})
    if dupes:
        raise DataError(f"{label}: duplicate column names: {', '.join(dupes)}")
    unnamed = [c for c in df.columns if c.startswith("Unnamed: ")]
    if unnamed and len(unnamed) == df.shape[1]:
        raise DataError(f"{label}: the header row is missing")
    return df


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
