"""Cells changed by a release: how many released cells differ from the same record's source
cell, per column (the ``changed`` of :mod:`.measures`).

One definition, :func:`changed_count`, over pairs of (source value, released value) with how
many records each pair is: in memory each record is its own pair
(:func:`~.measures.column_utility`); out of core DuckDB joins the release to its source by the
release's lineage (which source row each released row is) and groups the pairs, read back a
batch at a time (:func:`engine_changed_cells`), so the figures are the in-memory ones without
either table in memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import count
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.dp.mechanisms import MISSING, cell_labels
from anonweb.core.engine.base import Source, fresh_name
from anonweb.core.engine.duckdb_engine import DuckDBEngine, quote

PAIR_BATCH = 1 << 18  # pairs compared at a time out of core

_names = count()


def labels_of(values: pd.Series) -> NDArray[Any]:
    """Each cell as :func:`cell_labels` writes it, labelling each distinct value once (a
    million-row column has few distinct values, and a Python call per cell is slow)."""
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    named = cell_labels(pd.Series(np.asarray(uniques, dtype=object), dtype=object)).to_numpy()
    out = np.full(len(values), MISSING, dtype=object)
    present = codes >= 0
    out[present] = named[codes[present]]
    return out


def changed_count(
    source: pd.Series,
    released: pd.Series,
    *,
    numeric: bool,
    counts: NDArray[Any] | None = None,
) -> int:
    """The records whose released value differs from their source value, ``source[i]`` and
    ``released[i]`` being ``counts[i]`` records (one each by default): numbers compared as
    numbers (1 and 1.0 are the same value) when both sides are, else as the labels the utility
    shows; blanks equal blanks."""
    if numeric:
        x = pd.to_numeric(source, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        y = pd.to_numeric(released, errors="coerce").to_numpy(dtype=float, na_value=np.nan)
        differ = ~((x == y) | (np.isnan(x) & np.isnan(y)))
    else:
        differ = labels_of(source) != labels_of(released)
    if counts is None:
        return int(differ.sum())
    return int(np.asarray(counts, dtype=np.int64)[differ].sum())


def engine_changed_cells(
    duck: DuckDBEngine,
    source: Source,
    released: str,
    lineage: str,
    numeric: Mapping[str, bool],
) -> dict[str, int]:
    """:func:`changed_count` of each column of ``numeric`` (whether both sides are numbers)
    for a release written to the Parquet file ``released`` whose lineage file is ``lineage``,
    against ``source`` (numbered as the engines' lineage numbers it), counted by DuckDB: the
    release joined to its source by source row, the (source, released) pairs of each column
    grouped out of core and compared a batch at a time."""
    names = duck.columns(source)
    row = fresh_name("__row", names)
    rel, src = duck.released_with_sources(released, lineage)
    joined = f"{rel} AS r JOIN {duck.numbered(source, row)} AS s ON s.{quote(row)} = r.{quote(src)}"
    out = {}
    for column, both_numbers in numeric.items():
        c = quote(column)
        reader = duck.con.sql(
            f"SELECT s.{c} AS a, r.{c} AS b, count(*) AS n FROM {joined} GROUP BY ALL"
        ).to_arrow_reader(PAIR_BATCH)
        total = 0
        for batch in reader:
            pairs = batch.to_pandas()
            total += changed_count(
                pairs["a"], pairs["b"], numeric=both_numbers, counts=pairs["n"].to_numpy()
            )
        out[column] = total
    return out
