"""The out-of-core engine: DuckDB reads the Parquet or CSV file itself, aggregates with a fixed
``memory_limit`` and spills to ``temp_directory`` beyond it, so the table never has to fit in
memory; only the histogram (one row per distinct combination) comes back to Python, and the
release is written by DuckDB straight to Parquet."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.engine.base import (
    NodeRelease,
    RowMap,
    Source,
    WriteResult,
    csv_as_parquet,
    fresh_name,
    require_lineage_apart,
    sample_positions,
    source_format,
)
from anonweb.core.engine.columns import ColumnCounts, NumberSummary, extreme_ranges
from anonweb.core.engine.histogram import (
    Histogram,
    KeyCoding,
    build_histogram,
    histogram_of_keys,
    key_coding,
    require_source_columns,
)
from anonweb.core.io.arrow_cells import index_of, table_to_pandas, with_missing
from anonweb.core.risk.classes import SUPPRESSED

DEFAULT_MEMORY_LIMIT = "1GB"
# rows per batch when a Parquet file's cells are keyed (bounded memory: a few arrays of this)
KEY_BATCH_ROWS = 1_000_000
# rows per part a row-wise map is given (memory: a few frames of this many rows)
MAP_BATCH_ROWS = 500_000


_NOT_KEYABLE = "value not among the distinct values read"
# DuckDB's integer types and the types that pandas reads as numbers (DECIMAL it reads as
# Python decimals, text)
INTEGER_TYPES = frozenset(
    [
        "TINYINT",
        "SMALLINT",
        "INTEGER",
        "BIGINT",
        "HUGEINT",
        "UTINYINT",
        "USMALLINT",
        "UINTEGER",
        "UBIGINT",
        "UHUGEINT",
    ]
)
FLOAT_TYPES = frozenset({"FLOAT", "DOUBLE"})
NUMERIC_TYPES = INTEGER_TYPES | FLOAT_TYPES


class _NotKeyable(Exception):
    """A value of a batch is not among the column's distinct values as DuckDB gave them (a
    type the two readers convert differently): the cells are grouped by their values."""


def quote(name: str) -> str:
    """A column name as a SQL identifier (double quotes doubled)."""
    return '"' + str(name).replace('"', '""') + '"'


def literal(text: str) -> str:
    return "'" + str(text).replace("'", "''") + "'"


class DuckDBEngine:
    name = "duckdb"

    def __init__(
        self,
        *,
        memory_limit: str | None = None,
        temp_directory: str | Path | None = None,
        threads: int | None = None,
    ) -> None:
        import duckdb

        self.memory_limit = memory_limit or DEFAULT_MEMORY_LIMIT
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        if temp_directory is None:
            self._tmp = tempfile.TemporaryDirectory(prefix="anonweb-duckdb-")
            temp_directory = self._tmp.name
        self.temp_directory = str(temp_directory)
        Path(self.temp_directory).mkdir(parents=True, exist_ok=True)
        self.con = duckdb.connect(":memory:")
        self.con.execute(f"SET memory_limit = {literal(self.memory_limit)}")
        self.con.execute(f"SET temp_directory = {literal(self.temp_directory)}")
        # the release's row order is not part of its content; keeping it costs memory
        self.con.execute("SET preserve_insertion_order = false")
        self.con.execute("SET enable_progress_bar = false")
        # a timestamp with a time zone comes back as the instant in UTC whatever the machine's
        # zone (the value every engine reads, anonweb.core.io.arrow_cells)
        self.con.execute("SET TimeZone = 'UTC'")
        if threads:
            self.con.execute(f"SET threads = {int(threads)}")

    def _relation(self, source: Source) -> str:
        return as_pandas_reads(self.con, self._raw_relation(source))

    def _raw_relation(self, source: Source) -> str:
        kind = source_format(source)
        if isinstance(source, pd.DataFrame):
            self.con.register("anonweb_source", source)
            return "anonweb_source"
        path = str(source)
        if kind != "parquet":  # a CSV read as every engine reads it
            path = str(csv_as_parquet(path, self.temp_directory))
        if Path(path).is_dir():
            path = str(Path(path) / "*.parquet")
        return f"read_parquet({literal(path)})"

    def _columns(self, rel: str) -> list[str]:
        return [str(r[0]) for r in self.con.execute(f"DESCRIBE SELECT * FROM {rel}").fetchall()]

    def columns(self, source: Source) -> list[str]:
        return self._columns(self._relation(source))

    def row_count(self, source: Source) -> int:
        rel = self._relation(source)
        row = self.con.execute(f"SELECT count(*) FROM {rel}").fetchone()
        return int(row[0]) if row else 0

    def histogram(
        self,
        source: Source,
        qi: Sequence[str],
        sensitive: Sequence[str] = (),
        weights: str | None = None,
    ) -> Histogram:
        rel = self._relation(source)
        cols = list(qi) + list(sensitive)
        require_source_columns(self._columns(rel), qi, sensitive, weights)
        if source_format(source) == "parquet":
            hist = self._keyed_histogram(source, rel, list(qi), list(sensitive), weights)
            _release_arrow_memory()
            if hist is not None:
                return hist
        keys = ", ".join(quote(c) for c in cols)
        # the count's and the weight's names, other than any column's
        n = fresh_name("__n", [*cols, weights or ""])
        w = fresh_name("__w", [*cols, weights or "", n])
        agg = f"count(*) AS {quote(n)}"
        if weights:
            agg += f", sum(CAST({quote(weights)} AS DOUBLE)) AS {quote(w)}"
        # each column numbered by its distinct values inside DuckDB, so what comes back is
        # integers per cell plus each column's few distinct values, not the labels per cell
        table = self.con.sql(f"SELECT {keys}, {agg} FROM {rel} GROUP BY ALL").to_arrow_table()
        hist = _from_arrow(table, list(qi), list(sensitive), bool(weights), n=n, w=w)
        del table
        _release_arrow_memory()
        return hist

    def _keyed_histogram(
        self, source: Source, rel: str, qi: list[str], sensitive: list[str], weights: str | None
    ) -> Histogram | None:
        """The histogram of a Parquet source counted by one integer key per row.

        Grouping ten million rows by nine text columns costs DuckDB far more than grouping one
        integer, and handing back a label per cell costs Python more still. So DuckDB lists
        each column's distinct values (one column read at a time), each row's values become
        canonical codes through the file's own dictionary pages (read batch by batch: memory of
        one batch), and DuckDB groups the packed keys within its memory limit and spill folder.
        None when the key space exceeds 62 bits or a value does not map (the caller groups by
        the values instead).
        """
        import pyarrow as pa

        cols = qi + sensitive
        raw = {c: _distinct_values(self.con, rel, c) for c in cols}
        coding = key_coding(cols, {c: v for c, (v, _) in raw.items()})
        if coding is None:
            return None
        schema = pa.schema([("__k", pa.int64())] + ([(weights, pa.float64())] if weights else []))
        batches = _key_batches(_parquet_files(source), coding, raw, weights)
        self.con.register("anonweb_keys", pa.RecordBatchReader.from_batches(schema, batches))
        agg = "count(*) AS __n"
        if weights:
            agg += f", sum({quote(weights)}) AS __w"
        try:
            table = self.con.sql(
                f"SELECT __k, {agg} FROM anonweb_keys GROUP BY __k"
            ).to_arrow_table()
        except Exception as exc:  # the batch reader's error comes back wrapped by DuckDB
            if _NOT_KEYABLE in str(exc):
                return None
            raise
        finally:
            self.con.unregister("anonweb_keys")
        columns = [
            table.column("__k").to_numpy(),
            table.column("__n").to_numpy(),
            table.column("__w").to_numpy(zero_copy_only=False) if weights else None,
        ]
        del table
        # handed over, not kept here: each array the histogram has sorted is then let go
        return histogram_of_keys(
            qi, sensitive, coding, columns.pop(0), columns.pop(0), columns.pop(0)
        )

    def relation(self, source: Source) -> str:
        """A SQL relation of ``source``'s rows, in the table's order."""
        return self._relation(source)

    def numbered(self, source: Source, column: str) -> str:
        """A SQL relation of ``source`` with ``column``, each row's position as the engines'
        lineage numbers it (:meth:`_numbered`). Where that position holds only while DuckDB
        keeps the order it reads rows in (a file with a column called ``file_row_number``),
        the connection keeps it from here on: the queries built on the relation run later."""
        rel, ordered = self._numbered(source, self._raw_relation(source), column)
        rel = as_pandas_reads(self.con, rel)
        if ordered:
            self.con.execute("SET preserve_insertion_order = true")
        return rel

    def released_with_sources(self, released: str, lineage: str) -> tuple[str, str]:
        """A relation of the release written to the Parquet file ``released`` with each row's
        source row from its ``lineage`` file (row for row), and the name of that column, apart
        from the release's columns (as are the rows' numbers: a released column may be called
        ``file_row_number``)."""
        from anonweb.core.engine.lineage import LINEAGE_COLUMN

        names = self.columns(released)
        at = fresh_name("__at", names)
        src = fresh_name("__src", [*names, at])
        rel, ordered = numbered_parquet([released], at, names)
        rel = as_pandas_reads(self.con, rel)
        if ordered:
            self.con.execute("SET preserve_insertion_order = true")
        return (
            f"(SELECT r.* EXCLUDE ({quote(at)}), l.{quote(LINEAGE_COLUMN)} AS {quote(src)} "
            f"FROM {rel} AS r JOIN read_parquet({literal(lineage)}, file_row_number = true) "
            f"AS l ON r.{quote(at)} = l.file_row_number)",
            src,
        )

    def _numbered(self, source: Source, rel: str, column: str) -> tuple[str, bool]:
        """``rel`` with ``column``, each row's position in the table as it is read (the
        positions :meth:`map_rows` and :meth:`sample_rows` give): a Parquet file's row
        numbers, after the rows of the files before it in a folder (see
        :func:`numbered_parquet`; the flag: whether DuckDB must keep the order it reads)."""
        if isinstance(source, pd.DataFrame):
            numbered = source.assign(**{column: np.arange(len(source), dtype=np.int64)})
            self.con.register("anonweb_source", numbered)
            return "anonweb_source", False
        if source_format(source) != "parquet":
            raise ValueError(
                "the DuckDB engine numbers the rows of Parquet files and tables, not of a CSV "
                "file: convert it to Parquet to keep the release's lineage"
            )
        files = [str(f) for f in _parquet_files(source)]
        return numbered_parquet(files, column, self._columns(rel))

    def write_release(self, source: Source, node: NodeRelease, out: str | Path) -> WriteResult:
        rel = self._raw_relation(source)
        names = self._columns(rel)
        require_lineage_apart(node, names)
        ordered = False
        if node.lineage is not None:
            rel, ordered = self._numbered(source, rel, node.lineage)
        rel = as_pandas_reads(self.con, rel)
        types = self._types(rel)
        qis = list(node.quasi_identifiers)
        mapped = {m.column for m in node.mappings}
        for i, m in enumerate(node.mappings):
            self.con.register(f"anonweb_map_{i}", m.frame())
        select = []
        joins = []
        for c in names:
            if c in mapped:
                i = [m.column for m in node.mappings].index(c)
                select.append(f"m{i}.g AS {quote(c)}")
                # each value as the column holds it: a float32's value read as the float64
                # of its text (arrow_cells) is the float32 again, not its widening
                joins.append(
                    f"LEFT JOIN anonweb_map_{i} AS m{i} ON s.{quote(c)} IS NOT DISTINCT FROM "
                    f"CAST(m{i}.v AS {types[c]})"
                )
            else:
                select.append(f"s.{quote(c)}")
        if node.lineage is not None:
            select.append(f"s.{quote(node.lineage)}")
        generalized = f"SELECT {', '.join(select)} FROM {rel} AS s {' '.join(joins)}"
        part = ", ".join(quote(q) for q in qis)
        conds = []
        if node.suppress_below > 0:
            conds.append(f"count(*) OVER (PARTITION BY {part}) < {int(node.suppress_below)}")
        listed = ""
        # the flags' names, other than any column's (a column called so would be read instead)
        columns = [*names, *([node.lineage] if node.lineage else [])]
        flag = quote(fresh_name("__drop", columns))
        if node.suppressed is not None and len(node.suppressed):
            listed_flag = fresh_name("__sup", qis)
            sup = node.suppressed[qis].astype(object).assign(**{listed_flag: True})
            self.con.register("anonweb_suppressed", sup)
            on = " AND ".join(f"g.{quote(q)} IS NOT DISTINCT FROM x.{quote(q)}" for q in qis)
            listed = f"LEFT JOIN anonweb_suppressed AS x ON {on}"
            conds.append(f"x.{quote(listed_flag)} IS NOT NULL")
        drop = " OR ".join(conds) or "false"
        flagged = f"SELECT g.*, ({drop}) AS {flag} FROM ({generalized}) AS g {listed}"
        final = ", ".join(
            f"CASE WHEN {flag} THEN {literal(SUPPRESSED)} ELSE CAST({quote(c)} AS VARCHAR) END "
            f"AS {quote(c)}"
            if c in mapped
            else quote(c)
            for c in [*node.kept(names), *([node.lineage] if node.lineage else [])]
        )
        self.con.execute(
            f"CREATE OR REPLACE TEMP VIEW anonweb_release AS SELECT * FROM ({flagged})"
        )
        order = ""
        if node.shuffle_seed is not None:
            # a random order: DuckDB sorts out of core, spilling as its aggregates do
            seed = (node.shuffle_seed % (2**31)) / 2**31
            self.con.execute(f"SELECT setseed({seed!r})")
            order = " ORDER BY random()"
        if ordered:  # the rows numbered in the order they are read
            self.con.execute("SET preserve_insertion_order = true")
        try:
            self.con.execute(
                f"COPY (SELECT {final} FROM anonweb_release{order}) TO {literal(str(out))} "
                "(FORMAT parquet)"
            )
        finally:
            self.con.execute("SET preserve_insertion_order = false")
        row = self.con.execute(
            f"SELECT count(*), coalesce(sum(CASE WHEN {flag} THEN 1 ELSE 0 END), 0) "
            "FROM anonweb_release"
        ).fetchone()
        rows, suppressed = (int(row[0]), int(row[1])) if row else (0, 0)
        return WriteResult(str(out), rows, suppressed)

    def sample_rows(
        self, source: Source, columns: Sequence[str], n: int, seed: int
    ) -> pd.DataFrame:
        """``n`` rows drawn at random without replacement (all when there are fewer), in the
        table's order: the rows' positions are drawn from ``seed`` and the table streamed
        once in order (memory: one part and the sample)."""
        import pyarrow as pa

        rel = self._relation(source)
        picked = sample_positions(self.row_count(source), n, seed)
        cols = ", ".join(quote(c) for c in columns)
        taken, start = [], 0
        self.con.execute("SET preserve_insertion_order = true")
        try:
            reader = self.con.sql(f"SELECT {cols} FROM {rel}").to_arrow_reader(MAP_BATCH_ROWS)
            for batch in reader:
                lo, hi = np.searchsorted(picked, [start, start + batch.num_rows])
                if hi > lo:
                    taken.append(batch.take(pa.array(picked[lo:hi] - start)))
                start += batch.num_rows
            schema = reader.schema
        finally:
            self.con.execute("SET preserve_insertion_order = false")
        return table_to_pandas(pa.Table.from_batches(taken, schema=schema))

    def ranges(self, source: Source, columns: Sequence[str]) -> dict[str, float]:
        """Each numeric column's range (largest less smallest value), over every row."""
        if not columns:
            return {}
        rel = self._relation(source)
        parts = ", ".join(f"max({quote(c)}), min({quote(c)})" for c in columns)
        return extreme_ranges(self.con.sql(f"SELECT {parts} FROM {rel}").to_arrow_table(), columns)

    def _types(self, rel: str) -> dict[str, str]:
        rows = self.con.execute(f"DESCRIBE SELECT * FROM {rel}").fetchall()
        return {str(r[0]): str(r[1]) for r in rows}

    def numeric_columns(self, source: Source, columns: Sequence[str]) -> list[str]:
        types = self._types(self._relation(source))
        return [c for c in columns if types[c] in NUMERIC_TYPES]

    def column_counts(
        self, source: Source, *, values: Sequence[str], numbers: Sequence[str]
    ) -> dict[str, ColumnCounts]:
        """One pass for the rows, the blanks of ``values`` and the summaries of the numeric
        columns of ``numbers``, then one grouping per column of ``values`` (a blank is NULL or,
        in a column of floats, NaN: pandas reads both as missing)."""
        rel = self._relation(source)
        types = self._types(rel)
        names = list(dict.fromkeys([*values, *numbers]))
        numeric = {c: types[c] in NUMERIC_TYPES for c in names}
        present = {c: _present(c) for c in values}
        summed = [c for c in numbers if numeric[c]]
        parts = ["count(*)"] + [f"count(*) FILTER (WHERE {present[c]})" for c in values]
        for c in summed:
            x, keep = f"CAST({quote(c)} AS DOUBLE)", f"isfinite(CAST({quote(c)} AS DOUBLE))"
            parts += [
                f"{agg} FILTER (WHERE {keep})"
                for agg in (
                    "count(*)",
                    f"min({x})",
                    f"max({x})",
                    f"bool_and({x} = floor({x}))",
                    f"avg({x})",
                    f"stddev_pop({x})",
                )
            ]
        row = list(self.con.execute(f"SELECT {', '.join(parts)} FROM {rel}").fetchall()[0])
        rows = int(row.pop(0))
        missing = {c: rows - int(row.pop(0)) for c in values}
        summaries = {c: _summary([row.pop(0) for _ in range(6)]) for c in summed}
        counted: dict[str, pd.Series] = {}
        for c in values:
            table = self.con.sql(
                f"SELECT {quote(c)} AS v, count(*) AS n FROM {rel} WHERE {present[c]} GROUP BY ALL"
            ).to_arrow_table()
            counts = table.column("n").to_numpy().astype(np.int64)
            index = index_of(table.column("v")) if len(counts) else pd.Index([])
            counted[c] = pd.Series(counts, index=index, dtype=np.int64)
            del table
        return {
            c: ColumnCounts(rows, numeric[c], counted.get(c), missing.get(c, 0), summaries.get(c))
            for c in names
        }

    def bin_counts(
        self, source: Source, edges: Mapping[str, NDArray[np.float64]]
    ) -> dict[str, NDArray[np.int64]]:
        """Each column's finite numbers counted in its bins, in one pass."""
        rel = self._relation(source)
        parts: list[str] = []
        for c, e in edges.items():
            x = f"CAST({quote(c)} AS DOUBLE)"
            lits = [f"CAST({literal(repr(float(v)))} AS DOUBLE)" for v in e]
            for i in range(len(e) - 1):
                upper = "<=" if i == len(e) - 2 else "<"
                parts.append(
                    f"count(*) FILTER (WHERE isfinite({x}) AND {x} >= {lits[i]} "
                    f"AND {x} {upper} {lits[i + 1]})"
                )
        if not parts:
            return {}
        row = list(self.con.execute(f"SELECT {', '.join(parts)} FROM {rel}").fetchall()[0])
        out = {}
        for c, e in edges.items():
            out[c] = np.array([int(row.pop(0)) for _ in range(len(e) - 1)], dtype=np.int64)
        return out

    def map_rows(self, source: Source, func: RowMap, out: str | Path) -> str:
        """The table streamed through the row-wise map ``func`` a part at a time, in the table's
        order (each part with the positions of its rows), written as Parquet to ``out``.

        Columns the map returns unchanged in type keep DuckDB's own Arrow column (no round trip
        through pandas); a column the map writes takes its type from the first part, and a later
        part must agree with it (a text column stays text)."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        rel = self._relation(source)
        # the positions are the rows' order in the table: DuckDB keeps it while streaming
        self.con.execute("SET preserve_insertion_order = true")
        writer: Any = None
        start = 0
        try:
            reader = self.con.sql(f"SELECT * FROM {rel}").to_arrow_reader(MAP_BATCH_ROWS)
            schema = reader.schema
            for batch in reader:
                table = _mapped(batch, func, start)
                start += batch.num_rows
                if writer is None:
                    writer = pq.ParquetWriter(str(out), table.schema)
                    target = table.schema
                writer.write_table(table.cast(target))
            if writer is None:  # no rows: the map's columns, from an empty part
                table = _mapped(pa.RecordBatch.from_pylist([], schema=schema), func, 0)
                pq.write_table(table, str(out))
        finally:
            if writer is not None:
                writer.close()
            self.con.execute("SET preserve_insertion_order = false")
        return str(out)

    def close(self) -> None:
        self.con.close()
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def numbered_parquet(files: Sequence[str], column: str, names: Sequence[str]) -> tuple[str, bool]:
    """A relation of the Parquet ``files`` (read in this order; ``names`` their columns) with
    ``column``, each row's position among all their rows; and whether that position holds only
    while DuckDB keeps the order it reads rows in (``preserve_insertion_order``).

    DuckDB's row number of each file (``file_row_number``) after the rows of the files before
    it, found by the file's name (read under a name apart from the files' columns). A file with
    a column called ``file_row_number`` (which DuckDB cannot rename) is numbered by its rows'
    order as read instead (``row_number() OVER ()``, which DuckDB documents as the order of the
    files and of their rows): the column is the table's own, never taken for the row number.
    """
    listed = ", ".join(literal(f) for f in files)
    if "file_row_number" in names:
        return (
            f"(SELECT *, row_number() OVER () - 1 AS {quote(column)} "
            f"FROM read_parquet([{listed}]))",
            True,
        )
    name = fresh_name("filename", [*names, column])
    read = f"read_parquet([{listed}], file_row_number = true, filename = {literal(name)})"
    offsets, start = [], 0
    for f in files:
        offsets.append(f"({literal(f)}, {start})")
        start += _parquet_rows(f)
    return (
        f"(SELECT s.* EXCLUDE (file_row_number, {quote(name)}), s.file_row_number + o.start "
        f"AS {quote(column)} FROM {read} AS s JOIN (VALUES {', '.join(offsets)}) AS o(f, start) "
        f"ON s.{quote(name)} = o.f)",
        False,
    )


def as_pandas_reads(con: Any, rel: str) -> str:
    """The relation ``rel`` with its cells as pandas reads them: a NaN of a float column is
    a missing value, NULL as in a column of any other type.

    pandas holds a float column's NULL as NaN, so the two are one missing value to it (one
    class, one value of a sensitive column, one blank). DuckDB holds them apart (NaN is a
    number to it, one above all others): read raw, a table with both would group into two
    classes where pandas finds one, and a release would keep them apart. Every relation the
    DuckDB engine reads rows through is this one, so no query that groups, joins, counts or
    writes cells meets a NaN."""
    described = con.execute(f"DESCRIBE SELECT * FROM {rel}").fetchall()
    floats = [str(r[0]) for r in described if str(r[1]) in FLOAT_TYPES]
    if not floats:
        return rel
    read = ", ".join(
        f"CASE WHEN isnan({quote(c)}) THEN NULL ELSE {quote(c)} END AS {quote(c)}" for c in floats
    )
    return f"(SELECT * REPLACE ({read}) FROM {rel})"


def _present(column: str) -> str:
    """The condition a cell of ``column`` is not blank (NULL: a NaN is one once read as pandas
    reads it, :func:`as_pandas_reads`)."""
    return f"{quote(column)} IS NOT NULL"


def _summary(row: list[Any]) -> NumberSummary:
    """A :class:`NumberSummary` from the six aggregates ``column_counts`` asks for."""
    finite = int(row[0])
    if not finite:
        return NumberSummary(0, float("nan"), float("nan"), True, float("nan"), float("nan"))
    return NumberSummary(
        finite, float(row[1]), float(row[2]), bool(row[3]), float(row[4]), float(row[5])
    )


def _mapped(batch: Any, func: RowMap, start: int) -> Any:
    """One part through the map, as an Arrow table: the columns the map left as they were are
    the part's own Arrow columns."""
    import pyarrow as pa

    frame = table_to_pandas(batch)
    done = func(frame, np.arange(start, start + len(frame), dtype=np.int64))
    if len(done) != len(frame):
        raise ValueError("a row-wise map must return one row per row")
    names = list(batch.schema.names)
    arrays, fields = [], []
    for c in done.columns:
        same = c in names and done[c].equals(frame[c])
        if same and done[c].dtype == frame[c].dtype:
            arrays.append(batch.column(names.index(c)))
        elif done[c].dtype == object:
            arrays.append(pa.array(done[c], type=pa.string(), from_pandas=True))
        else:
            arrays.append(pa.array(done[c], from_pandas=True))
        fields.append(str(c))
    return pa.Table.from_arrays(arrays, names=fields)


