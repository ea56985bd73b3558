"""Sensitive counts stored compact (int32 classes and counts, values in the smallest type) give
the figures an independent per-class computation gives, at the edges of each type, and the
figures measured over slices of whole classes are those measured over all triples, bit for bit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from anonweb.core.models import counts as counts_module
from anonweb.core.models.beta_likeness import likeness_per_class
from anonweb.core.models.counts import ClassData, SensitiveCounts, SensitiveDomain
from anonweb.core.models.delta_disclosure import delta_per_class
from anonweb.core.models.entropy_l import entropy
from anonweb.core.models.recursive_l import recursive_l
from anonweb.core.models.t_closeness import equal_distance


def _counts(cls: np.ndarray, val: np.ndarray, w: np.ndarray, m: int, n: int) -> SensitiveCounts:
    totals = np.zeros(m, dtype=np.int64)
    np.add.at(totals, val, w)
    domain = SensitiveDomain("s", pd.Index(range(m)), totals)
    return SensitiveCounts.from_codes(domain, cls, val, n, weights=w)


def _reference(cls: np.ndarray, val: np.ndarray, w: np.ndarray, m: int, n: int, c: float):
    """Per class, from a table of (class, value, count) grouped by pandas: entropy, recursive
    l, δ, equal-distance EMD, each by its textbook formula."""
    cells = pd.DataFrame({"c": cls, "v": val, "w": w}).groupby(["c", "v"])["w"].sum()
    q = np.bincount(val, weights=w, minlength=m) / w.sum()
    ent, rec, dlt, emd = np.zeros(n), np.zeros(n, int), np.zeros(n), np.zeros(n)
    for j, group in cells.groupby(level=0):
        r = np.sort(group.to_numpy())[::-1].astype(float)
        p = group.to_numpy() / group.sum()
        ent[j] = -(p * np.log(p)).sum()
        rec[j] = sum(r[0] < c * r[i:].sum() for i in range(len(r)))
        values = group.index.get_level_values(1).to_numpy()
        dlt[j] = np.abs(np.log2(p / q[values])).max()
        emd[j] = 0.5 * (np.abs(p - q[values]).sum() + 1.0 - q[values].sum())
    return ent, rec, dlt, np.clip(emd, 0.0, 1.0)


@pytest.mark.parametrize(
    ("m", "code"),
    [(200, np.uint8), (300, np.uint16), (70_000, np.int32)],
)
def test_value_codes_in_the_smallest_type_give_the_reference_figures(m, code):
    rng = np.random.default_rng(m)
    rows = 150_000
    cls = np.sort(rng.integers(0, 4_000, rows))
    val = rng.integers(0, m, rows)
    val[:m] = np.arange(m)  # every value occurs (more than 65,535 of them at the last size)
    order = np.lexsort((val, cls))
    cls, val = cls[order], val[order]
    w = rng.integers(1, 5, rows)
    n = int(cls.max()) + 1
    sc = _counts(cls, val, w, m, n)
    assert sc.val.dtype == code
    assert sc.cls.dtype == np.int32 and sc.cnt.dtype == np.int32
    assert sc.sizes.dtype == np.int64
    ent, rec, dlt, emd = _reference(cls, val, w, m, n, 2.0)
    np.testing.assert_allclose(entropy(sc), ent, rtol=1e-12, atol=1e-12)
    assert np.array_equal(recursive_l(sc, 2.0), rec)
    np.testing.assert_allclose(delta_per_class(sc), dlt, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(equal_distance(sc), emd, rtol=1e-12, atol=1e-12)
    # the values themselves, not only their codes' type: the top value of each class
    top = pd.DataFrame({"c": cls, "v": val, "w": w}).groupby(["c", "v"])["w"].sum()
    best = top.groupby(level=0).max().to_numpy()
    assert np.array_equal(sc.cnt[sc.starts], best)


def test_a_count_past_int32_keeps_int64_and_its_figures():
    big = (1 << 31) + 5  # one cell standing for more records than int32 holds
    cls = np.array([0, 0, 1, 1, 1], dtype=np.int32)
    val = np.array([0, 1, 0, 1, 2], dtype=np.uint8)
    w = np.array([big, 3, 7, 7, 1], dtype=np.int64)
    sc = _counts(cls, val, w, 3, 2)
    assert sc.cnt.dtype == np.int64
    assert sc.sizes.tolist() == [big + 3, 15]
    assert sc.cnt.tolist() == [big, 3, 7, 7, 1]
    # class 0: r1 = big, r2 = 3: (2, l) holds for l = 1 only; class 1: 7 < 2 (7 + 1) for l = 2
    assert recursive_l(sc, 2.0).tolist() == [1, 2]
    assert sc.distinct.tolist() == [2, 3]


def test_the_largest_int32_count_is_kept_in_int32():
    edge = (1 << 31) - 1
    sc = _counts(np.array([0, 0]), np.array([0, 1]), np.array([edge, 1], dtype=np.int64), 2, 1)
    assert sc.cnt.dtype == np.int32
    assert sc.cnt.tolist() == [edge, 1]
    assert sc.sizes.tolist() == [edge + 1]  # the sum is taken in int64
    # l = 1: r1 < 2 (r1 + r2), a sum past int32 (wrapped, it would fail); l = 2: r1 >= 2 r2
    assert recursive_l(sc, 2.0).tolist() == [1]


def test_figures_over_slices_of_whole_classes_are_those_over_all_triples(monkeypatch):
    rng = np.random.default_rng(7)
    rows, m = 40_000, 9
    cls = np.sort(rng.integers(0, 3_000, rows))
    cls[cls == 17] = 18  # a class with no record between the others
    val = rng.integers(0, m, rows)
    order = np.lexsort((val, cls))
    cls, val = cls[order], val[order]
    w = rng.integers(1, 50, rows)
    n = int(cls.max()) + 1

    def figures():
        sc = _counts(cls, val, w, m, n)
        return (
            (sc.cls, sc.val, sc.cnt, sc.starts),
            (
                entropy(sc),
                recursive_l(sc, 1.5),
                delta_per_class(sc),
                equal_distance(sc),
                likeness_per_class(ClassData(sc.sizes, {"s": sc}), "s"),
            ),
        )

    whole = figures()  # one slice: all triples at once
    monkeypatch.setattr(counts_module, "_SLICE", 37)  # slices of a few classes each
    sliced = figures()
    for a, b in zip(whole[0] + whole[1], sliced[0] + sliced[1], strict=True):
        assert a.dtype == b.dtype
        assert np.array_equal(a, b)  # bit for bit, not close
    assert whole[0][3][17] == whole[0][3][18]  # the empty class starts where the next does


def test_counts_from_unsorted_codes_match_the_sorted_ones():
    rng = np.random.default_rng(3)
    rows, m = 5_000, 20
    cls = rng.integers(0, 400, rows)
    val = rng.integers(0, m, rows)
    w = rng.integers(1, 9, rows)
    a = _counts(cls, val, w, m, 400)  # hashed: rows in no order
    order = np.lexsort((val, cls))
    b = _counts(cls[order], val[order], w[order], m, 400)  # runs of a histogram's cells
    for x, y in zip((a.cls, a.val, a.cnt, a.sizes), (b.cls, b.val, b.cnt, b.sizes), strict=True):
        assert x.dtype == y.dtype
        assert np.array_equal(x, y)
