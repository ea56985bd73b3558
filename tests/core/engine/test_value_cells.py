"""A histogram split for class-level readers: its quasi-identifier rows alone, and each
sensitive column's cells grouped by value, hold exactly the histogram's counts."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import anonweb.core.engine.value_cells as value_cells_module
from anonweb.core.engine.histogram import histogram_of_frame
from anonweb.core.engine.value_cells import (
    ValueCells,
    qi_histogram,
    sensitive_cells,
    value_cells,
)


def _frame(seed: int, n: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "a": rng.integers(0, 6, n),
            "b": rng.choice(["x", "y", None], n),
            "s": rng.choice(["flu", "cold", "ulcer", None], n),
            "t": rng.integers(0, 3, n),
        }
    )


@pytest.mark.parametrize("chunk", [3, 1 << 20])
def test_cells_by_value_are_a_stable_sort_of_the_cells(monkeypatch, chunk):
    """Chunks of 3 cells cross every value's runs: the same entries as one stable sort."""
    monkeypatch.setattr(value_cells_module, "CHUNK", chunk)
    rng = np.random.default_rng(1)
    rows = np.sort(rng.integers(0, 40, 200)).astype(np.int32)
    values = rng.integers(0, 5, 200).astype(np.uint8)
    counts = rng.integers(1, 1000, 200)
    got = value_cells(rows, values, counts, 6, 40)
    order = np.argsort(values, kind="stable")
    assert np.array_equal(got.rows, rows[order]) and np.array_equal(got.counts, counts[order])
    assert got.rows.dtype == np.int32 and got.counts.dtype == np.int32
    assert got.starts.tolist() == [0, *np.cumsum(np.bincount(values, minlength=6)).tolist()]
    assert got.value(5)[0].size == 0  # a value no cell holds has no entries
    assert got.totals().tolist() == np.bincount(values, counts, minlength=6).astype(int).tolist()
    # rows read through a merge of two rows into one keep their counts
    merge = np.arange(40) // 2
    merged = got.through(merge, 20)
    assert np.array_equal(merged.rows, merge[got.rows]) and not merged.unique


def test_the_split_holds_the_histograms_classes_and_each_columns_counts():
    df = _frame(2, 500)
    hist = histogram_of_frame(df, ["a", "b"], ["s", "t"])
    qi = qi_histogram(hist)
    assert qi.same_as(histogram_of_frame(df, ["a", "b"]))
    assert qi.sensitive == () and qi.rows == len(df)
    for name in ("s", "t"):
        cells = sensitive_cells(hist, name)
        assert isinstance(cells, ValueCells) and not cells.unique  # two sensitive columns
        # records per (class, value) as a group-by of the rows counts them
        got: dict[tuple[int, object], int] = {}
        for v in range(cells.n_values):
            rows, counts = cells.value(v)
            for r, c in zip(rows.tolist(), counts.tolist()):
                key = (r, hist.labels[name][v])
                got[key] = got.get(key, 0) + c
        frame = qi.class_frame()
        want: dict[tuple[int, object], int] = {}
        for (a, b, value), size in df.groupby(["a", "b", name], dropna=False).size().items():
            row = int(
                np.flatnonzero(
                    (frame["a"] == a) & ((frame["b"] == b) | (frame["b"].isna() & pd.isna(b)))
                )[0]
            )
            label = [x for x in hist.labels[name] if x == value or (pd.isna(x) and pd.isna(value))][
                0
            ]
            want[(row, label)] = int(size)
        assert {(r, str(v)): c for (r, v), c in got.items()} == {
            (r, str(v)): c for (r, v), c in want.items()
        }
    one = sensitive_cells(histogram_of_frame(df, ["a", "b"], ["s"]), "s")
    assert one.unique
