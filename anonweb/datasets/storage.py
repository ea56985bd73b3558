"""Where dataset files live: ``datasets/<storage_key>/`` in the application's storage
(:mod:`anonweb.common.files`: ``MEDIA_ROOT`` on the local disk by default, or an S3 bucket).

The Parquet table is read where it is stored: pyarrow opens it through the storage's location
(a local path, or pyarrow's S3 file system), so a read of some columns fetches only those."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pandas as pd
from django.conf import settings
from django.core.cache import cache

from anonweb.common.files import files
from anonweb.core.errors import DataError


def dataset_prefix(storage_key) -> str:
    """The folder of a dataset's objects in the storage."""
    return f"datasets/{storage_key}"


def parquet_name(storage_key) -> str:
    return f"{dataset_prefix(storage_key)}/data.parquet"


def dataset_dir(storage_key) -> Path:
    """The dataset's folder on the local disk (the local backend's layout)."""
    return Path(settings.MEDIA_ROOT) / "datasets" / str(storage_key)


def parquet_path(storage_key) -> Path:
    return dataset_dir(storage_key) / "data.parquet"


def dataset_files_remove(storage_key) -> None:
    """Delete every object of the dataset (on a versioned bucket, every version), and what was
    read from it and kept (:func:`load_distinct_kept`, :func:`load_head_kept`,
    :func:`kept_view`)."""
    files().delete_prefix(dataset_prefix(storage_key))
    cache.delete_many([_kept_key(storage_key, part) for part in KEPT_PARTS])


def dataset_files_exist(storage_key) -> bool:
    return files().prefix_exists(dataset_prefix(storage_key))


def _existing_parquet(storage_key) -> tuple[str, object]:
    """The stored table's location for pyarrow: (path, file system or None for local)."""
    name = parquet_name(storage_key)
    if not files().exists(name):
        raise DataError("the raw data of this dataset has been purged; its releases remain")
    return files().arrow_location(name)


def stored_parquet(storage_key) -> tuple[str, object]:
    """Where the dataset's Parquet copy is, for an engine: (path, file system or None for a
    local file)."""
    return _existing_parquet(storage_key)


def load_frame(storage_key, columns: list[str] | None = None) -> pd.DataFrame:
    """The table, or only ``columns`` of it (Parquet reads just those), each cell as every
    engine reads it (:func:`~anonweb.core.io.arrow_cells.read_parquet`)."""
    from anonweb.core.io.arrow_cells import read_parquet

    path, fs = _existing_parquet(storage_key)
    return read_parquet(path, columns, filesystem=fs)


def load_histogram(storage_key, quasi_identifiers: list[str], sensitive: list[str]):
    """The stored table's :class:`~anonweb.core.engine.histogram.Histogram` read by the
    engine ``ANONWEB_ENGINE`` picks for it (DuckDB from ``ANONWEB_ENGINE_AUTO_ROWS`` rows:
    memory of the cells, not the rows), or None when that engine is pandas (a table that fits
    in memory) or the file is not on the local disk."""
    from anonweb.core.engine.select import choose_engine, make_engine

    path, fs = _existing_parquet(storage_key)
    if fs is not None or choose_engine(None, path) == "pandas":
        return None
    engine = make_engine(None, path)
    try:
        return engine.histogram(path, quasi_identifiers, sensitive)
    finally:
        engine.close()


def load_distinct(storage_key, column: str) -> pd.Series:
    """The distinct values of one column, missing values left out: what hierarchy checks and
    suggestions need, without reading the other columns or keeping every row."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path, fs = _existing_parquet(storage_key)
    table = pq.read_table(path, columns=[column], filesystem=fs)
    distinct = pc.drop_null(pc.unique(table.column(0)))
    frame = table.schema.empty_table().to_pandas()  # the column's pandas type, from the metadata
    values = pd.Series(distinct.to_pandas(), name=column)
    if values.dtype != frame[column].dtype:
        values = values.astype(frame[column].dtype)
    return values


# What pages read from a stored table on every view, kept in the cache: the table never changes
# under its storage key. They are the source's values, so they go with its files
# (:func:`dataset_files_remove`); the time only bounds the space taken by what is not opened.
KEPT_SECONDS = 24 * 3600
KEPT_PARTS = ("distinct", "head", "preview-html")


def _kept_key(storage_key, part: str) -> str:
    return f"anonweb:dataset:{storage_key}:{part}"


def load_distinct_kept(storage_key, columns) -> dict[str, pd.Series]:
    """:func:`load_distinct` of each of ``columns``, each column read once and kept."""
    key = _kept_key(storage_key, "distinct")
    kept = cache.get(key) or {}
    missing = [c for c in dict.fromkeys(columns) if c not in kept]
    if missing:
        kept = {**kept, **{c: load_distinct(storage_key, c) for c in missing}}
        cache.set(key, kept, KEPT_SECONDS)
    return {c: kept[c] for c in columns}


def load_head_kept(storage_key, rows: int) -> pd.DataFrame:
    """:func:`load_head`, read once and kept."""
    key = _kept_key(storage_key, "head")
    kept = cache.get(key)
    if isinstance(kept, tuple) and kept[0] == rows:
        return kept[1].copy()
    head = load_head(storage_key, rows)
    cache.set(key, (rows, head), KEPT_SECONDS)
    return head.copy()


def kept_view(storage_key, part: str, rows: int, build: Callable[[], str]) -> str:
    """What ``build`` makes of the first ``rows`` rows of the stored table (a page's rendered
    preview of them), made once and kept with the other parts read from the table."""
    if part not in KEPT_PARTS:
        raise ValueError(f"unknown kept part {part!r}: {', '.join(KEPT_PARTS)}")
    key = _kept_key(storage_key, part)
    kept = cache.get(key)
    if isinstance(kept, tuple) and kept[0] == rows:
        return kept[1]
    made = build()
    cache.set(key, (rows, made), KEPT_SECONDS)
    return made


def load_head(storage_key, rows: int) -> pd.DataFrame:
    """The first ``rows`` rows without reading the whole table (pages show a preview on every
    view; a large upload must not be loaded for that)."""
    import pyarrow.parquet as pq

    path, fs = _existing_parquet(storage_key)
    parquet = pq.ParquetFile(path, filesystem=fs)
    batch = next(parquet.iter_batches(batch_size=rows), None)
    if batch is None:
        return parquet.schema_arrow.empty_table().to_pandas()
    return batch.to_pandas()


def load_value_counts(storage_key, column: str) -> tuple[pd.Series, list[int], int]:
    """One column's distinct values (its pandas type kept), the records holding each, and the
    records with no value: what a hierarchy preview needs, without the other columns."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    path, fs = _existing_parquet(storage_key)
    table = pq.read_table(path, columns=[column], filesystem=fs)
    col = table.column(0)
    missing = int(col.null_count)
    counted = pc.value_counts(pc.drop_null(col))
    values = counted.field("values").to_pandas()
    frame = table.schema.empty_table().to_pandas()
    values = pd.Series(values, name=column)
    if values.dtype != frame[column].dtype:
        values = values.astype(frame[column].dtype)
    return values, counted.field("counts").to_pylist(), missing
