"""Reading a delimited text, an Excel workbook or a Parquet file in batches of columns.

Each source checks the file against :class:`Limits` while it reads (columns from the header,
cells as rows arrive, expanded bytes before anything is decompressed), so a hostile file is
refused before it costs more than the limits allow. Every refusal is a :class:`DataError` with a
one-line reason naming the line, row or column, and never quoting a cell.

Text and Excel sources yield strings plus what each column's values looked like (``EMPTY``,
``INT``, ``FLOAT`` or ``TEXT``); the caller decides a column's type once the whole file is seen.
A Parquet source yields its final types directly.
"""

from __future__ import annotations

import contextlib
import csv
import io
import re
import warnings
import zipfile
import zlib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import pyarrow as pa
import pyarrow.compute as pc

from anonweb.core.errors import DataError
from anonweb.core.io.misreads import (
    ReadWarning,
    decimal_comma_numbers,
    decimal_comma_warning,
    separator_warning,
    to_decimal_point,
)

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer
    from openpyxl.workbook.workbook import Workbook

# What a column's values look like, ordered so that the type of a column is the max over batches.
EMPTY, INT, FLOAT, TEXT = 0, 1, 2, 3
KIND_NAMES = {EMPTY: "text", INT: "integer", FLOAT: "float", TEXT: "text"}

SNIFF_DELIMITERS = ",;\t|"
DEFAULT_NA_VALUES = ("", "NA", "N/A", "NaN", "nan", "null", "NULL", "?")
EXCEL_MAX_ROWS = 1_048_576  # a worksheet cannot have more (Excel's own limit)

# Integers up to 18 digits; longer digit strings are identifiers (kept exactly, as text). A
# leading zero (ZIP 02138, IDs) also keeps a column as text, as it was written.
_INT = r"^-?(0|[1-9][0-9]{0,17})$"
_FLOAT = r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?$"
_NOT_A_NUMBER = r"^[+-]?0[0-9]|^[+-]?[0-9]{19,}$"


@dataclass(frozen=True)
class Limits:
    """What one upload may hold. Checked while reading, never after the fact."""

    max_columns: int = 5_000
    max_cells: int = 500_000_000
    # Bytes a compressed file may expand to (an xlsx's XML, a Parquet row group).
    max_expanded_bytes: int = 1024**3
    # An xlsx this much larger than its compressed size (and over bomb_min_bytes) is a zip bomb.
    max_expansion_ratio: int = 100
    bomb_min_bytes: int = 100 * 1024**2
    max_name_length: int = 300
    # The longest row of a text file (the CSV reader's block).
    max_row_bytes: int = 16 * 1024**2
    # Text a table may hold once decoded: a Parquet column's dictionary, or an xlsx's shared
    # strings, can repeat one long value over every row (6 KB on disk, 10 GB decoded).
    max_decoded_bytes: int = 2 * 1024**3
    # An xlsx's shared-string table is loaded whole before the first row (openpyxl): its entries
    # and its part's size are counted first.
    max_shared_strings: int = 2_000_000
    max_shared_strings_bytes: int = 256 * 1024**2


def size_text(n: float) -> str:
    """Bytes as people read them (1024-based, as Django's filesizeformat)."""
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n} bytes"  # pragma: no cover


def column_names(raw: Sequence[Any], *, label: str, limits: Limits) -> list[str]:
    """Header cells as column names: stripped, blanks named as pandas names them, and refused
    when there are too many, when one is too long, or when two are the same (in linear time:
    a 100,000-column header must not cost a quadratic check)."""
    if len(raw) > limits.max_columns:
        raise DataError(
            f"{label}: {len(raw):,} columns; at most {limits.max_columns:,} can be read"
        )
    names = []
    for i, cell in enumerate(raw):
        name = "" if cell is None else str(cell).strip()
        if "\x00" in name:
            raise DataError(f"{label}: the name of column {i + 1} contains a NUL character")
        if len(name) > limits.max_name_length:
            raise DataError(
                f"{label}: the name of column {i + 1} has {len(name):,} characters; "
                f"at most {limits.max_name_length} are allowed"
            )
        names.append(name or f"Unnamed: {i}")
    if not names:
        raise DataError(f"{label}: no columns found")
    if all(n.startswith("Unnamed: ") for n in names):
        raise DataError(f"{label}: the header row is missing")
    dupes = sorted(n for n, count in Counter(names).items() if count > 1)
    if dupes:
        shown = ", ".join(dupes[:10]) + (f" and {len(dupes) - 10} more" if len(dupes) > 10 else "")
        raise DataError(f"{label}: duplicate column names: {shown}")
    return names


def check_cells(rows: int, columns: int, *, label: str, limits: Limits) -> None:
    if rows * columns > limits.max_cells:
        raise DataError(
            f"{label}: more than {limits.max_cells:,} cells ({rows:,} rows of {columns:,} "
            "columns read so far); split the table or drop columns before uploading"
        )


def check_decoded(total: int, *, label: str, limits: Limits) -> None:
    if total > limits.max_decoded_bytes:
        raise DataError(
            f"{label}: holds more than {size_text(limits.max_decoded_bytes)} of text once "
            "decoded (values repeated over many rows count each time); split the table or "
            "shorten its longest values"
        )


