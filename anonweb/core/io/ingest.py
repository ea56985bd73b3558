"""Turning an uploaded file into a table with one type per column, in bounded memory.

:func:`convert_to_parquet` streams a file of any size to Parquet: batches are read (see
:mod:`anonweb.core.io.sources`), checked against the limits and written as text to a staging
file while each column's kind is tracked; once the whole file is seen, columns of numbers are
cast from the staging file, batch by batch, into the final file. Memory stays at a few batches,
and a column's type is decided by all of its values, not by the first block.

:func:`load_table` reads a file into a pandas frame with the same rules (the command line), but
for a Parquet file, whose cells keep their own types as every engine reads them
(:mod:`anonweb.core.io.arrow_cells`).

Types: a column whose values are all integers (up to 18 digits, no leading zero) is an integer
column, kept as integers even when cells are blank (pandas' nullable ``Int64``; a float would
turn 39 into ``39.0`` and break hierarchies); all numbers gives floats; anything else is text,
exactly as written.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from anonweb.core.errors import DataError
from anonweb.core.io.arrow_cells import table_to_pandas
from anonweb.core.io.misreads import ReadWarning
from anonweb.core.io.sources import (
    EMPTY,
    FLOAT,
    INT,
    KIND_NAMES,
    TEXT,
    ExcelSource,
    Limits,
    ParquetSource,
    ReadAgain,
    Source,
    check_cells,
    choose_sheet,
    open_source,
)

EXCEL_SUFFIXES = {".xlsx", ".xlsm", ".xls"}
PARQUET_SUFFIXES = {".parquet", ".pq"}
TEXT_SUFFIXES = {".csv", ".tsv", ".txt", ".tab", ""}
ARROW_TYPES = {EMPTY: pa.string(), INT: pa.int64(), FLOAT: pa.float64(), TEXT: pa.string()}
COMPRESSION = "snappy"

Progress = Callable[[float, str], None]
# Takes each batch's column names and columns; (None, None) drops what it was given so far.
Sink = Callable[[list[str] | None, list[pa.Array] | None], None]


@dataclass(frozen=True)
class ColumnInfo:
    name: str
    type: str  # "integer", "float" or "text"
    missing: int
    distinct: int | None  # None: not counted (convert_to_parquet's count_distinct)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "dtype": "text" if self.type == "text" else "numeric",
            "type": self.type,
            "missing": self.missing,
            "distinct": self.distinct,
        }


@dataclass(frozen=True)
class TableInfo:
    rows: int
    columns: tuple[ColumnInfo, ...]
    format: str
    encoding: str | None = None
    separator: str | None = None
    # What the reader noticed that may mean the file was read wrongly (misreads.py).
    warnings: tuple[ReadWarning, ...] = ()
    sheet: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "columns": [c.to_dict() for c in self.columns],
            "format": self.format,
            "encoding": self.encoding,
            "separator": self.separator,
            "sheet": self.sheet,
            "warnings": [w.to_dict() for w in self.warnings],
        }


def format_of(name: str | None, fmt: str | None = None) -> str:
    """``csv``, ``excel`` or ``parquet`` from an explicit ``fmt`` or the file name's suffix."""
    if fmt:
        return fmt
    suffix = Path(name or "").suffix.lower()
    if suffix in EXCEL_SUFFIXES:
        return "excel"
    if suffix in PARQUET_SUFFIXES:
        return "parquet"
    return "csv"


def check_sheet(
    path: str | Path, *, fmt: str, sheet: str | None, label: str, limits: Limits
) -> str | None:
    """The sheet an upload will be read from (None for a file without sheets), refusing at once
    what the read would refuse later: a workbook of several sheets with none chosen, a sheet
    it does not have, a sheet chosen for a file that is not a workbook. Reads the workbook's
    directory only; a file whose directory cannot be read is left to the read, which says
    what is wrong with it (None)."""
    if fmt != "excel":
        if sheet:
            raise DataError(f"{label}: a sheet can be chosen only for an Excel workbook")
        return None
    source = ExcelSource(lambda: open(path, "rb"), label=label, limits=limits)  # noqa: SIM115
    try:
        names = source.sheet_names()
    except DataError:
        return None
    return choose_sheet(names, sheet, label=label)


