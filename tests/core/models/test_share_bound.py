"""The records a node's specializations must suppress: under δ-disclosure's and enhanced
β-likeness's caps on value shares (:mod:`anonweb.core.models.share_bound`) and under
t-closeness's distance (:meth:`TClosenessCoverage.least_suppressed`). The search rejects a
node and all its specializations on this bound, so it must never exceed what any split of a
class really suppresses, and its sum must never grow as classes merge."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anonweb.core.io.hierarchy import Hierarchy
from anonweb.core.models.beta_likeness import BetaLikeness, BetaLikenessCaps, likeness_caps
from anonweb.core.models.counts import ClassData, SensitiveDomain
from anonweb.core.models.delta_disclosure import DeltaDisclosure, DeltaDisclosureCoverage
from anonweb.core.models.share_bound import least_failing, row_max, row_min
from anonweb.core.models.t_closeness import TCloseness


def _domain(counts: list[int]) -> SensitiveDomain:
    return SensitiveDomain(
        "S", pd.Index([f"v{i}" for i in range(len(counts))]), np.asarray(counts, dtype=np.int64)
    )


def _data(domain: SensitiveDomain, hist: np.ndarray) -> ClassData:
    return ClassData(hist.sum(axis=1), histograms=lambda name: (domain, hist))


def test_hand_worked_bound():
    # two values, each half the table; enhanced 1-likeness caps each at 0.5 (1 + ln 2) = 0.8466
    # of a class. A class of 9 + 1 records: keeping f records out, the other 10 - f may hold at
    # most 0.8466 (10 - f) of the first value, so 9 - 0.8466 (10 - f) <= f: f >= 3.48, 4
    # records. With 4 out, 5 + 1 are kept (5 <= 5.08); with 3, 6 of 7 would be (6 > 5.93)
    domain = _domain([50, 50])
    hist = np.array([[9.0, 1.0], [5.0, 5.0], [1.0, 0.0]])
    model = BetaLikenessCaps("S", 1.0)
    assert model.least_suppressed(_data(domain, hist), np.zeros(3, dtype=bool)).tolist() == [
        4,
        0,
        1,
    ]
    # the settled classes (suppressed whole already) are left at 0
    settled = np.array([False, False, True])
    assert model.least_suppressed(_data(domain, hist), settled).tolist() == [4, 0, 0]
    # 2-disclosure: a class may hold at most 4 p(s) of a value: a value with a share of 10%
    # in a class of 10 holding 7 of it: 7 - 0.4 (10 - f) <= f gives f >= 5
    domain = _domain([10, 90])
    hist = np.array([[7.0, 3.0]])
    got = DeltaDisclosureCoverage("S", 2.0).least_suppressed(
        _data(domain, hist), np.zeros(1, dtype=bool)
    )
    assert got.tolist() == [5]
    # with parts of 5 records or more, a part holding the rare value holds more than
    # 0.1 / 4 * 5 = 0.125 records of it: no bound from that. With parts of 50 or more, more
    # than 1.25: a class holding 1 record of it cannot keep it in any part, and that record
    # is suppressed (the other 19 may be kept: 19 / 19 of the common value is within its cap)
    hist = np.array([[1.0, 19.0]])
    coverage = DeltaDisclosureCoverage("S", 2.0)
    assert coverage.least_suppressed(_data(domain, hist), np.zeros(1, dtype=bool), 5).tolist() == [
        0
    ]
    assert coverage.least_suppressed(_data(domain, hist), np.zeros(1, dtype=bool), 50).tolist() == [
        1
    ]


def _splits(rng, hist_row: np.ndarray, tries: int) -> list[np.ndarray]:
    """Random ways to split one class's records into parts (each a parts x values matrix)."""
    records = np.repeat(np.arange(len(hist_row)), hist_row.astype(int))
    out = []
    for _ in range(tries):
        parts = int(rng.integers(1, len(records) + 1))
        label = rng.integers(0, parts, len(records))
        matrix = np.zeros((parts, len(hist_row)))
        np.add.at(matrix, (label, records), 1.0)
        out.append(matrix[matrix.sum(axis=1) > 0])
    return out


