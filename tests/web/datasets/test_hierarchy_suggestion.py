"""The builder suggested for a column is found once per file and column, and is the one found
from its values every time: a change to the copy a plan holds is not what the next one gets,
and another file's column of the same name gets its own."""

import pandas as pd
import pytest

from anonweb.datasets import hierarchy_suggestion
from anonweb.datasets.hierarchy_suggestion import suggest_hierarchy
from anonweb.datasets.models import Dataset

CASES = [
    ("age", pd.Series([17, 25, 38, 90]), {"builder": "interval", "width": 5}),
    ("zip", pd.Series(["47677", "47602", "47678"]), {"builder": "mask"}),
    ("sex", pd.Series(["F", "M", None]), {"rows": [["F", "*"], ["M", "*"]]}),
    ("visit", pd.Series(["2020-01-03", "2021-05-06"]), {"builder": "date"}),
]


@pytest.mark.parametrize(("column", "values", "expected"), CASES)
def test_a_suggestion_is_the_one_its_values_give_every_time(column, values, expected, monkeypatch):
    fits = []
    real = hierarchy_suggestion._fit
    monkeypatch.setattr(hierarchy_suggestion, "_fit", lambda c, s: fits.append(c) or real(c, s))
    dataset = Dataset()
    first = suggest_hierarchy(dataset, column, values, stored={})
    assert first == expected
    first.clear()  # a plan's copy, edited
    assert suggest_hierarchy(dataset, column, values, stored={}) == expected
    assert fits == [column]  # fitted once for this file's column


def test_another_file_s_column_of_the_same_name_gets_its_own():
    narrow, wide = Dataset(), Dataset()
    assert suggest_hierarchy(narrow, "age", pd.Series([20, 30]), stored={}) == {
        "builder": "interval",
        "width": 1,
    }
    assert suggest_hierarchy(wide, "age", pd.Series([0, 20_000]), stored={}) == {
        "builder": "interval",
        "width": 1000,
    }