def pandas_metadata(names: list[str], kinds: list[int], missing: list[int]) -> dict[bytes, bytes]:
    """Schema metadata that makes pandas read an integer column with blanks as ``Int64``."""
    dtypes: dict[int, Callable[[int], object]] = {
        INT: lambda m: "Int64" if m else "int64",
        FLOAT: lambda m: "float64",
        TEXT: lambda m: object,
        EMPTY: lambda m: object,
    }
    sample = pd.DataFrame(
        {
            name: pd.Series([], dtype=dtypes[kind](miss))
            for name, kind, miss in zip(names, kinds, missing, strict=True)
        }
    )
    # An empty object column says "empty"; say what it holds.
    schema = pa.Schema.from_pandas(sample, preserve_index=False)
    meta = dict(schema.metadata or {})
    import json

    doc = json.loads(meta[b"pandas"])
    for col, kind in zip(doc["columns"], kinds, strict=True):
        if kind in (TEXT, EMPTY):
            col["pandas_type"] = "unicode"
    meta[b"pandas"] = json.dumps(doc).encode()
    return meta


def final_schema(names: list[str], kinds: list[int], missing: list[int]) -> pa.Schema:
    fields = [pa.field(n, ARROW_TYPES[k]) for n, k in zip(names, kinds, strict=True)]
    return pa.schema(fields, metadata=pandas_metadata(names, kinds, missing))


def cast_column(values: pa.Array | pa.ChunkedArray, kind: int) -> pa.Array | pa.ChunkedArray:
    """Strings of a column whose kind is known to fit (checked by the source) to its type."""
    if kind in (TEXT, EMPTY) or values.type == ARROW_TYPES[kind]:
        return values
    return pc.cast(values, ARROW_TYPES[kind])


class _Tally:
    """What the batches showed: rows, each column's kind and missing values."""

    def __init__(self, label: str, limits: Limits):
        self.label, self.limits = label, limits
        self.reset()

    def reset(self) -> None:
        self.rows = 0
        self.kinds: list[int] = []
        self.missing: list[int] = []

    def add(self, columns: list[pa.Array], kinds: list[int]) -> None:
        if not self.kinds:
            self.kinds = [EMPTY] * len(columns)
            self.missing = [0] * len(columns)
        self.rows += len(columns[0]) if columns else 0
        check_cells(self.rows, len(columns), label=self.label, limits=self.limits)
        for i, (values, kind) in enumerate(zip(columns, kinds, strict=True)):
            if kind > self.kinds[i]:
                self.kinds[i] = kind
            self.missing[i] += values.null_count

    def check_rows(self) -> None:
        if self.rows == 0:
            raise DataError(f"{self.label}: has a header but no data rows")


def _read_all(source: Source, tally: _Tally, progress: Progress | None, sink: Sink) -> None:
    """Feed every batch to ``sink``, reading again from the start if the source asks."""
    if progress is not None and isinstance(source, ExcelSource):
        # A workbook is checked before its first row: cancelling works there too.
        source.tick = lambda message: progress(source.fraction() or 0.0, message)
    for _attempt in range(2):
        try:
            for columns, kinds in source.batches():
                tally.add(columns, kinds)
                sink(source.names, columns)
                if progress is not None:
                    fraction = source.fraction()
                    progress(fraction or 0.0, f"read {tally.rows:,} rows")
            return
        except ReadAgain:
            tally.reset()
            sink(None, None)  # drop what was written
    raise DataError(f"{tally.label}: cannot decide the file's encoding")  # pragma: no cover