def text_kind(values: pa.Array, known: int) -> int:
    """The kind of a batch of strings given what earlier batches showed (``known``)."""
    if known == TEXT:
        return TEXT
    if values.null_count == len(values):
        return known
    if pc.any(pc.match_substring_regex(values, _NOT_A_NUMBER)).as_py():
        return TEXT
    if known <= INT and pc.all(pc.match_substring_regex(values, _INT)).as_py():
        return INT
    if pc.all(pc.match_substring_regex(values, _FLOAT)).as_py():
        return FLOAT
    return TEXT


def separator_problem(sep: str) -> str | None:
    """Why ``sep`` cannot separate fields (the parser takes one byte that is not a quote or a
    line end), or None."""
    if len(sep) == 1 and sep.isascii() and sep not in '"\r\n':
        return None
    several = " (a character of several bytes)" if len(sep) == 1 and not sep.isascii() else ""
    return f"the separator must be one plain character such as , ; | or a tab, not {sep!r}{several}"


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


# --- delimited text -----------------------------------------------------------------------

# Bytes that are no character in Windows-1252, and byte pairs that are UTF-8's encoding of
# Latin letters and punctuation (Ã©, â€™): seen in a Windows-1252 file, they mean two encodings.
_UNDEFINED_1252 = re.compile(rb"[\x81\x8d\x8f\x90\x9d]")
_UTF8_SIGNS = re.compile(rb"[\xc2\xc3][\x80-\xbf]|\xe2\x80[\x80-\xbf]")


class _NotUtf8(Exception):
    def __init__(self, line: int, byte: int, after_utf8: bool):
        super().__init__(line)
        self.line, self.byte, self.after_utf8 = line, byte, after_utf8


class _CheckedStream:
    """The raw bytes of a text file as the CSV parser reads them, checked on the way: no NUL
    byte, and valid in the chosen encoding. Counts lines so that an error can name one."""

    closed = False

    def __init__(self, fh: BinaryIO, *, label: str, encoding: str):
        self.fh, self.label, self.encoding = fh, label, encoding
        self.offset = 0
        self.lines = 0
        self.non_ascii = False
        self._tail = b""

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True

    def read(self, n: int = -1) -> bytes:
        chunk = self.fh.read(n if n and n > 0 else 1 << 24)
        if isinstance(chunk, str):
            raise DataError(f"{self.label}: expected bytes, got text")
        self._check(chunk, final=not chunk)
        self.offset += len(chunk)
        self.lines += chunk.count(b"\n")
        return chunk

    def _line(self, data: bytes, i: int) -> int:
        return self.lines + data.count(b"\n", 0, i) + 1

    def _check(self, chunk: bytes, *, final: bool) -> None:
        nul = chunk.find(b"\x00")
        if nul >= 0:
            raise DataError(
                f"{self.label}: line {self._line(chunk, nul):,} contains a NUL byte, which text "
                "never holds (is it a binary file, or UTF-16 text? save it as UTF-8 CSV)"
            )
        if self.encoding == "utf-8":
            data = self._tail + chunk
            try:
                data.decode("utf-8")
            except UnicodeDecodeError as exc:
                if not final and exc.end == len(data) and exc.reason == "unexpected end of data":
                    self._tail = data[exc.start :]
                    self.non_ascii = self.non_ascii or not data[: exc.start].isascii()
                    return
                raise _NotUtf8(
                    self._line(data, exc.start),
                    data[exc.start],
                    self.non_ascii or not data[: exc.start].isascii(),
                ) from None
            self._tail = b""
            self.non_ascii = self.non_ascii or not chunk.isascii()
            return
        bad = _UNDEFINED_1252.search(chunk)
        if bad:
            raise DataError(
                f"{self.label}: line {self._line(chunk, bad.start()):,} holds byte "
                f"0x{chunk[bad.start()]:02x}, which is a character neither in UTF-8 nor in "
                "Windows-1252 (Latin-1); save the file as UTF-8"
            )
        sign = _UTF8_SIGNS.search(chunk)
        if sign:
            raise DataError(
                f"{self.label}: the file mixes encodings: line {self._line(chunk, sign.start()):,} "
                "is UTF-8 text, earlier lines are not; save the whole file as UTF-8"
            )


# Opens the file afresh, from its start: the readers close what it returns.
OpenBinary = Callable[[], BinaryIO]


