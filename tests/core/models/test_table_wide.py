"""Table-wide models suppress the fewest smallest classes that make them hold within the limit
(ARX's RiskBasedCriterion.enforce): hand-worked tables, the order among classes of one size,
and the bisection against a plain scan of every number of classes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anonweb.core.models import AverageRisk, ClassData
from anonweb.core.models.population_uniqueness import PopulationUniqueness, estimated_uniqueness
from anonweb.core.models.survey_risk import GlobalRisk
from anonweb.core.models.table_wide import (
    table_wide_suppression,
    table_wide_suppression_in_groups,
)

SIZES = [1, 1, 1, 2, 5, 10]  # 6 classes, 20 records: average risk 0.3


def _more(models, sizes, budget, out=None, **kw):
    sizes = np.asarray(sizes)
    out = np.zeros(len(sizes), dtype=bool) if out is None else np.asarray(out)
    got = table_wide_suppression(models, ClassData(sizes), out, budget, **kw)
    return None if got is None else np.flatnonzero(got).tolist()


@pytest.mark.parametrize(
    "threshold,budget,expected",
    [
        # nothing suppressed while 6 / 20 = 0.3 is under the ceiling
        (0.3, 20, []),
        # 5/19 = 0.263, 4/18 = 0.222: the two smallest
        (0.25, 20, [0, 1]),
        (0.25, 2, [0, 1]),
        (0.25, 1, None),  # one record to spare: 5/19 is still above 0.25
        # 3/17 = 0.176
        (0.2, 3, [0, 1, 2]),
        (0.2, 2, None),
        # 2/15 = 0.133: the class of 2 goes too (5 records)
        (0.15, 5, [0, 1, 2, 3]),
        (0.15, 4, None),
        # 1/10 = 0.1 exactly: the ceiling holds at equality
        (0.1, 10, [0, 1, 2, 3, 4]),
        # below 1/10 only an empty table passes: every record
        (0.05, 20, [0, 1, 2, 3, 4, 5]),
        (0.05, 19, None),
    ],
)
def test_average_risk_by_hand(threshold, budget, expected):
    assert _more([AverageRisk(threshold)], SIZES, budget) == expected


def test_only_kept_classes_are_taken_and_counted():
    # the class of 2 is suppressed already (a per-class model): 5 classes and 18 records
    # kept, 5/18 = 0.278; then the singletons go: 4/17 = 0.235, 3/16 = 0.1875
    out = [False, False, False, True, False, False]
    assert _more([AverageRisk(0.25)], SIZES, 1, out) == [0]
    assert _more([AverageRisk(0.2)], SIZES, 2, out) == [0, 1]
    assert _more([AverageRisk(0.2)], SIZES, 1, out) is None
    # 2/15 = 0.133 needs the third singleton, 1/10 the class of 5 as well (never the class
    # of 2, which is gone already)
    assert _more([AverageRisk(0.15)], SIZES, 3, out) == [0, 1, 2]
    assert _more([AverageRisk(0.1)], SIZES, 8, out) == [0, 1, 2, 4]


def test_one_class_never_fits_a_limit_below_the_whole_table():
    # the top node: one class of every record, which a limit below 1 cannot suppress (ARX
    # leaves a class at the top of every hierarchy out of the candidates: the same outcome)
    assert _more([AverageRisk(0.04)], [20], 19) is None
    assert _more([AverageRisk(0.04)], [20], 20) == [0]
    assert _more([AverageRisk(0.04)], [25], 24) == []


@pytest.mark.parametrize(
    "ceiling,budget,expected",
    [
        # Zayatz, N = 100: 0.0559 with every class kept, 0.0286 without one singleton,
        # 0.0083 without two, 0 without the three (no sample uniques left)
        (0.06, 20, []),
        (0.03, 20, [0]),
        (0.01, 20, [0, 1]),
        (0.005, 3, [0, 1, 2]),
        (0.005, 2, None),
    ],
)
def test_population_uniqueness_by_hand(ceiling, budget, expected):
    shares = [estimated_uniqueness(np.array(SIZES[j:]), 100, "zayatz") for j in range(4)]
    assert shares == pytest.approx([0.0558552, 0.0286300, 0.0083258, 0.0], abs=1e-7)
    assert _more([PopulationUniqueness(ceiling, 100, "zayatz")], SIZES, budget) == expected


def test_every_table_wide_model_must_hold():
    # average risk 0.25 wants two singletons gone, Zayatz 0.005 all three
    models = [AverageRisk(0.25), PopulationUniqueness(0.005, 100, "zayatz")]
    assert _more(models, SIZES, 20) == [0, 1, 2]
    assert _more(models[::-1], SIZES, 20) == [0, 1, 2]
    # the survey ceiling without weights is classes / records too
    assert _more([GlobalRisk(0.2)], SIZES, 20) == _more([AverageRisk(0.2)], SIZES, 20)


def test_classes_of_one_size_are_taken_in_the_order_of_the_ties():
    sizes = [2, 1, 3, 1, 1]
    ranks = np.array([0, 9, 0, 4, 7])  # a loss per class: the least goes first

    def ties(idx):
        return [ranks[idx]]

    # 5 classes, 8 records: 0.625; two singletons out: 3/6 = 0.5
    assert _more([AverageRisk(0.5)], sizes, 8, ties=ties) == [3, 4]
    # without keys, classes of one size go in class order
    assert _more([AverageRisk(0.5)], sizes, 8) == [1, 3]
    # keys beyond the first break its ties; the size comes before every key
    assert _more([AverageRisk(0.5)], sizes, 8, ties=lambda idx: [idx * 0, -idx]) == [3, 4]
    # a key that would put the larger classes first changes nothing: the size comes first
    larger_first = _more([AverageRisk(0.5)], sizes, 8, ties=lambda idx: [-np.asarray(sizes)[idx]])
    assert larger_first == [1, 3]


class _ReadsMore(AverageRisk):
    """Average risk declared as reading more than the sizes: the order among classes of one
    size is then fixed before the number is sought."""

    @property
    def sizes_only(self) -> bool:
        return False


@settings(max_examples=100, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 4), min_size=1, max_size=30),
    threshold=st.floats(0.05, 1.0),
    budget=st.integers(0, 40),
    seed=st.integers(0, 1000),
)
def test_the_ties_pick_the_same_classes_whenever_they_are_read(sizes, threshold, budget, seed):
    rank = np.random.default_rng(seed).permutation(len(sizes))

    def ties(idx):
        return [rank[idx] % 3, rank[idx]]

    early = _more([_ReadsMore(threshold)], sizes, budget, ties=ties)
    assert _more([AverageRisk(threshold)], sizes, budget, ties=ties) == early
    if early:
        # of the largest size taken, the classes taken are the first by the keys
        largest = max(sizes[i] for i in early)
        taken = [i for i in early if sizes[i] == largest]
        alike = [i for i, s in enumerate(sizes) if s == largest]
        order = sorted(alike, key=lambda i: (rank[i] % 3, rank[i]))
        assert set(order[: len(taken)]) == set(taken)


def test_tables_side_by_side_are_decided_each_as_alone():
    rng = np.random.default_rng(4)
    sizes = rng.integers(1, 6, 60)
    groups = rng.integers(0, 5, 60)
    out = rng.random(60) < 0.1
    budgets = np.array([30, 3, -1, 10, 0])
    model = [AverageRisk(0.3)]
    data = ClassData(sizes)
    more, met = table_wide_suppression_in_groups(model, data, out, groups, budgets)
    for g, budget in enumerate(budgets):
        rows = np.flatnonzero(groups == g)
        if budget < 0:
            assert not met[g] and not more[rows].any()  # failed already: not looked at
            continue
        alone = table_wide_suppression(model, ClassData(sizes[rows]), out[rows], int(budget))
        assert met[g] == (alone is not None)
        assert more[rows].tolist() == (alone.tolist() if alone is not None else [False] * len(rows))
    assert not (more & out).any()


def _fewest_by_scan(sizes, out, threshold, budget):
    """Every number of the smallest kept classes in turn (class order among equal sizes)."""
    kept = [i for i in range(len(sizes)) if not out[i]]
    order = sorted(kept, key=lambda i: (sizes[i], i))
    for j in range(len(order) + 1):
        gone = set(order[:j])
        if sum(sizes[i] for i in gone) > budget:
            return None
        left = [sizes[i] for i in kept if i not in gone]
        if not left or len(left) / sum(left) <= threshold + 1e-12:
            return sorted(gone)
    return None


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.integers(1, 12), min_size=1, max_size=40),
    threshold=st.floats(0.02, 1.0),
    budget=st.integers(0, 60),
    seed=st.integers(0, 1000),
)
def test_average_risk_bisection_finds_the_fewest_exactly(sizes, threshold, budget, seed):
    out = np.random.default_rng(seed).random(len(sizes)) < 0.2
    got = _more([AverageRisk(threshold)], sizes, budget, out)
    assert got == _fewest_by_scan(sizes, out, threshold, budget)