def _tree(m: int) -> Hierarchy:
    """Values v0..v(m-1) under two inner nodes, then the root."""
    return Hierarchy(
        rows=tuple((f"v{i}", "low" if i < m // 2 else "high", "*") for i in range(m)),
        attribute="S",
    )


def _models(rng, m: int):
    beta = float(rng.uniform(0.2, 3.0))
    delta = float(rng.uniform(0.3, 3.0))
    t = float(rng.uniform(0.02, 0.5))
    out = [
        (BetaLikeness("S", beta), BetaLikenessCaps("S", beta)),
        (DeltaDisclosure("S", delta), DeltaDisclosureCoverage("S", delta)),
        (TCloseness("S", t), None),
        (TCloseness("S", t, "hierarchical", _tree(m)), None),
    ]
    return [(model, bound or model.implied()[0]) for model, bound in out]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 1_000_000))
def test_no_split_of_a_class_suppresses_fewer_records_than_the_bound(seed):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 6))
    domain = _domain(list(rng.integers(1, 40, m)))
    hist = rng.integers(0, 6, (6, m)).astype(float) * (rng.random((6, m)) < 0.7)
    hist[hist.sum(axis=1) == 0, 0] = 1.0
    # the parts kept hold k records or more (k-anonymity beside the model)
    k = int(rng.integers(1, 6))
    for model, bound in _models(rng, m):
        least = bound.least_suppressed(_data(domain, hist), np.zeros(len(hist), dtype=bool), k)
        assert (least <= hist.sum(axis=1)).all()
        # the class itself is one split: a class the bound charges fails the model or k
        fails = ~model.passes(_data(domain, hist)) | (hist.sum(axis=1) < k)
        assert not ((least > 0) & ~fails).any()
        for row, charged in zip(hist, least):
            for parts in _splits(rng, row, 40):
                sizes = parts.sum(axis=1)
                out = sizes[~model.passes(_data(domain, parts)) | (sizes < k)].sum()
                assert out >= charged, (model, k, row, parts)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 1_000_000))
def test_the_bound_of_a_merge_is_at_most_the_sum_of_its_parts(seed):
    # what lets the search treat it as monotonic: a node within the suppression limit on the
    # bound has every generalization within it too
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, 8))
    domain = _domain(list(rng.integers(1, 200, m)))
    hist = rng.integers(0, 30, (40, m)).astype(float) * (rng.random((40, m)) < 0.5)
    hist[hist.sum(axis=1) == 0, int(rng.integers(0, m))] = 1.0
    partner = rng.permutation(len(hist))
    merged = hist + hist[partner]
    none = np.zeros(len(hist), dtype=bool)
    k = int(rng.integers(1, 40))
    for _model, bound in _models(rng, m):
        alone = bound.least_suppressed(_data(domain, hist), none, k)
        both = bound.least_suppressed(_data(domain, merged), none, k)
        assert (both <= alone + alone[partner]).all()


def test_the_bound_reaches_the_whole_class_when_the_caps_cannot_cover_it():
    # a class of values whose caps add up to less than 1 fails in every split: the coverage
    # conditions of both models are the bound's special case
    domain = _domain([1, 1, 98])
    hist = np.array([[3.0, 2.0, 0.0]])
    caps = likeness_caps(domain.share, 1.0)
    assert caps[:2].sum() < 1
    assert least_failing(hist, caps).tolist() == [5]
    assert not BetaLikenessCaps("S", 1.0).passes(_data(domain, hist)).any()


def test_beta_likeness_implies_its_caps():
    (caps,) = BetaLikeness("S", 1.5).implied()
    assert isinstance(caps, BetaLikenessCaps) and caps.monotonic
    assert caps.to_dict() == {"model": "beta_likeness_caps", "sensitive": "S", "beta": 1.5}


def test_hand_worked_distance_bound():
    # equal-distance 0.2-closeness over two values, each half the table: a class of one value
    # is at distance 0.5, the largest there is. A class of 8 + 2 records is at 0.3: keeping f
    # out, 10 * 0.3 <= (10 - f) 0.2 + 0.5 f gives f >= 10 / 3, 4 records (with 4 out of 8 + 2,
    # 4 + 2 are kept, at 1/6 <= 0.2)
    domain = _domain([50, 50])
    hist = np.array([[8.0, 2.0], [6.0, 4.0], [3.0, 0.0]])
    (bound,) = TCloseness("S", 0.2).implied()
    got = bound.least_suppressed(_data(domain, hist), np.zeros(3, dtype=bool))
    assert got.tolist() == [4, 0, 3]


def test_ordered_t_closeness_offers_no_bound():
    assert TCloseness("S", 0.2, "ordered").implied() == ()


