"""How a cell of each Arrow type becomes a value in pandas: one definition for every reader.

A Parquet file is read by pyarrow (the pandas engine, the command line), by DuckDB or by Spark,
and each hands its cells over as Arrow. Grouping, hierarchies (which match a value by its text),
the built-in hierarchies (which list values by their text) and the release all work on the
pandas values, so the three readers must give the same value for the same cell, or the same
table has other classes, k and risks on another engine. Every Arrow column goes through
:func:`arrow_to_pandas`:

* integers of any width: ``int64``, or pandas' nullable ``Int64`` when a cell is missing (never
  floats: ``39`` stays ``39``, not ``39.0``);
* ``float32`` (and ``float16``): the ``float64`` of its shortest text, the text DuckDB and Spark
  write for it (``0.1``, not ``0.10000000149011612``: each float32 has one such text, so no two
  values are merged); ``float64`` as it is; a NaN is a missing value, as a null;
* booleans: ``bool``, or the nullable ``boolean`` when a cell is missing (never text);
* timestamps keep their fraction of the second (to the nanosecond); one with a time zone is
  read as the instant in UTC (``datetime64[.., UTC]``): Parquet stores the instant, the zone's
  name is Arrow's metadata alone, which DuckDB and Spark do not read;
* dates: ``datetime.date`` objects; text (of any Arrow string type) and the values of a
  dictionary (categorical) column: Python strings, ``None`` when missing; decimals and
  times as pyarrow gives them (Python objects).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq


def arrow_values(column: pa.Array | pa.ChunkedArray) -> pa.Array | pa.ChunkedArray:
    """The Arrow column in the type whose pandas conversion gives the engines' common values
    (dictionaries decoded, narrow floats through their shortest text, zones to UTC, the
    string types as ``string``)."""
    t = column.type
    if pa.types.is_dictionary(t):
        if isinstance(column, pa.ChunkedArray):
            column = pa.chunked_array(
                [c.dictionary_decode() for c in column.chunks], type=t.value_type
            )
        else:
            column = column.dictionary_decode()
        t = column.type
    if pa.types.is_float16(t) or pa.types.is_float32(t):
        # Arrow writes a float32 as its shortest text that reads back, as DuckDB and Spark do
        return pc.cast(pc.cast(column, pa.string()), pa.float64())
    if pa.types.is_timestamp(t) and t.tz is not None and t.tz != "UTC":
        return column.cast(pa.timestamp(t.unit, "UTC"))
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return column.cast(pa.string())
    return column


def arrow_to_pandas(column: pa.Array | pa.ChunkedArray, name: Any = None) -> pd.Series:
    """A column's cells as pandas values (see the module docstring)."""
    column = arrow_values(column)
    t = column.type
    missing = column.null_count > 0
    if pa.types.is_integer(t):
        if missing:
            return pd.Series(column.to_pandas(types_mapper={t: pd.Int64Dtype()}.get), name=name)
        return pd.Series(column.to_numpy().astype(np.int64, copy=False), name=name)
    if pa.types.is_boolean(t):
        if missing:
            return pd.Series(column.to_pandas(types_mapper={t: pd.BooleanDtype()}.get), name=name)
        return pd.Series(column.to_numpy(zero_copy_only=False).astype(bool), name=name)
    if pa.types.is_timestamp(t):
        # the unit kept (pandas holds s, ms, us and ns): no value moved to another instant
        return pd.Series(column.to_pandas(coerce_temporal_nanoseconds=False), name=name)
    out = column.to_pandas(date_as_object=True)
    return pd.Series(out, name=name)


def table_to_pandas(table: pa.Table | pa.RecordBatch) -> pd.DataFrame:
    """An Arrow table's columns through :func:`arrow_to_pandas`, in order."""
    names = [str(n) for n in table.schema.names]
    data = {n: arrow_to_pandas(table.column(i), n) for i, n in enumerate(names)}
    frame = pd.DataFrame(data, columns=names)
    return frame.reset_index(drop=True)


def index_of(column: pa.Array | pa.ChunkedArray) -> pd.Index:
    """Distinct values (an Arrow dictionary, a DISTINCT's result) as a pandas index of the
    values :func:`arrow_to_pandas` gives."""
    values = arrow_to_pandas(column)
    return pd.Index(values, dtype=values.dtype)


def with_missing(column: pa.Array | pa.ChunkedArray) -> pd.Index:
    """:func:`index_of` the values with one missing value after them, in the values' own
    type (``Int64`` integers, ``boolean``, ``NaT`` timestamps, ``None`` text, NaN floats)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_dictionary(column.type):
        column = column.dictionary_decode()
    return index_of(pa.concat_arrays([column, pa.nulls(1, type=column.type)]))


def rewrite_parquet(path: str | Path, dest: str | Path, *, batch_rows: int = 500_000) -> list[str]:
    """The Parquet file ``path`` written to ``dest`` with each column in the type
    :func:`arrow_values` gives it and the pandas metadata of the dtype :func:`arrow_to_pandas`
    reads it in (``Int64``, ``boolean``), so ``pandas.read_parquet`` and DuckDB read ``dest``'s
    cells as :func:`read_parquet` reads ``path``'s; a batch at a time. Returns the columns
    (a pandas index stored as a column left out)."""
    import json

    parquet = pq.ParquetFile(str(path))
    schema = parquet.schema_arrow
    names = [n for n in schema.names if not str(n).startswith("__index_level_")]
    missing = dict.fromkeys(names, 0)
    for batch in parquet.iter_batches(batch_size=batch_rows, columns=names):
        for n in names:
            missing[n] += batch.column(n).null_count
    fields, dtypes = [], []
    for n in names:
        t = arrow_values(pa.nulls(0, type=schema.field(n).type)).type
        fields.append(pa.field(n, t))
        nullable = missing[n] > 0
        dtype = "Int64" if pa.types.is_integer(t) and nullable else None
        dtype = "boolean" if pa.types.is_boolean(t) and nullable else dtype
        dtypes.append(dtype)
    sample = pd.DataFrame({n: pd.Series([], dtype=d or object) for n, d in zip(names, dtypes)})
    doc = json.loads(pa.Schema.from_pandas(sample, preserve_index=False).metadata[b"pandas"])
    doc["columns"] = [c for c, d in zip(doc["columns"], dtypes) if d is not None]
    target = pa.schema(fields, metadata={b"pandas": json.dumps(doc).encode()})
    with pq.ParquetWriter(str(dest), target) as writer:
        for batch in parquet.iter_batches(batch_size=batch_rows, columns=names):
            arrays = [arrow_values(batch.column(n)) for n in names]
            writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=target))
    return [str(n) for n in names]


def read_parquet(
    path: str | Path, columns: Sequence[str] | None = None, *, filesystem: Any = None
) -> pd.DataFrame:
    """A Parquet file (or a folder of them; on pyarrow's ``filesystem`` if given) read whole,
    each column through :func:`arrow_to_pandas` (a pandas index stored as a column is not
    data: left out)."""
    table = pq.read_table(
        str(path), columns=None if columns is None else list(columns), filesystem=filesystem
    )
    index = [n for n in table.schema.names if str(n).startswith("__index_level_")]
    if index and columns is None:
        table = table.drop_columns(index)
    return table_to_pandas(table)
