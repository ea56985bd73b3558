"""Class size histograms: a count over the sizes, or a sort when the sizes run far above the
number of classes (a few classes of millions of records)."""

from __future__ import annotations

import numpy as np

from anonweb.core.risk.classes import size_counts
from anonweb.core.risk.reidentification import records_above


def _counted(sizes):
    counts = np.bincount(sizes)
    present = np.flatnonzero(counts)
    return present.tolist(), counts[present].tolist()


def test_size_counts_by_count_and_by_sort_agree():
    rng = np.random.default_rng(0)
    small = rng.integers(1, 50, 400)
    large = np.concatenate([small, [10**7, 3 * 10**7, 10**7]])
    for sizes in (small, large, np.array([5]), np.array([], dtype=np.int64)):
        present, counts = size_counts(sizes)
        assert (present.tolist(), counts.tolist()) == _counted(sizes)
    present, counts = size_counts(large)
    assert present[-2:].tolist() == [10**7, 3 * 10**7] and counts[-2:].tolist() == [2, 1]


def test_records_above_with_huge_classes():
    sizes = np.array([1, 2, 2, 40_000_000, 60_000_000])
    assert records_above(sizes, (0.6, 0.4, 0.0)) == ((0.6, 1), (0.4, 5), (0.0, 100_000_005))