class _StagingWriter:
    def __init__(self, path: Path):
        self.path = path
        self.writer: pq.ParquetWriter | None = None
        self.schema: pa.Schema | None = None

    def __call__(self, names: list[str] | None, columns: list[pa.Array] | None) -> None:
        if names is None:
            self.close()
            self.path.unlink(missing_ok=True)
            return
        assert columns is not None
        if self.writer is None:
            self.schema = pa.schema([pa.field(n, c.type) for n, c in zip(names, columns)])
            self.writer = pq.ParquetWriter(self.path, self.schema, compression=COMPRESSION)
        self.writer.write_batch(pa.record_batch(columns, schema=self.schema))

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def convert_to_parquet(
    path: str | Path,
    dest: str | Path,
    *,
    fmt: str | None = None,
    sep: str | None = None,
    name: str | None = None,
    limits: Limits | None = None,
    progress: Progress | None = None,
    sheet: str | None = None,
    decimal: str = ".",
    count_distinct: bool = True,
) -> TableInfo:
    """Read the file at ``path`` and write it to ``dest`` as Parquet, in bounded memory.

    ``sheet`` names the sheet of an Excel workbook (needed when it has several); ``decimal``
    is a text file's decimal mark. What may mean the file was read wrongly (one column whose
    name holds another separator, numbers with decimal commas read as text) is returned in
    ``TableInfo.warnings``.

    ``count_distinct``: count each column's distinct values for the :class:`TableInfo` (one
    more pass; without it, ``distinct`` is None).

    ``dest`` appears only once it is complete (written next to it, then renamed); on any error
    nothing is left behind. ``progress(fraction, message)`` is called as the work goes on; an
    exception it raises (a cancellation) stops the work and cleans up the same way.
    """
    path, dest = Path(path), Path(dest)
    label = name or path.name
    limits = limits or Limits()
    fmt = format_of(name or path.name, fmt)
    if not path.exists():
        raise DataError(f"{label}: no such file")
    if path.stat().st_size == 0:
        raise DataError(f"{label}: the file is empty")
    report = progress or (lambda fraction, message: None)
    token = uuid.uuid4().hex[:12]
    staging = dest.parent / f".tmp-{token}-staging.parquet"
    final = dest.parent / f".tmp-{token}.parquet"
    dest.parent.mkdir(parents=True, exist_ok=True)
    source = open_source(
        path, fmt=fmt, label=label, limits=limits, sep=sep, sheet=sheet, decimal=decimal
    )
    try:
        report(0.0, "checking the file")
        tally = _Tally(label, limits)
        if isinstance(source, ParquetSource):
            _write_typed(source, final, tally, lambda f, m: report(0.85 * f, m))
        else:
            writer = _StagingWriter(staging)
            try:
                _read_all(source, tally, lambda f, m: report(0.7 * f, m), writer)
            finally:
                writer.close()
            tally.check_rows()
            report(0.7, "storing each column with its type")
            _finish(staging, final, source.names, tally, lambda f, m: report(0.7 + 0.15 * f, m))
        distinct: list[int | None] = [None] * len(source.names)
        if count_distinct:  # for the upload's column list; a command reading a file needs none
            report(0.85, "counting distinct values")
            distinct = list(
                _distinct_counts(final, source.names, lambda f, m: report(0.85 + 0.14 * f, m))
            )
        os.chmod(final, 0o600)  # raw data: the service's user alone, as the upload itself
        os.replace(final, dest)
    except BaseException:
        final.unlink(missing_ok=True)
        raise
    finally:
        staging.unlink(missing_ok=True)
        with contextlib.suppress(Exception):
            getattr(source, "close", lambda: None)()
    columns = tuple(
        ColumnInfo(n, KIND_NAMES[k], m, d)
        for n, k, m, d in zip(source.names, tally.kinds, tally.missing, distinct, strict=True)
    )
    return TableInfo(
        tally.rows,
        columns,
        fmt,
        source.encoding,
        source.separator,
        tuple(source.read_warnings),
        sheet if fmt == "excel" else None,
    )


def _write_typed(source: ParquetSource, final: Path, tally: _Tally, report: Progress) -> None:
    """A Parquet upload keeps its types: written in one pass, once the columns' missing counts
    (which decide pandas' integer type) are known from the file's statistics or a read of the
    integer columns alone."""
    missing = source.null_counts()
    for i, (count, kind) in enumerate(zip(missing, source.kinds, strict=True)):
        if count is None:
            missing[i] = _count_missing(source, i) if kind == INT else 0
    schema = final_schema(source.names, source.kinds, [m or 0 for m in missing])
    with pq.ParquetWriter(final, schema, compression=COMPRESSION) as writer:

        def sink(names: list[str] | None, columns: list[pa.Array] | None) -> None:
            writer.write_batch(pa.record_batch(columns, schema=schema))

        _read_all(source, tally, report, sink)
    tally.check_rows()


def _count_missing(source: ParquetSource, index: int) -> int:
    name = source._file.schema_arrow.names[source._keep[index]]
    return sum(
        batch.column(0).null_count
        for batch in source._file.iter_batches(columns=[name], use_threads=False)
    )


def _finish(staging: Path, final: Path, names: list[str], tally: _Tally, report: Progress) -> None:
    """Cast the staged text columns to their types, one row group at a time."""
    if all(k in (TEXT, EMPTY) for k in tally.kinds):
        os.replace(staging, final)  # all text: the staged file is the table
        return
    schema = final_schema(names, tally.kinds, tally.missing)
    staged = pq.ParquetFile(staging)
    groups = staged.metadata.num_row_groups
    with pq.ParquetWriter(final, schema, compression=COMPRESSION) as writer:
        for g in range(groups):
            group = staged.read_row_group(g, use_threads=False)
            columns = [cast_column(group.column(i), kind) for i, kind in enumerate(tally.kinds)]
            writer.write_table(pa.Table.from_arrays(columns, schema=schema))
            report((g + 1) / groups, f"stored {g + 1:,} of {groups:,} blocks")


# Distinct values gathered batch by batch up to this many; a column with more (an id, a
# measurement) is counted by sorting instead. Arrow's hash tables for tens of millions of
# distinct values take several GB (count_distinct on 20 million integers: 7 GB), a sort of the
# column about three times the column.
HASHED_DISTINCT = 2_000_000


