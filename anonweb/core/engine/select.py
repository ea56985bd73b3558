"""Which engine reads a table: ``ANONWEB_ENGINE=auto|pandas|duckdb|spark``.

``auto`` keeps a table in memory (pandas) below ``ANONWEB_ENGINE_AUTO_ROWS`` rows (default one
million) and streams it with DuckDB from there; a table already in memory stays with pandas.
Spark is chosen only by name: it needs a cluster (or a local JVM) someone decided to run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from anonweb.core.engine.base import Engine, Source, env_engine, source_format
from anonweb.core.errors import ParameterError

ENGINES = ("pandas", "duckdb", "spark")
DEFAULT_AUTO_ROWS = 1_000_000
# a CSV file's rows are not known without reading it: about this many bytes a row
_CSV_BYTES_PER_ROW = 64


def auto_rows() -> int:
    raw = os.environ.get("ANONWEB_ENGINE_AUTO_ROWS", "")
    try:
        return int(raw) if raw.strip() else DEFAULT_AUTO_ROWS
    except ValueError:
        raise ParameterError(
            f"ANONWEB_ENGINE_AUTO_ROWS must be a whole number of rows, got {raw!r}"
        ) from None


def in_memory_limit(name: str | None = None) -> int | None:
    """The most rows a step that runs in memory only may read, with engine ``name`` (None:
    the environment's choice): none when the pandas engine is chosen by name (the operator
    keeps every table in memory), else the rows from which ``auto`` streams a table."""
    chosen = (name or env_engine()).strip().lower()
    return None if chosen == "pandas" else auto_rows()


def estimated_rows(source: Source) -> int:
    """Rows of a source, cheaply: Parquet metadata, or a CSV file's size."""
    if isinstance(source, pd.DataFrame):
        return len(source)
    path = Path(source)
    if source_format(source) == "parquet":
        import pyarrow.parquet as pq

        files = sorted(path.glob("*.parquet")) if path.is_dir() else [path]
        return sum(pq.ParquetFile(f).metadata.num_rows for f in files)
    return path.stat().st_size // _CSV_BYTES_PER_ROW


def choose_engine(name: str | None, source: Source) -> str:
    """The engine's name for ``name`` (None: the environment's choice) and this source."""
    chosen = (name or env_engine()).strip().lower()
    if chosen == "auto":
        if isinstance(source, pd.DataFrame) or not Path(source).exists():
            return "pandas"  # reading it in memory says best what is wrong with the path
        if Path(source).suffix.lower() not in (".parquet", ".pq", ".csv", ".tsv", ".txt"):
            return "pandas"  # Excel and the other formats only pandas reads
        try:
            rows = estimated_rows(source)
        except (OSError, ValueError):  # not a readable Parquet file (pyarrow's ArrowInvalid)
            return "pandas"  # reading it in memory gives the error a person can act on
        return "duckdb" if rows >= auto_rows() else "pandas"
    if chosen not in ENGINES:
        raise ParameterError(f"unknown engine {chosen!r}: use auto, {', '.join(ENGINES)}")
    return chosen


def make_engine(
    name: str | None,
    source: Source,
    *,
    memory_limit: str | None = None,
    temp_directory: str | Path | None = None,
) -> Engine:
    """An engine ready to read ``source``; ``memory_limit`` and ``temp_directory`` are
    DuckDB's (its memory ceiling, e.g. ``2GB``, and where it spills beyond it)."""
    chosen = choose_engine(name, source)
    if chosen == "duckdb":
        from anonweb.core.engine.duckdb_engine import DuckDBEngine

        return DuckDBEngine(
            memory_limit=memory_limit or os.environ.get("ANONWEB_DUCKDB_MEMORY_LIMIT"),
            temp_directory=temp_directory or os.environ.get("ANONWEB_DUCKDB_TEMP_DIRECTORY"),
        )
    if chosen == "spark":
        from anonweb.core.engine.spark_engine import SparkEngine

        return SparkEngine()
    from anonweb.core.engine.pandas_engine import PandasEngine

    return PandasEngine()
