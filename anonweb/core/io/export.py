"""Writing a released table, and the one table of the formats it is exported in
(:data:`EXPORT_FORMATS`).

Each format is one entry: its name, file suffix, media type, writer, whether it is stored with
the release or written on request from a stored one, and the most rows it holds. Release
storage, the API's and the page's downloads, a recipient's link, the sign-off report and
``manage.py anonymize --out`` all read the table, so a format is added by adding one entry
(:func:`register_export_format`). Text formats a spreadsheet opens have their formulas
neutralised (CSV injection) by their writer: :func:`safe_csv_bytes`, :func:`safe_xlsx_bytes`.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from anonweb.core.errors import DataError, ParameterError

XLSX_MAX_ROWS = 1_048_575  # one row of the sheet holds the header


@dataclass(frozen=True)
class ExportFormat:
    """One format a release is exported in.

    ``write(df)`` returns the file's bytes (``write(df, sep=...)`` when ``sep`` is set: a
    delimited text whose separator may be chosen; ``sep`` is its default). ``stored``: written
    once with the release as ``data<suffix>`` (and hashed in its sign-off report); otherwise
    written on each request from the stored file of :data:`DERIVED_FROM`. ``max_rows``: the most
    rows it holds (None: no limit), ``holder`` what holds them, for the refusal. ``neutralised``:
    text cells are neutralised against spreadsheet formulas. ``label`` its short name (a button),
    ``description`` its name in a sentence. ``note``: what the sign-off report
    says about checking a copy of a format written on request."""

    name: str
    suffix: str
    content_type: str
    write: Callable[..., bytes]
    stored: bool = False
    label: str = ""
    description: str = ""
    sep: str | None = None
    max_rows: int | None = None
    holder: str = ""
    neutralised: bool = False
    note: str = ""

    @property
    def title(self) -> str:
        """Its short name on a button (``CSV``)."""
        return self.label or self.name.upper()

    @property
    def described(self) -> str:
        """Its name in a sentence (``Excel (xlsx)``)."""
        return self.description or self.title

    @property
    def file_name(self) -> str:
        """The release's stored file of this format."""
        return f"data{self.suffix}"

    def offered(self, rows: int) -> bool:
        """Whether a release of ``rows`` rows can be exported in this format."""
        return self.max_rows is None or rows <= self.max_rows

    def too_many(self, rows: int, *, instead: str = "download it as") -> str:
        """Why a table of ``rows`` rows cannot be written in this format, and what can be."""
        others = " or ".join(f.name for f in EXPORT_FORMATS.values() if f.offered(rows))
        return (
            f"the release has {rows:,} rows, more than {self.holder or self.name} holds "
            f"({self.max_rows or 0:,}); {instead} {others}"
        )

    def check_rows(self, rows: int) -> None:
        """A DataError when a table of ``rows`` rows cannot be written in this format."""
        if not self.offered(rows):
            raise DataError(self.too_many(rows))

    def to_bytes(self, df: pd.DataFrame, *, sep: str | None = None) -> bytes:
        """The table in this format (``sep``: the separator of a delimited text; ignored by
        other formats)."""
        self.check_rows(len(df))
        if self.sep is not None:
            return self.write(df, sep=sep or self.sep)
        return self.write(df)


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


def parquet_bytes(df: pd.DataFrame) -> bytes:
    """Parquet keeps every value as it is (its readers do not evaluate formulas)."""
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


DEFAULT_FORMAT = "csv"
# The stored format the formats written on request are written from (it keeps the types).
DERIVED_FROM = "parquet"

# Name -> format, in the order downloads are offered (the default first).
EXPORT_FORMATS: dict[str, ExportFormat] = {}
# Name -> media type: the download formats as the API, the page and a link name them.
DOWNLOAD_FORMATS: dict[str, str] = {}


