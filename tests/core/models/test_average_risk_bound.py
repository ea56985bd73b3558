"""Average risk's condition for a search: whether suppressing at most a number of records, in
whole classes, could leave a table under the ceiling. It must hold wherever some suppression
does (else the search would skip a node that satisfies the model), and it must keep holding as
classes merge (else the search would settle coarser nodes wrongly)."""

from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from anonweb.core.models import AverageRisk, ClassData
from anonweb.core.models.average_risk import TOLERANCE


def _satisfiable(sizes: list[int], threshold: float, max_out: int) -> bool:
    """Whether some set of classes holding at most ``max_out`` records, suppressed, leaves
    classes / records kept at or under ``threshold`` (every subset tried)."""
    for r in range(len(sizes) + 1):
        for out in itertools.combinations(range(len(sizes)), r):
            if sum(sizes[i] for i in out) > max_out:
                continue
            kept = [s for i, s in enumerate(sizes) if i not in out]
            if not kept or len(kept) / sum(kept) <= threshold + TOLERANCE:
                return True
    return False


def _one(model: AverageRisk, sizes: list[int], max_out: int) -> bool:
    data = ClassData(np.array(sizes, dtype=np.int64))
    got = model.satisfiable_in_groups(data, np.zeros(len(sizes), dtype=np.int64), 1, max_out)
    return bool(got[0])


tables = st.lists(st.integers(1, 6), min_size=1, max_size=8)
thresholds = st.sampled_from([0.1, 0.2, 0.25, 1 / 3, 0.4, 0.5, 0.75, 1.0])


@settings(max_examples=200, deadline=None)
@given(sizes=tables, threshold=thresholds, max_out=st.integers(0, 12))
def test_a_table_some_suppression_satisfies_is_never_ruled_out(sizes, threshold, max_out):
    if _satisfiable(sizes, threshold, max_out):
        assert _one(AverageRisk(threshold), sizes, max_out)


@settings(max_examples=200, deadline=None)
@given(sizes=tables, threshold=thresholds, max_out=st.integers(0, 12), data=st.data())
def test_merging_classes_never_rules_a_table_out(sizes, threshold, max_out, data):
    # a coarser node's classes are unions of the finer node's
    parts = data.draw(st.lists(st.integers(0, len(sizes) - 1), min_size=len(sizes)))
    parts = parts[: len(sizes)]
    merged = np.bincount(parts, weights=sizes)
    merged = [int(s) for s in merged if s > 0]
    model = AverageRisk(threshold)
    if _one(model, sizes, max_out):
        assert _one(model, merged, max_out)


def test_it_rules_out_a_table_whose_largest_classes_are_still_too_many():
    # ten records in classes 4, 3, 1, 1, 1: with at most two suppressed, three classes or
    # more hold the eight or more records kept, 3 / 10 at least
    sizes = [4, 3, 1, 1, 1]
    assert not _one(AverageRisk(0.29), sizes, 2)
    assert _one(AverageRisk(0.3), sizes, 2)  # bound 3 / 10; suppressing two: 3 / 8 fails
    assert _one(AverageRisk(0.5), sizes, 0)  # nothing suppressed: 5 / 10


def test_tables_side_by_side_are_judged_each_on_its_own():
    sizes = np.array([4, 3, 1, 1, 1, 5, 5], dtype=np.int64)
    groups = np.array([1, 0, 1, 1, 0, 2, 2], dtype=np.int64)  # table 3 holds no class
    got = AverageRisk(0.25).satisfiable_in_groups(ClassData(sizes), groups, 4, 1)
    for g in range(4):
        alone = sizes[groups == g].tolist()
        expected = _one(AverageRisk(0.25), alone, 1) if alone else True
        assert bool(got[g]) == expected