def _least_by_bisection(row: np.ndarray, caps: np.ndarray) -> float:
    """L(C) from its definition: the least f in [0, n] with f >= sum_s max(0, c_s - a_s (n - f))
    (the set of such f is an interval ending at n), by bisection."""
    n = row.sum()

    def g(f: float) -> float:
        return f - np.maximum(0.0, row - caps * (n - f)).sum()

    if g(0.0) >= 0:
        return 0.0
    lo, hi = 0.0, float(n)
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if g(mid) >= 0 else (mid, hi)
    return hi


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 1_000_000))
def test_the_bound_is_the_least_failing_records_of_each_class(seed):
    # every class on its own, by bisection on the definition, with one cap per value or a row
    # of caps per class, and with some classes left out (``wanted``): the Newton steps, taken
    # only for the classes that still move, must end on the same whole number of records
    rng = np.random.default_rng(seed)
    rows, m = int(rng.integers(1, 60)), int(rng.integers(1, 16))
    hist = rng.poisson(rng.uniform(0.2, 9.0), (rows, m)).astype(float)
    hist *= rng.random((rows, m)) < 0.8
    if rng.random() < 0.5:
        caps = rng.uniform(0.02, 1.2, m)
        row_caps = np.broadcast_to(caps, hist.shape)
    else:
        caps = rng.uniform(0.02, 1.2, (rows, m)) * (rng.random((rows, m)) < 0.8)
        row_caps = caps
    wanted = rng.random(rows) < 0.7 if rng.random() < 0.5 else None
    got = least_failing(hist, caps, wanted)
    for i, (row, cap) in enumerate(zip(hist, row_caps)):
        if wanted is not None and not wanted[i]:
            assert got[i] == 0
            continue
        exact = _least_by_bisection(row, cap)
        if abs(exact - round(exact)) > 1e-6:  # away from whole numbers, where slack decides
            assert got[i] == math.ceil(exact), (row, cap)


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 1_000_000))
def test_a_floor_gives_the_bound_of_caps_set_to_zero_below_it(seed):
    # δ-disclosure's lower half under k-anonymity caps a value at 0 in a class holding fewer
    # records of it than its floor: least_failing with the floor must give what the matrix of
    # caps zeroed there gives, bit for bit, for every class wanted or not
    rng = np.random.default_rng(seed)
    rows, m = int(rng.integers(1, 60)), int(rng.integers(1, 16))
    hist = rng.poisson(rng.uniform(0.2, 9.0), (rows, m)).astype(float)
    hist *= rng.random((rows, m)) < 0.8
    caps = rng.uniform(0.02, 1.2, m)
    floor = rng.uniform(0.0, 6.0, m) * (rng.random(m) < 0.7)
    wanted = rng.random(rows) < 0.7 if rng.random() < 0.5 else None
    zeroed = np.where(hist < floor, 0.0, caps)
    expected = least_failing(hist, zeroed, wanted)
    assert least_failing(hist, caps, wanted, floor).tolist() == expected.tolist()


def test_delta_disclosure_bound_with_a_floor_matches_its_definition():
    # parts of at least 50 records keep more than 0.1 / 4 * 50 = 1.25 records of the rare
    # value: a class holding one cannot keep it (cap 0), one holding two may
    domain = _domain([10, 90])
    hist = np.array([[1.0, 19.0], [2.0, 58.0], [0.0, 60.0]])
    coverage = DeltaDisclosureCoverage("S", 2.0)
    got = coverage.least_suppressed(_data(domain, hist), np.zeros(3, dtype=bool), 50)
    caps = domain.share * 4.0
    floor = domain.share * 0.25 * 50 * (1.0 - 1e-9)
    assert got.tolist() == least_failing(hist, np.where(hist < floor, 0.0, caps)).tolist()
    assert got.tolist() == [1, 0, 0]


@pytest.mark.parametrize("rows", [0, 1, 5, 255, 256, 257, 2000])
@pytest.mark.parametrize("cols", [1, 14, 64, 65])
def test_row_extremes_are_numpys_whatever_the_shape(rows, cols):
    # a call per column for tall matrices, numpy's reduction for short or wide ones
    rng = np.random.default_rng(rows * 100 + cols)
    matrix = rng.normal(size=(rows, cols))
    assert row_max(matrix).tolist() == matrix.max(axis=1).tolist()
    assert row_min(matrix).tolist() == matrix.min(axis=1).tolist()
    flags = matrix > 0.5
    assert row_max(flags).tolist() == flags.any(axis=1).tolist()
