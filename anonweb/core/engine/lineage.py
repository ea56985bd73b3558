"""A release's lineage written by an engine: which source row each released row is.

The engine writes the release with one more column (named as :data:`LINEAGE_WRITTEN`, apart from
the table's columns; the row's position
in the source as read: see :class:`~anonweb.core.engine.base.NodeRelease`), and
:func:`split_lineage` streams that file, row group by row group, into the release as published
(without the column) and the private lineage file (:data:`LINEAGE_COLUMN` alone), row for row in
the same order. The order is the written one: a shuffled release's permutation is in the
lineage, never its seed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

LINEAGE_COLUMN = "source_row"  # the lineage file's column: the source row of each released row
# the column an engine writes it in, then split off (with underscores before it while the
# table has a column of that name: see :func:`~anonweb.core.engine.base.fresh_name`)
LINEAGE_WRITTEN = "__anonweb_source_row"


def split_lineage(
    written: str | Path, out: str | Path, lineage: str | Path, column: str = LINEAGE_WRITTEN
) -> int:
    """``written`` (a Parquet file or a folder of them, with the lineage in ``column``: the name
    the engine was given, apart from the table's own columns) as the release at ``out`` and its
    lineage at ``lineage``, both single Parquet files; their rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = Path(written)
    files = sorted(path.glob("*.parquet")) if path.is_dir() else [path]
    release: Any = None
    rows: Any = None
    count = 0
    try:
        for f in files:
            reader = pq.ParquetFile(str(f))
            names = [n for n in reader.schema_arrow.names if n != column]
            for batch in reader.iter_batches():
                table = pa.Table.from_batches([batch])
                # pandas' own note on the columns would still name the lineage column
                kept = table.select(names).replace_schema_metadata(None)
                source = table.select([column]).rename_columns([LINEAGE_COLUMN])
                source = source.cast(pa.schema([(LINEAGE_COLUMN, pa.int64())]))
                if release is None:
                    release = pq.ParquetWriter(str(out), kept.schema)
                    rows = pq.ParquetWriter(str(lineage), source.schema)
                release.write_table(kept)
                rows.write_table(source)
                count += table.num_rows
        if release is None:  # no rows: the files still say what the release's columns are
            schema = pq.read_schema(str(files[0])) if files else pa.schema([])
            names = [n for n in schema.names if n != column]
            empty = schema.empty_table().select(names).replace_schema_metadata(None)
            pq.write_table(empty, str(out))
            pq.write_table(pa.table({LINEAGE_COLUMN: pa.array([], pa.int64())}), str(lineage))
    finally:
        if release is not None:
            release.close()
            rows.close()
    return count