def register_export_format(fmt: ExportFormat) -> ExportFormat:
    """Add a format to the table (a name registers once)."""
    existing = EXPORT_FORMATS.get(fmt.name)
    if existing is not None and existing != fmt:
        raise ValueError(f"export format {fmt.name!r} is already registered")
    if not re.fullmatch(r"[a-z0-9]+", fmt.name) or not fmt.suffix.startswith("."):
        raise ValueError(f"export format {fmt.name!r}: a lower-case name and a .suffix")
    EXPORT_FORMATS[fmt.name] = fmt
    DOWNLOAD_FORMATS[fmt.name] = fmt.content_type
    return fmt


def unregister_export_format(name: str) -> None:
    """Remove a format (the built-in ones stay: releases are stored in them)."""
    if name in (DEFAULT_FORMAT, DERIVED_FROM):
        raise ValueError(f"the {name} format holds every release; it cannot be removed")
    EXPORT_FORMATS.pop(name, None)
    DOWNLOAD_FORMATS.pop(name, None)


def download_format(value: str | None) -> str:
    """The download format a request names (``csv`` when it names none), or a ParameterError
    saying which ones there are."""
    fmt = (value or "").strip().lower() or DEFAULT_FORMAT
    if fmt not in EXPORT_FORMATS:
        raise ParameterError(
            f"unknown download format {value!r}: choose one of {', '.join(EXPORT_FORMATS)}"
        )
    return fmt


def export_format(value: str | None) -> ExportFormat:
    """The format a request names (:data:`DEFAULT_FORMAT` when it names none), or a
    ParameterError saying which ones there are."""
    return EXPORT_FORMATS[download_format(value)]


def format_for_path(path: str, *, default: str = DEFAULT_FORMAT) -> ExportFormat:
    """The format whose suffix ``path`` ends with (``default`` for any other suffix)."""
    lower = str(path).lower()
    for fmt in EXPORT_FORMATS.values():
        if lower.endswith(fmt.suffix):
            return fmt
    return EXPORT_FORMATS[default]


for _fmt in (
    ExportFormat(
        "csv",
        ".csv",
        "text/csv",
        safe_csv_bytes,
        stored=True,
        label="CSV",
        sep=",",
        neutralised=True,
    ),
    ExportFormat(
        "parquet",
        ".parquet",
        "application/vnd.apache.parquet",
        parquet_bytes,
        stored=True,
        label="Parquet",
    ),
    ExportFormat(
        "xlsx",
        ".xlsx",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        safe_xlsx_bytes,
        label="XLSX",
        description="Excel (xlsx)",
        max_rows=XLSX_MAX_ROWS,
        holder="a spreadsheet",
        neutralised=True,
        note="Its bytes carry the time it was written, so they have no fixed hash: check a copy "
        "by its cells",
    ),
):
    register_export_format(_fmt)


def export_parquet_file(
    parquet: str | Path, fmt: ExportFormat, out: str | Path, *, sep: str | None = None
) -> int:
    """Write the Parquet file (or folder of Parquet files) ``parquet`` to ``out`` in ``fmt``,
    batch by batch through the format's one writer, so a table larger than memory is written
    as a small one is (Parquet as it is, a delimited text neutralised). Returns the rows.

    A format written whole (a workbook) is refused: it holds at most ``max_rows`` rows anyway."""
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    if fmt.name != "parquet" and fmt.sep is None:
        raise ParameterError(
            f"a release written out of core is exported as Parquet or delimited text, not "
            f"{fmt.described}"
        )
    table = ds.dataset(str(parquet), format="parquet")
    rows = 0
    if fmt.name == "parquet":
        with pq.ParquetWriter(str(out), table.schema) as writer:
            for batch in table.to_batches():
                writer.write_batch(batch)
                rows += batch.num_rows
        return rows
    names = table.schema.names
    header = fmt.to_bytes(pd.DataFrame(columns=names), sep=sep)
    with open(out, "wb") as fh:
        fh.write(header)
        for batch in table.to_batches():
            if not batch.num_rows:
                continue
            text = fmt.to_bytes(batch.to_pandas(), sep=sep)
            if not text.startswith(header):
                raise DataError("the export's header changed between batches")
            fh.write(text[len(header) :])
            rows += batch.num_rows
    return rows
