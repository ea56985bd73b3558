"""Numbers for people: one helper writes the DP tables and the sentences about them (issue 19.10:
``5.699999999999999`` in a DP CSV, ``mean shift -2.842e-14``, ``δ = 9.435412868641968e-7``)."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest

from anonweb.core.dp.mechanisms import DPQuery, release
from anonweb.core.numbers import for_people, probability, released_table, significant
from anonweb.core.utility.charts import _subtitle


@pytest.mark.parametrize(
    ("value", "written"),
    [
        (2083.0, "2,083"),
        (3, "3"),
        (11.376958525345623, "11.38"),
        (0.000123456, "0.0001235"),
        (float("inf"), "unbounded"),
        (None, "—"),
    ],
)
def test_figures_in_sentences(value, written):
    assert for_people(value) == written


def test_a_difference_lost_in_floating_point_noise_is_zero():
    assert for_people(-2.842e-14, scale=38.5) == "0"
    assert for_people(-0.25, scale=38.5) == "-0.25"
    subtitle = _subtitle({"mean": {"original": 38.5, "released": 38.5}, "mean_shift": -2.842e-14})
    assert subtitle == "mean shift 0"
    assert _subtitle({"mean": {"original": 38.5}, "mean_shift": 0.4}) == "mean shift +0.4"


@pytest.mark.parametrize(
    ("delta", "written"),
    [(9.435412868641968e-7, "9.4e-7"), (1e-6, "1e-6"), (0.05, "0.05"), (0.0, "0")],
)
def test_delta_in_scientific_notation_with_two_digits(delta, written):
    assert probability(delta) == written


def test_released_tables_keep_integers_whole_and_floats_short():
    table = pd.DataFrame({"count": [3.0, 4.0], "sum": [1 / 3, 2 / 3], "edge": [0.1 + 0.2, 1.0]})
    out = released_table(table, keep=("edge",))
    assert out["count"].tolist() == [3, 4] and out["count"].dtype.kind == "i"
    assert out["sum"].tolist() == [significant(1 / 3), 0.666667]
    assert out["edge"].tolist() == table["edge"].tolist()


def test_a_dp_csv_writes_bin_edges_as_people_write_them():
    df = pd.DataFrame({"x": np.linspace(0, 57, 200)})
    query = DPQuery.from_params(
        {"kind": "range", "epsilon": 1.0, "columns": ["x"], "bounds": [0, 57], "bins": 30}
    )
    csv = io.StringIO()
    release(df, query, rng=np.random.default_rng(0)).table.to_csv(csv, index=False)
    text = csv.getvalue()
    assert "5.699999999999999" not in text and "\n5.7," in text
    rows = text.splitlines()[1:]
    assert all(len(cell) <= 12 for line in rows for cell in line.split(","))
