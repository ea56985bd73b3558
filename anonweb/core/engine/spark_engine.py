"""The cluster engine: the same queries as DuckDB's through PySpark.

The master comes from ``ANONWEB_SPARK_MASTER`` (default ``local[2]``), or ``SPARK_REMOTE`` for
Spark Connect; the driver's memory from ``ANONWEB_SPARK_DRIVER_MEMORY`` (default ``3g``: the
histogram of 10⁷ rows has millions of cells, and 1g, Spark's default, is not enough for them);
the parts a grouping is shuffled into from ``ANONWEB_SPARK_SHUFFLE_PARTITIONS`` (default 8,
merged by adaptive execution; given, exactly that many: executors of 1 GiB send the driver the
10⁷-row histogram's cells in 64 parts, not 8). One SparkSession serves the process (a JVM takes seconds to start); only the
histogram (one row per distinct combination) is collected to the driver, and the release is
written by the executors as a folder of Parquet files.
"""

from __future__ import annotations

import contextlib
import gc
import os
import tempfile
import warnings
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.engine.base import (
    NodeRelease,
    Source,
    WriteResult,
    csv_as_parquet,
    fresh_name,
    require_lineage_apart,
    source_format,
)
from anonweb.core.engine.columns import ColumnCounts, NumberSummary, extreme_ranges
from anonweb.core.engine.duckdb_engine import _from_arrow
from anonweb.core.engine.histogram import Histogram, require_source_columns
from anonweb.core.io.arrow_cells import index_of, table_to_pandas
from anonweb.core.risk.classes import SUPPRESSED

DEFAULT_MASTER = "local[2]"


def spark_session(master: str | None = None) -> Any:
    """The process's SparkSession (created on first use with ``master``)."""
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    builder = SparkSession.builder.appName("anonweb")
    remote = os.environ.get("SPARK_REMOTE")
    if remote and master is None:
        builder = builder.remote(remote)
    else:
        builder = builder.master(master or os.environ.get("ANONWEB_SPARK_MASTER", DEFAULT_MASTER))
        partitions = os.environ.get("ANONWEB_SPARK_SHUFFLE_PARTITIONS", "").strip()
        if partitions:
            # as many parts as asked: each executor sends the driver one part's cells at a
            # time, which must fit in its heap (adaptive execution would merge them again)
            builder = builder.config("spark.sql.adaptive.coalescePartitions.enabled", "false")
        builder = (
            builder.config("spark.sql.execution.arrow.pyspark.enabled", "true")
            .config("spark.sql.shuffle.partitions", partitions or "8")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.session.timeZone", "UTC")
            # timestamps written as Parquet's microseconds, not the legacy INT96, which pyarrow
            # reads as nanoseconds (a file Spark itself then refuses to read back)
            .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
            # the histogram (one row per cell: millions for a large table) is collected here
            .config("spark.driver.memory", os.environ.get("ANONWEB_SPARK_DRIVER_MEMORY", "3g"))
            .config("spark.driver.maxResultSize", "0")
        )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


