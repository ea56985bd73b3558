"""Recursive (c,l)-diversity (anonweb/core/models/recursive_l.py and
``LDiversity.satisfies_recursive`` in diversity.py) at its boundaries, worked by hand: the
default c, the strict comparison r1 < c (r_l + ... + r_m), c = 0 and l = 0 refused, and the
model passing a table exactly at its l."""

from __future__ import annotations

import pandas as pd
import pytest

from anonweb.core.errors import ParameterError
from anonweb.core.models import RecursiveCL, class_data
from anonweb.core.models.diversity import l_diversity
from anonweb.core.models.recursive_l import DEFAULT_C


def one_class(counts: dict[str, int]) -> pd.DataFrame:
    """One class (G = g) whose sensitive values S have the given counts."""
    values = [v for v, n in counts.items() for _ in range(n)]
    return pd.DataFrame({"G": ["g"] * len(values), "S": values})


def test_default_c_is_2_and_used_when_none_is_given():
    # Counts 5, 3, 1, 1. c = 2: l = 2 holds (5 < 2 * 5), l = 3 not (5 < 2 * 2 fails): l = 2.
    # With c = 3 it would be 3 (5 < 3 * 2).
    assert DEFAULT_C == 2.0
    ld = l_diversity(
        one_class({"a": 5, "b": 3, "c": 1, "d": 1}), quasi_identifiers=["G"], sensitive="S"
    )
    assert (ld.recursive_c, ld.l_recursive) == (2.0, 2)


def test_a_class_exactly_at_r1_equal_c_times_the_tail_is_not_diverse():
    # Counts 4, 2 with c = 2: l = 1 holds (4 < 2 * 6); l = 2 needs 4 < 2 * 2, which is equal.
    ld = l_diversity(
        one_class({"a": 4, "b": 2}), quasi_identifiers=["G"], sensitive="S", recursive_c=2
    )
    assert ld.l_recursive == 1
    assert ld.satisfies_recursive(c=2, l=1)
    assert not ld.satisfies_recursive(c=2, l=2)
    assert ld.satisfies_recursive(c=2.01, l=2)


def test_l_recursive_per_class_over_several_classes():
    # c = 2. g: counts 3, 1: l = 1 (3 < 2 * 4), not l = 2 (3 < 2 * 1 fails) -> 1.
    # h: counts 1, 1, 1: l = 3 holds (1 < 2 * 1) -> 3. k: count 2: l = 1 (2 < 2 * 2) -> 1.
    df = pd.DataFrame({"G": list("gggghhhkk"), "S": list("aaabxyzqq")})
    ld = l_diversity(df, quasi_identifiers=["G"], sensitive="S", recursive_c=2)
    assert ld.per_class()["l_recursive"] == [1, 3, 1]
    assert ld.l_recursive == 1


def test_c_below_1_by_hand():
    # Counts 1, 1, 1, 1 with c = 0.5: l = 2 holds (1 < 0.5 * 3), l = 3 not (1 < 0.5 * 2).
    ld = l_diversity(
        one_class({"a": 1, "b": 1, "c": 1, "d": 1}),
        quasi_identifiers=["G"],
        sensitive="S",
        recursive_c=0.5,
    )
    assert ld.l_recursive == 2
    data = class_data(
        one_class({"a": 1, "b": 1, "c": 1, "d": 1}), quasi_identifiers=["G"], sensitive=["S"]
    )
    assert RecursiveCL("S", 0.5, 2).check(data).satisfied
    assert not RecursiveCL("S", 0.5, 3).check(data).satisfied


@pytest.mark.parametrize("c", [0, 0.0, -1])
def test_c_zero_or_below_is_refused(c):
    ld = l_diversity(one_class({"a": 2, "b": 2}), quasi_identifiers=["G"], sensitive="S")
    with pytest.raises(ParameterError, match="recursive diversity needs c > 0"):
        ld.satisfies_recursive(c=c, l=1)
    with pytest.raises(ParameterError, match="needs c > 0"):
        RecursiveCL("S", c, 1)


def test_l_zero_is_refused_and_l_one_accepted():
    ld = l_diversity(one_class({"a": 2, "b": 2}), quasi_identifiers=["G"], sensitive="S")
    with pytest.raises(ParameterError, match="needs l >= 1, got 0"):
        ld.satisfies_recursive(c=2, l=0)
    assert ld.satisfies_recursive(c=2, l=1)
    with pytest.raises(ParameterError):
        RecursiveCL("S", 2, 0)
    assert RecursiveCL("S", 2, 1).l == 1


def test_the_model_passes_a_table_exactly_at_its_l():
    # Counts 2, 2, 1 with c = 2: l = 2 holds (2 < 2 * 3), l = 3 not (2 < 2 * 1 fails).
    df = one_class({"a": 2, "b": 2, "c": 1})
    data = class_data(df, quasi_identifiers=["G"], sensitive=["S"])
    assert RecursiveCL("S", 2, 2).check(data).satisfied
    assert not RecursiveCL("S", 2, 3).check(data).satisfied
    assert l_diversity(df, quasi_identifiers=["G"], sensitive="S").satisfies_recursive(c=2, l=2)


def test_homogeneous_classes_are_the_ones_with_a_single_value():
    # g holds x only (3 records), h holds x and y, k holds z only (1 record).
    df = pd.DataFrame({"G": list("ggghhk"), "S": list("xxxxyz")})
    ld = l_diversity(df, quasi_identifiers=["G"], sensitive="S")
    assert (ld.homogeneous_classes, ld.homogeneous_records) == (2, 4)
    assert ld.homogeneous(df) == [
        {"quasi_identifiers": {"G": "g"}, "size": 3, "value": "x"},
        {"quasi_identifiers": {"G": "k"}, "size": 1, "value": "z"},
    ]
