"""A histogram keeps each column's codes in the smallest integer type that holds its values
(a byte up to 256 values, two up to 65,536, then four), and every count made from them is the
one a plain group-by of the rows gives: past 255 and past 65,535 values alike."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from anonweb.core.assessment.profile import assess_histogram
from anonweb.core.engine.duckdb_engine import DuckDBEngine
from anonweb.core.engine.histogram import code_dtype, histogram_of_frame
from anonweb.core.io.hierarchy import Hierarchy
from anonweb.core.risk.classes import SUPPRESSED, suppressed_records
from anonweb.core.search.lattice import EncodedTable

N = 150_000


def _table(seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "small": rng.integers(0, 3, N),  # 3 values: one byte
            "mid": [f"m{i}" for i in rng.integers(0, 300, N)],  # 300: two bytes
            "wide": rng.integers(0, 70_000, N) * 7,  # about 61,000 present of 70,000
            "huge": np.arange(N) % 70_001,  # 70,001 values: four bytes
            "sa": rng.integers(0, 5, N),
        }
    )


def _cells(df: pd.DataFrame, cols: list[str]) -> pd.Series:
    return df.groupby(cols, dropna=False).size().sort_index()


@pytest.mark.parametrize(
    "n, dtype",
    [
        (1, np.uint8),
        (256, np.uint8),
        (257, np.uint16),
        (65_536, np.uint16),
        (65_537, np.int32),
        (2**31, np.int32),
        (2**31 + 1, np.int64),
    ],
)
def test_the_code_type_is_the_smallest_that_holds_every_code(n, dtype):
    assert code_dtype(n) == np.dtype(dtype)
    assert np.iinfo(code_dtype(n)).max >= n - 1


@pytest.mark.parametrize("engine", ["pandas", "duckdb"])
def test_codes_past_255_and_65535_values_count_as_a_group_by_does(tmp_path, engine):
    df = _table()
    cols = ["small", "mid", "huge"]
    if engine == "pandas":
        hist = histogram_of_frame(df, cols, ["sa"])
    else:
        path = tmp_path / "t.parquet"
        df.to_parquet(path)
        duck = DuckDBEngine(memory_limit="256MB")
        try:
            hist = duck.histogram(path, cols, ["sa"])
        finally:
            duck.close()
    sizes = {c: df[c].nunique() for c in cols + ["sa"]}
    assert sizes["mid"] == 300 and sizes["huge"] == 70_001
    for c in cols + ["sa"]:
        assert hist.codes[c].dtype == code_dtype(sizes[c])
        assert int(hist.codes[c].max()) == sizes[c] - 1  # the largest code is not wrapped
    got = hist.to_frame().set_index(cols + ["sa"])["count"].sort_index()
    want = _cells(df, cols + ["sa"])
    assert got.index.equals(want.index) and np.array_equal(got.to_numpy(), want.to_numpy())
    classes = _cells(df, cols)
    assert np.array_equal(np.sort(hist.class_sizes), np.sort(classes.to_numpy()))
    profile = assess_histogram(hist)
    assert profile.to_dict()["classes"] == len(classes)
    assert profile.to_dict()["k"] == int(classes.min())


def test_the_search_groups_wide_columns_as_a_group_by_of_the_generalized_rows():
    df = _table(1)
    cols = ["mid", "wide"]
    hier = {
        "mid": Hierarchy(
            rows=tuple((f"m{i}", f"g{i // 10}", f"h{i // 100}", "*") for i in range(300)),
            attribute="mid",
        ),
        "wide": Hierarchy(
            rows=tuple((str(v * 7), str(v // 500), "*") for v in range(70_000)),
            attribute="wide",
        ),
    }
    hist = histogram_of_frame(df, cols)
    assert hist.codes["wide"].dtype == np.uint16
    table = EncodedTable.from_histogram(hist, hier)
    maps = {q: {row[0]: row for row in hier[q].rows} for q in cols}
    for node in [(0, 0), (1, 0), (2, 1), (0, 1), (3, 2)]:
        _, n_classes, sizes = table.group_sizes(node, None, table.weights)
        generalized = pd.DataFrame(
            {
                q: df[q].astype(str).map(lambda v, q=q, lv=lv: maps[q][v][lv])
                for q, lv in zip(cols, node)
            }
        )
        want = np.sort(generalized.groupby(cols).size().to_numpy())
        assert n_classes == len(want)
        assert np.array_equal(np.sort(np.rint(sizes).astype(np.int64)), want)


def test_suppressed_classes_are_those_of_the_table_of_classes():
    df = _table(2)[["small", "mid", "sa"]].copy()
    df["mid"] = df["mid"].where(df["small"] != 0, SUPPRESSED)
    df["small"] = df["small"].astype(str).where(df["small"] != 0, SUPPRESSED)
    hist = histogram_of_frame(df, ["small", "mid"], ["sa"])
    star = hist.suppressed_classes()
    assert star.any() and not star.all()
    assert np.array_equal(star, suppressed_records(hist.class_frame(), ["small", "mid"]))
    assert np.array_equal(
        hist.suppressed_classes(["mid"]), suppressed_records(hist.class_frame(), ["mid"])
    )
    # a column of numbers holds no ``*``: nothing is suppressed, as for the table
    numbers = histogram_of_frame(_table(2), ["small", "mid"], ["sa"])
    assert not numbers.suppressed_classes().any()