class SparkEngine:
    name = "spark"

    def __init__(self, *, master: str | None = None, session: Any = None) -> None:
        self.spark = session if session is not None else spark_session(master)
        # CSV sources converted to Parquet (csv_as_parquet): a local folder, which a local
        # master's executors read; a cluster's would need it on storage they share
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    def _frame(self, source: Source) -> Any:
        return as_pandas_reads(self._raw_frame(source))

    def _raw_frame(self, source: Source) -> Any:
        kind = source_format(source)
        if isinstance(source, pd.DataFrame):
            return self.spark.createDataFrame(source)
        if kind != "parquet":  # a CSV read as every engine reads it
            if self._tmp is None:
                self._tmp = tempfile.TemporaryDirectory(prefix="anonweb-spark-")
            source = csv_as_parquet(source, self._tmp.name)
        return self.spark.read.parquet(str(Path(source).resolve()))

    def columns(self, source: Source) -> list[str]:
        return [str(c) for c in self._frame(source).columns]

    def row_count(self, source: Source) -> int:
        return int(self._frame(source).count())

    def histogram(
        self,
        source: Source,
        qi: Sequence[str],
        sensitive: Sequence[str] = (),
        weights: str | None = None,
    ) -> Histogram:
        from pyspark.sql import functions as F

        df = self._frame(source)
        cols = list(qi) + list(sensitive)
        require_source_columns(list(df.columns), qi, sensitive, weights)
        # the count's and the weight's names, other than any column's
        n = fresh_name("__n", [*cols, weights or ""])
        w = fresh_name("__w", [*cols, weights or "", n])
        aggs = [F.count(F.lit(1)).alias(n)]
        if weights:
            aggs.append(F.sum(F.col(weights).cast("double")).alias(w))
        cells = df.groupBy(*[F.col(c) for c in cols]).agg(*aggs)
        table = _to_arrow(cells)
        return _from_arrow(table, list(qi), list(sensitive), bool(weights), n=n, w=w)

    def write_release(self, source: Source, node: NodeRelease, out: str | Path) -> WriteResult:
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        df = self._raw_frame(source)
        names = list(df.columns)
        require_lineage_apart(node, names)
        if node.lineage is not None:  # numbered from the file's own rows (its metadata)
            df = self._numbered(source, df, node.lineage)
        df = as_pandas_reads(df)
        qis = list(node.quasi_identifiers)
        mapped = {m.column for m in node.mappings}
        for i, m in enumerate(node.mappings):
            mapping = self.spark.createDataFrame(
                m.frame(key=f"__v{i}", label=f"__g{i}").astype({f"__g{i}": object}),
                schema=f"__v{i} {dict(df.dtypes)[m.column]}, __g{i} string",
            )
            on = df[m.column].eqNullSafe(mapping[f"__v{i}"])
            df = df.join(F.broadcast(mapping), on, "left").drop(m.column, f"__v{i}")
            df = df.withColumnRenamed(f"__g{i}", m.column)
        drop = F.lit(False)
        if node.suppress_below > 0:
            size = F.count(F.lit(1)).over(Window.partitionBy(*[F.col(q) for q in qis]))
            drop = drop | (size < int(node.suppress_below))
        # the flags' names, other than any column's (a column called so would be read instead)
        flag = fresh_name("__drop", list(df.columns))
        if node.suppressed is not None and len(node.suppressed):
            listed = fresh_name("__sup", list(df.columns))
            sup = self.spark.createDataFrame(
                node.suppressed[qis].astype(object).assign(**{listed: True}),
                schema=", ".join(f"`{q}` string" for q in qis) + f", `{listed}` boolean",
            )
            on = None
            for q in qis:
                cond = df[q].eqNullSafe(sup[q])
                on = cond if on is None else on & cond
            df = df.join(F.broadcast(sup), on, "left")
            for q in qis:
                df = df.drop(sup[q])
            drop = drop | F.col(listed).isNotNull()
        df = df.withColumn(flag, drop)
        out_cols = [
            F.when(F.col(flag), F.lit(SUPPRESSED)).otherwise(F.col(c).cast("string")).alias(c)
            if c in mapped
            else F.col(c)
            for c in [*node.kept(names), *([node.lineage] if node.lineage else [])]
        ]
        df = df.cache()
        try:
            with _collected_sockets():
                written = df.select(*out_cols)
                if node.shuffle_seed is not None:
                    written = written.orderBy(F.rand(node.shuffle_seed % (2**63)))
                written.write.mode("errorifexists").parquet(str(Path(out).resolve()))
                row = df.agg(
                    F.count(F.lit(1)), F.sum(F.when(F.col(flag), 1).otherwise(0))
                ).collect()[0]
        finally:
            df.unpersist()
        return WriteResult(str(out), int(row[0]), int(row[1] or 0))

    def _numbered(self, source: Source, df: Any, column: str) -> Any:
        """``df`` with ``column``, each row's position in the table as the other engines read
        it: its row number in its Parquet file (Spark's ``_metadata.row_index``), after the
        rows of the files before it in a folder (in name order)."""
        import pyarrow.parquet as pq
        from pyspark.sql import functions as F

        if source_format(source) != "parquet" or isinstance(source, pd.DataFrame):
            raise ValueError(
                "the Spark engine numbers the rows of Parquet files, not of a CSV file or a "
                "table: convert it to Parquet to keep the release's lineage"
            )
        path = Path(source)
        files = sorted(path.glob("*.parquet")) if path.is_dir() else [path]
        starts, start = [], 0
        for f in files:
            starts.append((f.name, start))
            start += int(pq.ParquetFile(str(f)).metadata.num_rows)
        # the columns added to number the rows, named apart from the table's (and its
        # metadata read as such even where the table has a column called _metadata)
        taken = [*df.columns, column]
        file, index, first = (fresh_name(n, taken) for n in ("__file", "__i", "__start"))
        offsets = self.spark.createDataFrame(starts, schema=f"`{file}` string, `{first}` long")
        meta = df.metadataColumn("_metadata")
        name = F.element_at(F.split(meta.getField("file_path"), "/"), -1)
        numbered = df.select("*", name.alias(file), meta.getField("row_index").alias(index))
        numbered = numbered.join(F.broadcast(offsets), file)
        return numbered.withColumn(column, F.col(index) + F.col(first)).drop(file, index, first)

    def sample_rows(
        self, source: Source, columns: Sequence[str], n: int, seed: int
    ) -> pd.DataFrame:
        """``n`` rows drawn at random without replacement (all when there are fewer): the
        rows with the ``n`` smallest random keys for ``seed`` (Spark keeps the smallest of each
        partition, never the whole table, on the driver)."""
        from pyspark.sql import functions as F

        df = self._frame(source).select(*[F.col(c) for c in columns])
        picked = df.orderBy(F.rand(seed % (2**63))).limit(int(n))
        return table_to_pandas(_to_arrow(picked))

    def ranges(self, source: Source, columns: Sequence[str]) -> dict[str, float]:
        """Each numeric column's range (largest less smallest value), over every row."""
        from pyspark.sql import functions as F

        if not columns:
            return {}
        df = self._frame(source)
        parts = [
            f(c).alias(f"__{i}{end}")
            for i, c in enumerate(columns)
            for f, end in ((F.max, "hi"), (F.min, "lo"))
        ]
        return extreme_ranges(_to_arrow(df.agg(*parts)), columns)

    def numeric_columns(self, source: Source, columns: Sequence[str]) -> list[str]:
        kinds = dict(self._frame(source).dtypes)
        return [c for c in columns if kinds[c] in _NUMERIC]

    def column_counts(
        self, source: Source, *, values: Sequence[str], numbers: Sequence[str]
    ) -> dict[str, ColumnCounts]:
        """One job for the rows, the blanks of ``values`` and the summaries of the numeric
        columns of ``numbers``, then one grouping per column of ``values`` (a blank is null
        or, in a column of floats, NaN: pandas reads both as missing)."""
        from pyspark.sql import functions as F

        df = self._frame(source)
        kinds = dict(df.dtypes)
        names = list(dict.fromkeys([*values, *numbers]))
        present = {c: _present(c) for c in values}
        summed = [c for c in numbers if kinds[c] in _NUMERIC]
        parts = [F.count(F.lit(1))]
        parts += [F.count(F.when(present[c], 1)) for c in values]
        for c in summed:
            x = F.col(c).cast("double")
            keep = _finite(x)
            kept = F.when(keep, x)
            parts += [
                F.count(kept),
                F.min(kept),
                F.max(kept),
                F.min(F.when(keep, (x == F.floor(x)).cast("int"))),
                F.avg(kept),
                F.stddev_pop(kept),
            ]
        with _collected_sockets():
            row = list(df.agg(*parts).collect()[0])
        rows = int(row.pop(0))
        missing = {c: rows - int(row.pop(0)) for c in values}
        summaries = {c: _summary([row.pop(0) for _ in range(6)]) for c in summed}
        counted: dict[str, pd.Series] = {}
        for c in values:
            grouped = df.where(present[c]).groupBy(F.col(c).alias("v")).agg(F.count(F.lit(1)))
            table = _to_arrow(grouped.toDF("v", "n"))
            counts = table.column("n").to_numpy().astype(np.int64)
            index = index_of(table.column("v")) if len(counts) else pd.Index([])
            counted[c] = pd.Series(counts, index=index, dtype=np.int64)
        return {
            c: ColumnCounts(
                rows, kinds[c] in _NUMERIC, counted.get(c), missing.get(c, 0), summaries.get(c)
            )
            for c in names
        }

    def bin_counts(
        self, source: Source, edges: Mapping[str, NDArray[np.float64]]
    ) -> dict[str, NDArray[np.int64]]:
        """Each column's finite numbers counted in its bins, in one job."""
        from pyspark.sql import functions as F

        parts = []
        for c, e in edges.items():
            x = F.col(c).cast("double")
            for i in range(len(e) - 1):
                lo, hi = F.lit(float(e[i])), F.lit(float(e[i + 1]))
                inside = (x >= lo) & ((x <= hi) if i == len(e) - 2 else (x < hi))
                parts.append(F.count(F.when(_finite(x) & inside, 1)))
        if not parts:
            return {}
        with _collected_sockets():
            row = list(self._frame(source).agg(*parts).collect()[0])
        out = {}
        for c, e in edges.items():
            out[c] = np.array([int(row.pop(0)) for _ in range(len(e) - 1)], dtype=np.int64)
        return out

    def close(self) -> None:
        # the session serves the whole process: only the converted CSV files go
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def as_pandas_reads(df: Any) -> Any:
    """The Spark frame ``df`` with its cells as pandas reads them: a NaN of a float column is
    a missing value (null), as :func:`~anonweb.core.engine.duckdb_engine.as_pandas_reads`
    reads them in DuckDB. Spark groups NaN apart from null (and joins NaN to NaN): read raw,
    a table with both would group into two classes where pandas finds one."""
    from pyspark.sql import functions as F

    floats = {c for c, kind in df.dtypes if kind in _FLOATS}
    if not floats:
        return df
    return df.select(
        *[
            F.when(F.isnan(df[c]), F.lit(None)).otherwise(df[c]).alias(c) if c in floats else df[c]
            for c in df.columns
        ]
    )