def _distinct_counts(final: Path, names: list[str], report: Progress) -> list[int]:
    """Distinct values per column (nulls not counted), one column in memory at a time.

    Text is read as a dictionary: a batch of a million rows repeating one long value holds it
    once, not a million times."""
    parquet = pq.ParquetFile(final)
    text = [f.name for f in parquet.schema_arrow if pa.types.is_string(f.type)]
    hashed = pq.ParquetFile(final, read_dictionary=text)
    counts = []
    for i, name in enumerate(names):
        counts.append(_distinct_count(hashed, name, parquet))
        report((i + 1) / len(names), f"counted distinct values of {i + 1} of {len(names)} columns")
    return counts


def _distinct_count(hashed: pq.ParquetFile, name: str, parquet: pq.ParquetFile) -> int:
    seen: list[pa.Array] = []
    total = 0
    for batch in hashed.iter_batches(batch_size=1_000_000, columns=[name], use_threads=False):
        values = batch.column(0)
        if pa.types.is_dictionary(values.type):
            used = pc.unique(values.indices.drop_null())
            found = pc.unique(values.dictionary.take(used)).drop_null()
        else:
            found = pc.unique(values.drop_null())
        seen.append(found)
        total += len(found)
        if total > HASHED_DISTINCT:
            break
    else:
        return len(pc.unique(pa.chunked_array(seen))) if total else 0
    del seen
    values = parquet.read(columns=[name], use_threads=False).column(0).drop_null()
    nan = 0
    if pa.types.is_floating(values.type):
        is_nan = pc.is_nan(values)
        if pc.any(is_nan).as_py():
            nan, values = 1, values.filter(pc.invert(is_nan))
    if len(values) == 0:
        return nan
    ordered = values.take(pc.sort_indices(values))
    del values
    changes = pc.sum(pc.not_equal(ordered.slice(1), ordered.slice(0, len(ordered) - 1)))
    return 1 + (changes.as_py() or 0) + nan


# What a table read for a command (not uploaded) may hold: any number of cells and row groups
# of any size, the other limits an upload's.
READ_LIMITS = Limits(max_cells=10**12, max_expanded_bytes=2**62)


def load_table(
    source: str | Path | BinaryIO,
    *,
    fmt: str | None = None,
    sep: str | None = None,
    name: str | None = None,
    na_values: Sequence[str] | None = None,
    limits: Limits | None = None,
    sheet: str | None = None,
    decimal: str = ".",
) -> pd.DataFrame:
    """Read a whole table into pandas with the upload's rules (types, limits, messages); a
    Parquet file's cells in their own types, as the engines read them
    (:func:`~anonweb.core.io.arrow_cells.arrow_to_pandas`: a timestamp to its fraction of the
    second, a float32 as its shortest text, booleans as booleans)."""
    limits = limits or READ_LIMITS
    if isinstance(source, (str, Path)):
        path = Path(source)
        label = name or str(source)
        if not path.exists():
            raise DataError(f"{label}: no such file")
        if path.is_dir():
            raise DataError(f"{label}: is a directory, not a file")
        if path.stat().st_size == 0:
            raise DataError(f"{label}: the file is empty")
        fmt = format_of(name or path.name, fmt)
        reader = open_source(
            path,
            fmt=fmt,
            label=label,
            limits=limits,
            sep=sep,
            na_values=na_values,
            sheet=sheet,
            decimal=decimal,
        )
    else:
        label = name or getattr(source, "name", None) or "the upload"
        fmt = format_of(name or getattr(source, "name", None), fmt)
        reader = open_source(
            fileobj=source,
            fmt=fmt,
            label=str(label),
            limits=limits,
            sep=sep,
            na_values=na_values,
            sheet=sheet,
            decimal=decimal,
        )
    # a Parquet file's cells keep their types: read as every engine reads them
    typed = isinstance(reader, ParquetSource)
    if isinstance(reader, ParquetSource):
        reader.keep_types = True
    tally = _Tally(str(label), limits)
    chunks: list[list[pa.Array]] = []

    def sink(names: list[str] | None, columns: list[pa.Array] | None) -> None:
        if names is None:
            chunks.clear()
        elif columns is not None:
            chunks.append(columns)

    try:
        _read_all(reader, tally, None, sink)
    finally:
        with contextlib.suppress(Exception):
            getattr(reader, "close", lambda: None)()
    tally.check_rows()
    names = reader.names
    if typed:
        columns = [pa.chunked_array([c[i] for c in chunks]) for i in range(len(names))]
        return table_to_pandas(pa.Table.from_arrays(columns, names=names))
    arrays = [
        cast_column(pa.chunked_array([c[i] for c in chunks], type=chunks[0][i].type), kind)
        for i, kind in enumerate(tally.kinds)
    ]
    table = pa.Table.from_arrays(arrays, schema=final_schema(names, tally.kinds, tally.missing))
    return table.to_pandas()