class TextSource:
    """A delimited text file (CSV, TSV, ...), read in blocks by pyarrow's streaming CSV reader
    as strings. UTF-8 is expected; a file with no UTF-8 at all is read as Windows-1252 (the
    encoding spreadsheet programs call Latin-1), and says so; anything else is refused."""

    typed = False

    def __init__(
        self,
        open_binary: OpenBinary,
        *,
        label: str,
        limits: Limits,
        sep: str | None = None,
        na_values: Sequence[str] | None = None,
        decimal: str = ".",
    ):
        self.open_binary, self.label, self.limits = open_binary, label, limits
        if decimal not in (".", ","):
            raise DataError(
                f"{label}: the decimal mark must be a point or a comma, not {decimal!r}"
            )
        self.decimal = decimal
        self.na_values = list(DEFAULT_NA_VALUES if na_values is None else na_values)
        self.encoding = "utf-8"
        head = self._head()
        if head[:2] in (b"\xff\xfe", b"\xfe\xff"):
            raise DataError(f"{self.label}: the file is UTF-16 text; save it as UTF-8 CSV")
        sample = head.decode("utf-8", errors="replace").lstrip("\ufeff")
        if not sample.strip():
            raise DataError(f"{self.label}: the file is empty")
        problem = separator_problem(sep) if sep is not None else None
        if problem:
            raise DataError(f"{self.label}: {problem}")
        self.separator = sep or sniff_separator(sample[:65536])
        if self.separator == decimal:
            raise DataError(
                f"{label}: the comma cannot be both the separator and the decimal mark; choose "
                "another separator (a file with decimal commas is usually separated by semicolons)"
            )
        try:
            # newline="": a bare CR ends a line here as it does for the parser below.
            reader = csv.reader(io.StringIO(sample, newline=""), delimiter=self.separator)
            header = next(reader, [])
        except csv.Error as exc:
            raise DataError(f"{label}: the header row cannot be read ({exc})") from None
        # The header is counted before the parser sees it: a 100,000-column file is refused
        # here, in microseconds.
        column_names(header, label=label, limits=limits)
        self.width = len(header)
        found = separator_warning(header, self.separator)
        self._header_warnings: tuple[ReadWarning, ...] = () if found is None else (found,)
        self.read_warnings: tuple[ReadWarning, ...] = self._header_warnings
        self.names: list[str] = []
        self._stream: _CheckedStream | None = None
        self._size: int | None = None
        self._parsed_blocks = 0

    def _head(self) -> bytes:
        with self.open_binary() as fh:
            return fh.read(min(self.limits.max_row_bytes, 8 * 1024 * 1024))

    def fraction(self) -> float | None:
        """How much of the file has been parsed. pyarrow reads blocks ahead of the parser (up
        to 32), so the bytes read say little; each batch is one parsed block."""
        if self._stream is None or not self._size:
            return None
        parsed = self._parsed_blocks * self.limits.max_row_bytes
        return min(1.0, self._stream.offset / self._size, parsed / self._size)

    def batches(self) -> Iterator[tuple[list[pa.Array], list[int]]]:
        """Batches of string columns and their kinds. Raises :class:`ReadAgain` when the file
        turns out not to be UTF-8 after batches were handed on: the caller drops what it has
        and calls again (the source then reads Windows-1252)."""
        if self.encoding != "utf-8":
            yield from self._batches()
            return
        try:
            yield from self._batches()
        except _NotUtf8 as exc:
            if exc.after_utf8:
                raise DataError(
                    f"{self.label}: line {exc.line:,} is not UTF-8 text (byte 0x{exc.byte:02x}) "
                    "although earlier lines are: the file mixes encodings; save it as UTF-8"
                ) from None
            self.encoding = "cp1252"
            if self.names:
                raise ReadAgain() from None
            yield from self._batches()

    def _batches(self) -> Iterator[tuple[list[pa.Array], list[int]]]:
        import pyarrow.csv as pcsv

        invalid: list[tuple[int | None, int]] = []

        def on_invalid(row: pcsv.InvalidRow) -> str:
            invalid.append((row.number, row.actual_columns))
            return "skip"

        fields = [f"f{i}" for i in range(self.width)]
        with self.open_binary() as fh:
            with contextlib.suppress(OSError, AttributeError):
                self._size = fh.seek(0, io.SEEK_END)
                fh.seek(0)
            self._stream = _CheckedStream(fh, label=self.label, encoding=self.encoding)
            try:
                reader = pcsv.open_csv(
                    self._stream,
                    read_options=pcsv.ReadOptions(
                        use_threads=False,
                        block_size=self.limits.max_row_bytes,
                        column_names=fields,
                        encoding="utf8" if self.encoding == "utf-8" else self.encoding,
                    ),
                    parse_options=pcsv.ParseOptions(
                        delimiter=self.separator,
                        newlines_in_values=True,
                        ignore_empty_lines=True,
                        invalid_row_handler=on_invalid,
                    ),
                    convert_options=pcsv.ConvertOptions(
                        column_types=dict.fromkeys(fields, pa.string()),
                        null_values=self.na_values,
                        strings_can_be_null=True,
                        quoted_strings_can_be_null=True,
                    ),
                )
                first = True
                self._parsed_blocks = 0
                # A column found to hold text is not matched against the number patterns again.
                known = [EMPTY] * self.width
                # Columns whose every value so far could be a number with a decimal comma.
                commas = [self.decimal == "."] * self.width
                last: pa.Array | None = None
                for batch in reader:
                    self._parsed_blocks += 1
                    self._check_invalid(invalid)
                    columns = list(batch.columns)
                    if batch.num_rows:
                        last = columns[-1].slice(batch.num_rows - 1)
                    if first:
                        first = False
                        self._take_header(columns)
                        columns = [c.slice(1) for c in columns]
                    columns = [self._clean(c) for c in columns]
                    if self.decimal == ",":
                        columns = [to_decimal_point(c) for c in columns]
                    kinds = [text_kind(c, k) for c, k in zip(columns, known, strict=True)]
                    known = [max(k, seen) for k, seen in zip(kinds, known, strict=True)]
                    for i, kind in enumerate(kinds):
                        # Integers and blanks fit a decimal-comma column: only look at the rest.
                        if commas[i] and kind in (FLOAT, TEXT):
                            commas[i] = decimal_comma_numbers(columns[i])
                    yield columns, kinds
                self._check_invalid(invalid)
                if first:
                    raise DataError(f"{self.label}: the file is empty")
                text = [
                    n for n, k, c in zip(self.names, known, commas, strict=True) if c and k == TEXT
                ]
                found_text = (decimal_comma_warning(text),) if text else ()
                self.read_warnings = self._header_warnings + found_text
                self._check_quote_closed(fh, last)
            except pa.ArrowInvalid as exc:
                raise DataError(self._explain(exc)) from None

    def _check_quote_closed(self, fh: BinaryIO, last: pa.Array | None) -> None:
        """Refuse a file whose last quote is never closed: the parser takes everything from
        that quote to the end of the file as one value, silently. Such a value, written back
        with its quotes doubled and the opening quote before it, is exactly the file's end; a
        value that was closed is followed by its closing quote."""
        value = last[0].as_py() if last is not None and len(last) else None
        if value is None or self._stream is None:
            return
        encoding = "utf-8" if self.encoding == "utf-8" else self.encoding
        tail = ('"' + value.replace('"', '""')).encode(encoding, errors="replace")
        try:
            fh.seek(-len(tail), io.SEEK_END)
            ends_open = fh.read(len(tail)) == tail
        except (OSError, ValueError):
            return
        if ends_open:
            opened = self._stream.lines - value.count("\n") + 1
            raise DataError(
                f'{self.label}: the quote " opened on line {opened:,} is never closed, so '
                "everything after it would be one value; close it, or remove it"
            )

    def _take_header(self, columns: list[pa.Array]) -> None:
        raw = [c[0].as_py() if len(c) else None for c in columns]
        self.names = column_names(raw, label=self.label, limits=self.limits)

    def _clean(self, values: pa.Array) -> pa.Array:
        # Spaces after a separator are not part of the value (as pandas' skipinitialspace).
        if pc.any(pc.starts_with(values, " ")).as_py():
            values = pc.utf8_ltrim(values, characters=" ")
            values = pc.if_else(
                pc.is_in(values, value_set=pa.array(self.na_values, pa.string())),
                pa.scalar(None, pa.string()),
                values,
            )
        return values

    def _check_invalid(self, invalid: list[tuple[int | None, int]]) -> None:
        if not invalid:
            return
        number, actual = invalid[0]
        where = f"row {number:,}" if number else "a row"
        hint = (
            ' (a missing separator, or a quote " that is never closed?)'
            if actual < self.width
            else " (a separator inside a value that is not quoted?)"
        )
        if self._header_warnings:  # one column whose name holds another separator
            hint = f". {self._header_warnings[0].message}"
        raise DataError(
            f"{self.label}: {where} (the header is row 1) has {actual:,} value(s) where the "
            f"header has {self.width:,}{hint}"
        )

    def _explain(self, exc: pa.ArrowInvalid) -> str:
        text = str(exc)
        if "straddling" in text or "block" in text:
            return (
                f"{self.label}: a row is longer than {size_text(self.limits.max_row_bytes)}, or a "
                'quote " is never closed'
            )
        first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
        # pyarrow quotes the offending row; a message may be stored and shown, cells may not.
        first = first.split(":", 1)[0] if "CSV parse error" in first else first
        return f"{self.label}: cannot be read as delimited text ({first})"


