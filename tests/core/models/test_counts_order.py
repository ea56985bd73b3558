"""The sensitive value counts come out in the same order whichever way they are counted: the
packed sort equals ``lexsort`` (ties in their given order), and a histogram's sorted cells
summed by runs equal the hashing branch."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from anonweb.core.models.counts import SensitiveCounts, SensitiveDomain, _by_class_then_count


@pytest.mark.parametrize("seed", range(40))
def test_the_packed_order_is_lexsorts(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 4000))
    c = np.sort(rng.integers(0, max(n // 3, 1), n)) if seed % 2 else rng.integers(0, 50, n)
    top = [3, 1000, 2**40][seed % 3]  # the last: too many bits to pack, lexsort itself
    cnt = rng.integers(1, top, n)
    assert np.array_equal(_by_class_then_count(c, cnt), np.lexsort((-cnt, c)))


@pytest.mark.parametrize("seed", range(20))
def test_sorted_cells_summed_by_runs_equal_the_hashed_counts(seed):
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(1, 3000)), int(rng.integers(1, 6))
    classes = int(rng.integers(1, max(n // 2, 2)))
    # a histogram's cells: distinct (class, value) pairs in ascending order, weighted by count
    key = np.unique(rng.integers(0, classes, n) * m + rng.integers(0, m, n))
    cls, val = np.divmod(key, m)
    w = rng.integers(1, 9, key.size).astype(float)
    domain = SensitiveDomain(
        "s", pd.Index(range(m)), np.bincount(val, weights=w, minlength=m).astype(np.int64)
    )
    n_classes = max(classes, (1 << 20) // m + 1)  # past the dense table: the sparse branches
    got = SensitiveCounts.from_codes(domain, cls, val, n_classes, weights=w)
    inv, uniq = pd.factorize(key)
    cnt = np.rint(np.bincount(inv, weights=w, minlength=len(uniq))).astype(np.int64)
    c2, v2 = np.divmod(uniq, m)
    order = np.lexsort((-cnt, c2))
    assert np.array_equal(got.cls, c2[order]) and np.array_equal(got.val, v2[order])
    assert np.array_equal(got.cnt, cnt[order])
    assert np.array_equal(got.sizes, np.bincount(cls, weights=w, minlength=n_classes).astype(int))
