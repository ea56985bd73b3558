"""Each hierarchy builder bounds what it will create before it creates it: a width of 1e-9
over ages would be 10^11 intervals (9 GB in a web process before it gave up), a 10,000-character
value 10,000 mask levels. The refusal names the limit and what would fit."""

from __future__ import annotations

import time

import pandas as pd
import pytest

from anonweb.core.errors import CoreError, ParameterError
from anonweb.core.io.hierarchy_builders import (
    MAX_INTERVALS,
    MAX_LEVELS,
    build_hierarchy,
    interval_hierarchy,
    mask_hierarchy,
)

AGES = pd.Series([17, 22, 35, 52, 90], name="age")


@pytest.mark.parametrize("width", [1e-9, 1e-6, 5e-5])
def test_a_width_making_too_many_intervals_is_refused_at_once(width):
    start = time.perf_counter()
    with pytest.raises(ParameterError) as refused:
        build_hierarchy({"builder": "interval", "width": width}, AGES)
    assert time.perf_counter() - start < 0.5
    message = str(refused.value)
    assert "interval hierarchy for 'age'" in message
    assert f"at most {MAX_INTERVALS:,} are allowed" in message
    assert "choose a width of at least 7.31e-05" in message


def test_the_smallest_width_the_message_suggests_is_accepted():
    hierarchy = interval_hierarchy(AGES, width=7.31e-05, attribute="age", levels=2)
    assert len(hierarchy.rows) == 5


def test_a_start_far_below_the_values_counts_towards_the_intervals():
    with pytest.raises(ParameterError, match="intervals between -1000000000"):
        interval_hierarchy(AGES, width=1, start=-1e9, attribute="age")


def test_an_infinite_value_is_refused_with_a_way_out():
    with pytest.raises(CoreError, match="infinite number; set bottom and top, or use breaks"):
        interval_hierarchy(pd.Series([1.0, float("inf")]), width=1, attribute="x")


def test_masking_a_long_value_is_refused_not_built_level_by_level():
    notes = pd.Series(["short", "x" * 10_000], name="note")
    with pytest.raises(ParameterError) as refused:
        mask_hierarchy(notes, attribute="note")
    assert "10,000 characters" in str(refused.value)
    assert f"at most {MAX_LEVELS} levels" in str(refused.value)
    assert len(mask_hierarchy(pd.Series(["1" * MAX_LEVELS])).rows[0]) == MAX_LEVELS + 1