class ReadAgain(Exception):
    """A file found not to be UTF-8 after rows were already handed on: read it again."""


# --- Excel --------------------------------------------------------------------------------


def choose_sheet(names: Sequence[str], wanted: str | None, *, label: str) -> str:
    """The worksheet to read: the one asked for, or the only one. A workbook of several sheets
    read from its first without a word may give a README instead of the data, so without a
    choice it is refused, naming its sheets."""
    listed = ", ".join(repr(n) for n in names)
    if wanted:
        if wanted not in names:
            raise DataError(
                f"{label}: the workbook has no sheet {wanted!r}; its sheets are {listed}"
            )
        return wanted
    if not names:
        raise DataError(f"{label}: the workbook has no worksheet")
    if len(names) > 1:
        raise DataError(
            f"{label}: the workbook has {len(names)} sheets ({listed}); choose the sheet to read"
        )
    return names[0]


class ExcelSource:
    """One worksheet of an .xlsx workbook, read row by row (openpyxl's read-only mode): the one
    named by ``sheet``, or the only one (:func:`choose_sheet`).

    The zip's declared sizes bound what decompression can produce (Python's zip reader stops
    there and fails the checksum of a member that claims less than it holds), so the expanded
    size and the expansion ratio are checked before a single XML element is parsed."""

    typed = True
    encoding = None
    separator = None
    read_warnings: tuple[ReadWarning, ...] = ()  # cells keep their own types

    # Cells held in Python objects before a batch is handed on: a wide sheet gets short batches.
    batch_cells = 1_000_000
    slice_bytes = 64 * 1024**2

    def __init__(
        self,
        open_binary: OpenBinary,
        *,
        label: str,
        limits: Limits,
        batch_rows: int = 20_000,
        sheet: str | None = None,
    ):
        self.open_binary, self.label, self.limits = open_binary, label, limits
        self.sheet = sheet
        self.batch_rows = batch_rows
        self.names: list[str] = []
        self._rows_read = 0
        self._rows_declared: int | None = None
        # Called while the workbook is checked, before any row: the caller's progress, which
        # raises to cancel (set by the ingest).
        self.tick: Callable[[str], None] = lambda message: None

    def fraction(self) -> float | None:
        if not self._rows_declared:
            return None
        return min(1.0, self._rows_read / self._rows_declared)

    def _check_archive(self, archive: zipfile.ZipFile) -> None:
        members = archive.infolist()
        expanded = sum(m.file_size for m in members)
        packed = sum(m.compress_size for m in members) or 1
        if expanded > self.limits.max_expanded_bytes:
            raise DataError(
                f"{self.label}: the workbook expands to {size_text(expanded)}, over the limit of "
                f"{size_text(self.limits.max_expanded_bytes)}; save the sheet as CSV instead"
            )
        if (
            expanded > self.limits.bomb_min_bytes
            and expanded / packed > self.limits.max_expansion_ratio
        ):
            raise DataError(
                f"{self.label}: the workbook expands {expanded / packed:,.0f} times "
                f"({size_text(packed)} to {size_text(expanded)}), which only a zip bomb does; "
                "save the sheet as CSV instead"
            )

    _SHARED_ENTRY = re.compile(rb"<(?:[A-Za-z_][\w.-]*:)?si[\s>/]")

    def _check_shared_strings(self, archive: zipfile.ZipFile) -> None:
        """Count the shared strings before openpyxl loads them all: 20 million two-character
        strings (48 MB on disk) took 3.7 GB and 11 minutes to load, deaf to cancellation."""
        for member in archive.infolist():
            if not member.filename.lower().endswith("sharedstrings.xml"):
                continue
            if member.file_size > self.limits.max_shared_strings_bytes:
                raise DataError(
                    f"{self.label}: the workbook's shared text is {size_text(member.file_size)}, "
                    f"over the limit of {size_text(self.limits.max_shared_strings_bytes)}; save "
                    "the sheet as CSV instead"
                )
            count, carry = 0, b""
            with archive.open(member) as part:
                while chunk := part.read(4 * 1024**2):
                    data = carry + chunk
                    # An entry starting in the last bytes is counted with the next chunk.
                    cut = max(0, len(data) - 64)
                    found = self._SHARED_ENTRY.findall
                    count += len(found(data)) - len(found(data, cut))
                    carry = data[cut:]
                    self._check_text_count(count)
                    self.tick(f"checked {count:,} texts of the workbook")
                self._check_text_count(count + len(self._SHARED_ENTRY.findall(carry)))

    def _check_text_count(self, count: int) -> None:
        if count > self.limits.max_shared_strings:
            raise DataError(
                f"{self.label}: the workbook's table of texts holds more than "
                f"{self.limits.max_shared_strings:,} entries, the most that can be read from an "
                "Excel file; save the sheet as CSV instead"
            )

    def batches(self) -> Iterator[tuple[list[pa.Array], list[int]]]:
        import openpyxl

        with self.open_binary() as fh:
            try:
                archive = zipfile.ZipFile(fh)
            except (zipfile.BadZipFile, OSError, ValueError):
                raise DataError(
                    f"{self.label}: not an .xlsx workbook (an old .xls file must be saved as "
                    ".xlsx or CSV first)"
                ) from None
            with archive:
                self._check_archive(archive)
                try:
                    self._check_shared_strings(archive)
                except (zipfile.BadZipFile, EOFError, OSError, zlib.error) as exc:
                    raise DataError(f"{self.label}: {excel_damage(exc)}") from None
                fh.seek(0)
                with warnings.catch_warnings():
                    # openpyxl warns about styles and extensions it ignores; values are intact.
                    warnings.simplefilter("ignore")
                    try:
                        book = openpyxl.load_workbook(fh, read_only=True, data_only=True)
                    except DataError:
                        raise
                    except Exception as exc:
                        raise DataError(f"{self.label}: {excel_damage(exc)}") from None
                    try:
                        yield from self._sheet(book)
                    except DataError:
                        raise
                    except Exception as exc:
                        raise DataError(f"{self.label}: {excel_damage(exc)}") from None
                    finally:
                        book.close()

    def sheet_names(self) -> list[str]:
        """The workbook's sheet names, read from its directory alone (no cell, no shared
        string), after the same size checks as a read: cheap enough to ask while uploading."""
        from openpyxl.reader.excel import ExcelReader

        with self.open_binary() as fh:
            try:
                archive = zipfile.ZipFile(fh)
            except (zipfile.BadZipFile, OSError, ValueError):
                raise DataError(
                    f"{self.label}: not an .xlsx workbook (an old .xls file must be saved as "
                    ".xlsx or CSV first)"
                ) from None
            with archive:
                self._check_archive(archive)
            fh.seek(0)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    reader = ExcelReader(fh, read_only=True, keep_links=False)
                    reader.read_manifest()
                    reader.read_workbook()
                    return [str(sheet.name) for sheet in reader.parser.sheets]
                except Exception as exc:
                    raise DataError(
                        f"{self.label}: cannot be read as an Excel workbook ({type(exc).__name__})"
                    ) from None

    def _sheet(self, book: Workbook) -> Iterator[tuple[list[pa.Array], list[int]]]:
        chosen = choose_sheet(book.sheetnames, self.sheet, label=self.label)
        sheet = book[chosen]
        if not hasattr(sheet, "iter_rows"):
            raise DataError(f"{self.label}: sheet {chosen!r} is a chart, not a table")
        self._rows_declared = sheet.max_row if isinstance(sheet.max_row, int) else None
        # A declared size is only a claim; rows are not padded to it.
        sheet.reset_dimensions()
        rows = sheet.iter_rows(values_only=True)
        seen = 0
        header = None
        for row in rows:
            seen += 1
            if any(v is not None and v != "" for v in row):
                header = row
                break
            self._guard_rows(seen)
        if header is None:
            raise DataError(f"{self.label}: the sheet {chosen!r} is empty")
        last = max(i for i, v in enumerate(header) if v is not None and v != "")
        self.names = column_names(header[: last + 1], label=self.label, limits=self.limits)
        width = len(self.names)
        batch_rows = max(1, min(self.batch_rows, self.batch_cells // width))
        buffer: list[list[str | None]] = [[] for _ in range(width)]
        kinds = [EMPTY] * width
        count = 0
        total = 0
        decoded = buffered = 0
        for row in rows:
            seen += 1
            self._guard_rows(seen)
            if not any(v is not None and v != "" for v in row):
                continue
            if len(row) > width and any(v is not None and v != "" for v in row[width:]):
                raise DataError(
                    f"{self.label}: row {seen:,} of the sheet has a value beyond the header's "
                    f"{width:,} columns"
                )
            for i in range(width):
                value = row[i] if i < len(row) else None
                text, kind = _cell(value)
                if kind == TEXT and text is not None and "\x00" in text:
                    raise DataError(
                        f"{self.label}: row {seen:,}, column {self.names[i]!r} contains a NUL "
                        "character"
                    )
                buffer[i].append(text)
                if text is not None:
                    decoded += len(text)
                    buffered += len(text)
                if kind > kinds[i]:
                    kinds[i] = kind
            count += 1
            total += 1
            self._rows_read = seen
            # Checked per row (the caller checks per batch): reading stops at the limit. One
            # shared string may be referenced by every cell, so its text counts each time.
            check_cells(total, width, label=self.label, limits=self.limits)
            check_decoded(decoded, label=self.label, limits=self.limits)
            # One shared string referenced by every cell is one object here but a copy per
            # cell in the batch: a batch is also handed on once it holds slice_bytes of text.
            if count == batch_rows or buffered >= self.slice_bytes:
                yield self._flush(buffer, kinds)
                buffer = [[] for _ in range(width)]
                kinds = [EMPTY] * width
                count = buffered = 0
        if count:
            yield self._flush(buffer, kinds)

    def _guard_rows(self, seen: int) -> None:
        if seen > EXCEL_MAX_ROWS:
            raise DataError(
                f"{self.label}: the sheet claims more than {EXCEL_MAX_ROWS:,} rows, which Excel "
                "cannot hold; the file is damaged"
            )

    @staticmethod
    def _flush(
        buffer: list[list[str | None]], kinds: list[int]
    ) -> tuple[list[pa.Array], list[int]]:
        return [pa.array(values, pa.string()) for values in buffer], list(kinds)


def excel_damage(exc: BaseException) -> str:
    """What is wrong with a workbook that openpyxl or the zip reader could not read, in words
    (never an exception's class name)."""
    import xml.etree.ElementTree as ET

    name = type(exc).__name__
    if isinstance(exc, IndexError):
        return (
            "a cell refers to a shared text the workbook does not have (the file is damaged); "
            "open it in Excel and save it again, or save the sheet as CSV"
        )
    if isinstance(exc, KeyError):
        part = str(exc.args[0]) if exc.args else "a part"
        return (
            f"the workbook lacks a part it names ({part[:100]}); it is damaged or not an Excel "
            "workbook: save it again from Excel, or save the sheet as CSV"
        )
    if isinstance(exc, zipfile.BadZipFile | EOFError | zlib.error) or "zip" in str(exc).lower():
        return "the workbook's zip archive is damaged (truncated or corrupted); upload it again"
    if isinstance(exc, ET.ParseError) or name in (
        "XMLSyntaxError",
        "ParseError",
        "SAXParseException",
    ):
        return (
            "the workbook's XML is malformed (it was damaged or written by a faulty program); "
            "open it in Excel and save it again, or save the sheet as CSV"
        )
    if isinstance(exc, ValueError | TypeError | AttributeError):
        return (
            "the workbook holds a value or a structure Excel does not define (it is damaged or "
            "was written by a faulty program); open it in Excel and save it again, or save the "
            "sheet as CSV"
        )
    return (
        "cannot be read as an Excel workbook (it is damaged or not an .xlsx file); open it in "
        "Excel and save it again, or save the sheet as CSV"
    )


def _cell(value: Any) -> tuple[str | None, int]:
    """A cell as text, and its kind: numbers stay numbers only if the cell holds a number, so
    a ZIP code typed as text stays text with its leading zero."""
    import datetime as dt

    if value is None or value == "":
        return None, EMPTY
    if isinstance(value, bool):
        return str(value), TEXT
    if isinstance(value, int):
        return str(value), INT if abs(value) < 10**18 else TEXT
    if isinstance(value, float):
        if value != value:  # NaN: Excel's #NUM! is read as missing
            return None, EMPTY
        return repr(value), FLOAT
    if isinstance(value, dt.datetime):
        if value.time() == dt.time(0) and value.tzinfo is None:
            return value.date().isoformat(), TEXT
        return value.isoformat(sep=" "), TEXT
    if isinstance(value, (dt.date, dt.time, dt.timedelta)):
        return str(value), TEXT
    return str(value), TEXT


# --- Parquet ------------------------------------------------------------------------------


class ParquetSource:
    """A Parquet file, read row group by row group. Numbers keep their type, text stays text;
    dates and times become ISO text (as from Excel); nested and binary columns are refused,
    since a cell must be one value that can be generalised, not a structure."""

    typed = True
    encoding = None
    separator = None
    read_warnings: tuple[ReadWarning, ...] = ()  # cells keep their own types
    # pandas stores a non-default index as a column of this name; it is not data.
    _INDEX = re.compile(r"^__index_level_\d+__$")

    def __init__(
        self, open_binary: OpenBinary, *, label: str, limits: Limits, batch_rows: int = 65_536
    ):
        self.open_binary, self.label, self.limits = open_binary, label, limits
        self.batch_rows = batch_rows
        self._fh = open_binary()
        try:
            self._open(label, limits)
        except BaseException:
            self._fh.close()
            raise

    def _open(self, label: str, limits: Limits) -> None:
        import pyarrow.parquet as pq

        try:
            self._file = pq.ParquetFile(self._fh)
        except Exception as exc:
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DataError(f"{label}: cannot be read as parquet ({reason[:200]})") from None
        schema = self._file.schema_arrow
        self._keep = [i for i, f in enumerate(schema) if not self._INDEX.match(f.name)]
        fields = [schema.field(i) for i in self._keep]
        self.names = column_names([f.name for f in fields], label=label, limits=limits)
        for name, f in zip(self.names, fields, strict=True):
            self._check_type(name, f.type)
        # Text is read as a dictionary (the values once, an index per row), so what a batch
        # holds once decoded is known before it is decoded.
        self._text = [_is_text(f.type) for f in fields]
        self._file = pq.ParquetFile(
            self._fh,
            metadata=self._file.metadata,
            read_dictionary=[f.name for f, text in zip(fields, self._text) if text],
        )
        self._decoded = 0
        meta = self._file.metadata
        check_cells(meta.num_rows, len(self.names), label=label, limits=limits)
        for i in range(meta.num_row_groups):
            size = meta.row_group(i).total_byte_size
            if size > limits.max_expanded_bytes:
                raise DataError(
                    f"{label}: row group {i + 1} expands to {size_text(size)}, over the limit of "
                    f"{size_text(limits.max_expanded_bytes)}; write the file with smaller row groups"
                )
        self.kinds = [self._kind(f.type) for f in fields]
        self._rows = meta.num_rows
        self._read = 0

    def close(self) -> None:
        self._fh.close()

    def fraction(self) -> float | None:
        return min(1.0, self._read / self._rows) if self._rows else None

    def _check_type(self, name: str, t: pa.DataType) -> None:
        if pa.types.is_dictionary(t):
            t = t.value_type
        if pa.types.is_nested(t):
            raise DataError(
                f"{self.label}: column {name!r} holds nested values ({t}); flatten it into "
                "one column per field before uploading"
            )
        if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
            raise DataError(f"{self.label}: column {name!r} holds binary data, not values")

    @staticmethod
    def _kind(t: pa.DataType) -> int:
        if pa.types.is_dictionary(t):
            t = t.value_type
        if pa.types.is_integer(t):
            return INT
        if pa.types.is_floating(t):
            return FLOAT
        return TEXT

    def null_counts(self) -> list[int | None]:
        """Missing values per column from the file's statistics (None where it has none)."""
        meta = self._file.metadata
        counts: list[int | None] = []
        for i in self._keep:
            total: int | None = 0
            for g in range(meta.num_row_groups):
                stats = meta.row_group(g).column(i).statistics
                if stats is None or not stats.has_null_count:
                    total = None
                    break
                total += stats.null_count
            counts.append(total)
        return counts

    # Text decoded at once: a batch holding more is handed on in slices of about this much.
    slice_bytes = 64 * 1024**2

    def batches(self) -> Iterator[tuple[list[pa.Array], list[int]]]:
        names = self._file.schema_arrow.names
        columns = [names[i] for i in self._keep]
        try:
            for batch in self._file.iter_batches(
                batch_size=self.batch_rows, columns=columns, use_threads=False
            ):
                for part in self._slices(batch):
                    converted = [
                        self.convert(name, part.column(i), kind)
                        for i, (name, kind) in enumerate(zip(self.names, self.kinds, strict=True))
                    ]
                    self._read += part.num_rows
                    yield converted, list(self.kinds)
        except DataError:
            raise
        except Exception as exc:  # pyarrow raises its own types on a damaged file
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise DataError(f"{self.label}: the file is damaged ({reason[:200]})") from None

    def _slices(self, batch: pa.RecordBatch) -> Iterator[pa.RecordBatch]:
        """The batch in row slices of at most ``slice_bytes`` of decoded text each (one row
        longer than that is a slice of its own), after checking the file's decoded total."""
        import numpy as np

        per_row = np.zeros(batch.num_rows, dtype=np.int64)
        for i, text in enumerate(self._text):
            if text:
                per_row += _decoded_lengths(batch.column(i))
        total = int(per_row.sum())
        self._decoded += total
        check_decoded(self._decoded, label=self.label, limits=self.limits)
        if total <= self.slice_bytes:
            yield batch
            return
        ends = np.cumsum(per_row)
        start = 0
        while start < batch.num_rows:
            base = int(ends[start - 1]) if start else 0
            stop = int(np.searchsorted(ends, base + self.slice_bytes, side="right"))
            stop = max(stop, start + 1)
            yield batch.slice(start, stop - start)
            start = stop

    # True: cells are handed on in their own Arrow type, for a reader that converts them
    # itself (:func:`~anonweb.core.io.ingest.load_table`, through
    # :func:`~anonweb.core.io.arrow_cells.arrow_to_pandas`); False: as an upload stores them
    keep_types = False

    def convert(self, name: str, values: pa.Array, kind: int) -> pa.Array:
        typed = values if self.keep_types else self._convert(values, kind)
        text = typed.dictionary if pa.types.is_dictionary(typed.type) else typed
        if _is_text(text.type) and pc.any(pc.match_substring(text, "\x00")).as_py():
            raise DataError(f"{self.label}: column {name!r} contains a NUL character")
        return typed

    def _convert(self, values: pa.Array, kind: int) -> pa.Array:
        return parquet_values(values, kind, label=self.label)


def parquet_kind(t: pa.DataType) -> int:
    """The kind a Parquet column of Arrow type ``t`` is read as: integers, floats or text."""
    return ParquetSource._kind(t)


def parquet_values(values: pa.Array, kind: int, *, label: str) -> pa.Array:
    """A Parquet column's cells as an upload reads them (of the column's :func:`parquet_kind`):
    integers as int64, floats as float64 (a float32 as the float64 of its shortest text, the
    value every engine reads, :mod:`anonweb.core.io.arrow_cells`), and anything else as text
    (a timestamp to the second, with its fraction of the second where it has one, in the wall
    time of its zone; a boolean ``True`` or ``False``, a dictionary's values)."""
    t = values.type
    if pa.types.is_dictionary(t):
        values = values.dictionary_decode()
        t = values.type
    if kind == INT:
        if pa.types.is_uint64(t) and (pc.max(values).as_py() or 0) >= 2**63:
            raise DataError(f"{label}: a column holds integers of 2^63 or more")
        return values.cast(pa.int64())
    if kind == FLOAT:
        from anonweb.core.io.arrow_cells import arrow_values

        return arrow_values(values).cast(pa.float64())
    if pa.types.is_string(t):
        return values
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return values.cast(pa.string())
    if pa.types.is_timestamp(t):
        return _stamp_text(values)
    if pa.types.is_boolean(t):
        return pc.if_else(values, "True", "False")
    try:
        return values.cast(pa.string())
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        raise DataError(f"{label}: a column of type {t} cannot be read as values") from None


def _stamp_text(values: pa.Array) -> pa.Array:
    """Timestamps as text in the wall time of their zone: to the second, and where a value
    has a fraction of the second, its microseconds (its nanoseconds where it has some), as
    Python writes a timestamp; two instants apart by a fraction of a second stay apart."""
    import numpy as np

    t = values.type
    per_second = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}[t.unit]
    ticks = values.cast(pa.int64()).fill_null(0).to_numpy()
    whole, fraction = np.divmod(ticks, per_second)  # floored: a fraction before 1970 too
    stamps = pa.array(whole, pa.timestamp("s", t.tz), mask=values.is_null().to_numpy(False))
    seconds = pc.strftime(stamps, format="%Y-%m-%d %H:%M:%S")
    fraction *= 10**9 // per_second  # nanoseconds
    if not fraction.any():
        return seconds
    nanos = pa.array(fraction % 1000 != 0)
    digits = pa.array(np.where(fraction % 1000 != 0, fraction, fraction // 1000)).cast(pa.string())
    padded = pc.if_else(
        nanos, pc.utf8_lpad(digits, 9, padding="0"), pc.utf8_lpad(digits, 6, padding="0")
    )
    tail = pc.if_else(pa.array(fraction != 0), pc.binary_join_element_wise(".", padded, ""), "")
    return pc.binary_join_element_wise(seconds, tail, "")


def _is_text(t: pa.DataType) -> bool:
    if pa.types.is_dictionary(t):
        t = t.value_type
    return bool(pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t))


def _decoded_lengths(values: pa.Array) -> Any:
    """Bytes of each value once decoded (0 for a missing one), as a NumPy array."""
    if pa.types.is_dictionary(values.type):
        lengths = pc.binary_length(values.dictionary).take(values.indices)
    else:
        lengths = pc.binary_length(values)
    return lengths.fill_null(0).to_numpy(zero_copy_only=False)


Source = TextSource | ExcelSource | ParquetSource


def open_source(
    path: str | Path | None = None,
    *,
    fileobj: BinaryIO | None = None,
    fmt: str,
    label: str,
    limits: Limits,
    sep: str | None = None,
    na_values: Sequence[str] | None = None,
    sheet: str | None = None,
    decimal: str = ".",
) -> Source:
    """The reader for ``fmt`` (``csv``, ``excel`` or ``parquet``) over a path or a seekable
    binary file object. ``sheet`` names an Excel workbook's sheet; ``decimal`` is a text file's
    decimal mark (``.`` or ``,``; Excel and Parquet cells carry their own types)."""

    def reopen() -> BinaryIO:
        if path is not None:
            return open(path, "rb")  # noqa: SIM115 - the readers close it
        assert fileobj is not None
        fileobj.seek(0)
        # an io.RawIOBase is not a typing.BinaryIO, though it has every method a reader calls
        return _Unclosable(fileobj)  # type: ignore[return-value]

    if sheet and fmt != "excel":
        raise DataError(f"{label}: a sheet can be chosen only for an Excel workbook")
    if fmt == "csv":
        return TextSource(
            reopen, label=label, limits=limits, sep=sep, na_values=na_values, decimal=decimal
        )
    if fmt == "excel":
        return ExcelSource(reopen, label=label, limits=limits, sheet=sheet)
    if fmt == "parquet":
        return ParquetSource(reopen, label=label, limits=limits)
    raise DataError(f"unknown format {fmt!r}: use csv, excel or parquet")


class _Unclosable(io.RawIOBase):
    """A caller's file object, handed to readers that close what they open."""

    def __init__(self, fh: BinaryIO):
        self._fh = fh

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        return self._fh.read(n)

    def readinto(self, b: WriteableBuffer) -> int:
        view = memoryview(b).cast("B")
        data = self._fh.read(len(view))
        view[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        return self._fh.seek(offset, whence)

    def tell(self) -> int:
        return self._fh.tell()

    def close(self) -> None:
        pass