def _release_arrow_memory() -> None:
    """Hand back to the system the pages Arrow's allocator kept from a result already turned
    into a histogram: it keeps them for reuse otherwise, and what comes next (the risk
    profile, the search) allocates through NumPy. A few hundred megabytes at 10^8 rows."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()


def _from_arrow(
    table: Any, qi: list[str], sensitive: list[str], weighted: bool, *, n: str, w: str
) -> Histogram:
    """A histogram from an Arrow table of cells (columns, the count ``n``, maybe the weights'
    sum ``w``)."""
    codes, labels = {}, {}
    for c in qi + sensitive:
        codes[c], labels[c] = _arrow_codes(table.column(c))
    counts = table.column(n).to_numpy().astype(np.int64)
    sums = table.column(w).to_numpy(zero_copy_only=False) if weighted else None
    return build_histogram(qi, sensitive, codes, labels, counts, sums, distinct=True)


def _arrow_codes(column: Any) -> tuple[NDArray[Any], pd.Index]:
    """Codes and distinct values of an Arrow column, numbered by Arrow (no Python strings per
    cell); a missing value gets the code after the last value."""
    import pyarrow as pa

    encoded = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if not pa.types.is_dictionary(encoded.type):
        encoded = encoded.dictionary_encode()
    indices = encoded.indices
    if indices.null_count:
        values = with_missing(encoded.dictionary)
        codes = indices.fill_null(len(values) - 1).to_numpy().astype(np.int64)
    else:
        values = index_of(encoded.dictionary)
        codes = indices.to_numpy().astype(np.int64)
    return codes, values


def _distinct_values(con: Any, rel: str, column: str) -> tuple[pd.Index, pd.Index]:
    """A column's distinct values as DuckDB reads them: as labels (the missing value last, if
    any) and the values present, in their own type (to look the batches' values up in)."""
    got = con.sql(f"SELECT DISTINCT {quote(column)} AS v FROM {rel}").to_arrow_table().column(0)
    present = got.drop_null()
    values = index_of(present)
    return (with_missing(present) if got.null_count else values), values


def _parquet_files(source: Source) -> list[Path]:
    path = Path(str(source))
    return sorted(path.glob("*.parquet")) if path.is_dir() else [path]


def _key_batches(
    files: list[Path],
    coding: KeyCoding,
    raw: dict[str, tuple[pd.Index, pd.Index]],
    weights: str | None,
) -> Any:
    """Record batches of each row's cell key (and weight), read through the files' dictionaries:
    a batch's few distinct values are mapped to codes, never its rows one by one."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    cols = list(coding.columns)
    strides = coding.strides
    for f in files:
        schema = pq.read_schema(f)
        text = [
            c
            for c in cols
            if pa.types.is_string(schema.field(c).type)
            or pa.types.is_large_string(schema.field(c).type)
            or pa.types.is_binary(schema.field(c).type)
        ]
        parquet = pq.ParquetFile(f, read_dictionary=text)
        read = cols + ([weights] if weights and weights not in cols else [])
        for batch in parquet.iter_batches(batch_size=KEY_BATCH_ROWS, columns=read):
            key = np.zeros(batch.num_rows, dtype=np.int64)
            for c, stride in zip(cols, strides, strict=True):
                arr = batch.column(c)
                if not pa.types.is_dictionary(arr.type):
                    arr = pc.dictionary_encode(arr)
                labels, present = raw[c]
                dictionary = index_of(arr.dictionary)
                position = present.get_indexer(dictionary)
                # a float's NaN is the missing value, as DuckDB's reading gives the values
                # (as_pandas_reads) and pandas reads it
                nan = np.asarray(dictionary.isna(), dtype=bool)
                if nan.any() or arr.indices.null_count:
                    if len(labels) == len(present):
                        raise _NotKeyable(f"{_NOT_KEYABLE}: {c}")
                    position[nan] = len(present)
                if (position < 0).any():
                    raise _NotKeyable(f"{_NOT_KEYABLE}: {c}")
                table = coding.code_of_raw[c][position]
                indices = arr.indices
                if indices.null_count:
                    missing = coding.code_of_raw[c][len(present)]
                    table = np.append(table, missing)
                    indices = indices.fill_null(len(position))
                codes = table[indices.to_numpy()]
                key += codes * stride if stride > 1 else codes
            arrays = [pa.array(key)]
            if weights:
                arrays.append(batch.column(weights).cast(pa.float64()))
            yield pa.RecordBatch.from_arrays(arrays, names=["__k"] + ([weights] if weights else []))


def _parquet_rows(path: str) -> int:
    """Rows of a Parquet file, from its footer."""
    import pyarrow.parquet as pq

    return int(pq.ParquetFile(path).metadata.num_rows)
