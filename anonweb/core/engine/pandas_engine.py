"""The in-memory engine: the whole table as a pandas DataFrame (small tables, today's path)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.engine.base import (
    NodeRelease,
    RowMap,
    Source,
    WriteResult,
    require_lineage_apart,
    sample_positions,
    source_format,
)
from anonweb.core.engine.columns import (
    ColumnCounts,
    bin_counts,
    finite_numbers,
    is_numeric,
    series_counts,
)
from anonweb.core.engine.histogram import Histogram, histogram_of_frame
from anonweb.core.io.arrow_cells import read_parquet
from anonweb.core.io.ingest import load_table
from anonweb.core.risk.classes import SUPPRESSED, group_codes


class PandasEngine:
    name = "pandas"

    def _frame(self, source: Source, columns: Sequence[str] | None = None) -> pd.DataFrame:
        kind = source_format(source)
        if isinstance(source, pd.DataFrame):
            return source
        if kind == "parquet":
            # each cell as the other engines read it
            return read_parquet(source, columns)
        # a CSV read as the other engines read it (csv_as_parquet): the upload's reader
        frame = load_table(source, fmt="csv")
        return frame if columns is None else frame[list(columns)]

    def row_count(self, source: Source) -> int:
        if isinstance(source, pd.DataFrame):
            return len(source)
        if source_format(source) == "parquet":
            import pyarrow.parquet as pq

            return int(pq.ParquetDataset(str(source)).read(columns=[]).num_rows)
        return len(self._frame(source))

    def columns(self, source: Source) -> list[str]:
        if isinstance(source, pd.DataFrame):
            return [str(c) for c in source.columns]
        if source_format(source) == "parquet":
            import pyarrow.parquet as pq

            return [str(c) for c in pq.ParquetDataset(str(source)).schema.names]
        return [str(c) for c in self._frame(source).columns]

    def histogram(
        self,
        source: Source,
        qi: Sequence[str],
        sensitive: Sequence[str] = (),
        weights: str | None = None,
    ) -> Histogram:
        cols = list(qi) + list(sensitive) + ([weights] if weights else [])
        df = self._frame(source, cols if not isinstance(source, pd.DataFrame) else None)
        return histogram_of_frame(df, qi, sensitive, weights)

    def release_frame(self, source: Source, node: NodeRelease) -> tuple[pd.DataFrame, int]:
        """The generalized table in memory and the number of suppressed rows."""
        df = self._frame(source)
        require_lineage_apart(node, [str(c) for c in df.columns])
        out = df.copy()
        for m in node.mappings:
            codes = m.values.get_indexer(df[m.column])
            if (codes < 0).any():
                missing = pd.isna(df[m.column]).to_numpy() & (codes < 0)
                na = np.flatnonzero(np.asarray(m.values.isna()))
                if len(na):
                    codes[missing] = na[0]
            labels = np.asarray(m.labels + (None,), dtype=object)
            out[m.column] = pd.Series(labels[codes], index=df.index, dtype=object)
        qis = list(node.quasi_identifiers)
        drop = np.zeros(len(out), dtype=bool)
        if node.suppress_below > 0:
            ids = group_codes(out, qis)
            drop |= np.bincount(ids)[ids] < node.suppress_below
        if node.suppressed is not None and len(node.suppressed):
            both = pd.concat([out[qis], node.suppressed[qis]], ignore_index=True)
            ids = group_codes(both.astype(object), qis)
            listed = np.zeros(int(ids.max()) + 1, dtype=bool)
            listed[ids[len(out) :]] = True
            drop |= listed[ids[: len(out)]]
        if drop.any():
            for q in qis:
                col = out[q].astype(object)
                col[drop] = SUPPRESSED
                out[q] = col
        out = out[node.kept([str(c) for c in out.columns])]
        if node.lineage is not None:
            out[node.lineage] = np.arange(len(out), dtype=np.int64)
        if node.shuffle_seed is not None:
            order = np.random.default_rng(node.shuffle_seed).permutation(len(out))
            out = out.iloc[order].reset_index(drop=True)
        return out, int(drop.sum())

    def write_release(self, source: Source, node: NodeRelease, out: str | Path) -> WriteResult:
        frame, suppressed = self.release_frame(source, node)
        frame.to_parquet(out, index=False)
        return WriteResult(str(out), len(frame), suppressed)

    def sample_rows(
        self, source: Source, columns: Sequence[str], n: int, seed: int
    ) -> pd.DataFrame:
        """``n`` rows drawn at random without replacement (all when there are fewer), in
        the table's order: the positions the DuckDB engine draws for the same seed."""
        df = self._frame(source, columns if not isinstance(source, pd.DataFrame) else None)
        picked = sample_positions(len(df), n, seed)
        return df.iloc[picked][list(columns)].reset_index(drop=True)

    def ranges(self, source: Source, columns: Sequence[str]) -> dict[str, float]:
        """Each numeric column's range (largest less smallest value), over every row."""
        df = self._frame(source, columns if not isinstance(source, pd.DataFrame) else None)
        return {c: float(df[c].max() - df[c].min()) for c in columns}

    def map_rows(self, source: Source, func: RowMap, out: str | Path) -> str:
        """The table through the row-wise map ``func`` (all rows at once), written as Parquet
        to ``out``."""
        df = self._frame(source)
        done = func(df, np.arange(len(df), dtype=np.int64))
        done.to_parquet(out, index=False)
        return str(out)

    def numeric_columns(self, source: Source, columns: Sequence[str]) -> list[str]:
        df = self._frame(source, columns if not isinstance(source, pd.DataFrame) else None)
        return [c for c in columns if is_numeric(df[c])]

    def column_counts(
        self, source: Source, *, values: Sequence[str], numbers: Sequence[str]
    ) -> dict[str, ColumnCounts]:
        names = list(dict.fromkeys([*values, *numbers]))
        df = self._frame(source, names if not isinstance(source, pd.DataFrame) else None)
        return {c: series_counts(df[c], distinct=c in values, numbers=c in numbers) for c in names}

    def bin_counts(
        self, source: Source, edges: Mapping[str, NDArray[np.float64]]
    ) -> dict[str, NDArray[np.int64]]:
        names = list(edges)
        df = self._frame(source, names if not isinstance(source, pd.DataFrame) else None)
        return {c: bin_counts(finite_numbers(df[c]), np.asarray(edges[c])) for c in names}

    def close(self) -> None:
        return None
