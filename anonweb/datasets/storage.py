"""Where dataset files live: ``MEDIA_ROOT/datasets/<storage_key>/``, written atomically."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pandas as pd
from django.conf import settings

from anonweb.core.errors import DataError


def dataset_dir(storage_key) -> Path:
    return Path(settings.MEDIA_ROOT) / "datasets" / str(storage_key)


def parquet_path(storage_key) -> Path:
    return dataset_dir(storage_key) / "data.parquet"


def write_parquet_atomic(df: pd.DataFrame, path: Path) -> None:
    """Write to a temporary file in the same directory, then rename: a reader never sees half
    a file, and a crash leaves only a temporary file behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".parquet")
    os.close(fd)
    try:
        df.to_parquet(tmp, index=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _existing_parquet(storage_key) -> Path:
    path = parquet_path(storage_key)
    if not path.exists():
        raise DataError("the raw data of this dataset has been purged; its releases remain")
    return path


def load_frame(storage_key, columns: list[str] | None = None) -> pd.DataFrame:
    """The table, or only ``columns`` of it (Parquet reads just those)."""
    return pd.read_parquet(_existing_parquet(storage_key), columns=columns)


def load_distinct(storage_key, column: str) -> pd.Series:
    """The distinct values of one column, missing values left out: what hierarchy checks and
    suggestions need, without reading the other columns or keeping every row."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(_existing_parquet(storage_key), columns=[column])
    distinct = pc.drop_null(pc.unique(table.column(0)))
    frame = table.schema.empty_table().to_pandas()  # the column's pandas type, from the metadata
    values = pd.Series(distinct.to_pandas(), name=column)
    if values.dtype != frame[column].dtype:
        values = values.astype(frame[column].dtype)
    return values


def load_head(storage_key, rows: int) -> pd.DataFrame:
    """The first ``rows`` rows without reading the whole table (pages show a preview on every
    view; a large upload must not be loaded for that)."""
    import pyarrow.parquet as pq

    parquet = pq.ParquetFile(_existing_parquet(storage_key))
    batch = next(parquet.iter_batches(batch_size=rows), None)
    if batch is None:
        return parquet.schema_arrow.empty_table().to_pandas()
    return batch.to_pandas()


def load_value_counts(storage_key, column: str) -> tuple[pd.Series, list[int], int]:
    """One column's distinct values (its pandas type kept), the records holding each, and the
    records with no value: what a hierarchy preview needs, without the other columns."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(_existing_parquet(storage_key), columns=[column])
    col = table.column(0)
    missing = int(col.null_count)
    counted = pc.value_counts(pc.drop_null(col))
    values = counted.field("values").to_pandas()
    frame = table.schema.empty_table().to_pandas()
    values = pd.Series(values, name=column)
    if values.dtype != frame[column].dtype:
        values = values.astype(frame[column].dtype)
    return values, counted.field("counts").to_pylist(), missing