_FLOATS = frozenset({"float", "double"})
# Spark's types that pandas reads as numbers (decimals it reads as Python decimals, text)
_NUMERIC = frozenset({"tinyint", "smallint", "int", "bigint", "float", "double"})


def _present(column: str) -> Any:
    """Whether a cell of ``column`` is not blank (null: a NaN is one once read as pandas reads
    it, :func:`as_pandas_reads`)."""
    from pyspark.sql import functions as F

    return F.col(column).isNotNull()


def _finite(x: Any) -> Any:
    from pyspark.sql import functions as F

    inf = float("inf")
    return x.isNotNull() & ~F.isnan(x) & (x != F.lit(inf)) & (x != F.lit(-inf))


def _summary(row: list[Any]) -> NumberSummary:
    finite = int(row[0])
    if not finite:
        return NumberSummary(0, float("nan"), float("nan"), True, float("nan"), float("nan"))
    return NumberSummary(
        finite, float(row[1]), float(row[2]), bool(row[3]), float(row[4]), float(row[5])
    )


def _to_arrow(df: Any) -> Any:
    """The (small) aggregated frame on the driver as an Arrow table."""
    import pyarrow as pa

    with _collected_sockets():
        to_arrow = getattr(df, "toArrow", None)
        return to_arrow() if to_arrow is not None else pa.Table.from_pandas(df.toPandas())


@contextlib.contextmanager
def _collected_sockets() -> Iterator[None]:
    """PySpark leaves the sockets it streams results over to the garbage collector: collected
    here, their ResourceWarning is PySpark's own, not a leak of the caller's."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        try:
            yield
        finally:
            gc.collect()
