"""Rolling a finer node's class x value counts up to a coarser node's: the compiled sum must give
what one bincount over every cell gives, to the last bit, and refuse group numbers out of range
(it writes where they say)."""

from __future__ import annotations

import numpy as np
import pytest

from anonweb.core.search import lattice
from anonweb.core.search.lattice import _sum_rows


def _bincount_sums(matrix: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    width = matrix.shape[1]
    cells = (groups[:, None] * width + np.arange(width)).ravel()
    return np.bincount(cells, weights=matrix.ravel(), minlength=n_groups * width).reshape(
        n_groups, width
    )


@pytest.mark.parametrize("seed", range(5))
def test_the_sums_are_those_of_one_bincount_to_the_last_bit(seed):
    rng = np.random.default_rng(seed)
    rows, width = int(rng.integers(1, 3000)), int(rng.integers(1, 20))
    n_groups = int(rng.integers(1, rows + 1))
    groups = rng.integers(0, n_groups, size=rows)
    # fractional weights, where the order of the additions shows in the last bits
    matrix = rng.random((rows, width)) * rng.choice([1.0, 1e-3, 1e6], size=(rows, width))
    got = _sum_rows(matrix, groups, n_groups)
    want = _bincount_sums(matrix, groups, n_groups)
    assert got.shape == want.shape
    assert np.array_equal(got.view(np.uint64), want.view(np.uint64))


def test_empty_and_integer_matrices():
    assert _sum_rows(np.zeros((0, 3)), np.zeros(0, dtype=np.int64), 2).tolist() == [[0.0] * 3] * 2
    counts = np.array([[1, 2], [3, 4], [5, 6]], dtype=np.int64)
    assert _sum_rows(counts, np.array([1, 0, 1]), 2).tolist() == [[3, 4], [6, 8]]


@pytest.mark.parametrize("groups", [[0, 3, 1], [0, -1, 1]])
def test_group_numbers_out_of_range_are_refused(groups):
    with pytest.raises(ValueError):
        _sum_rows(np.ones((3, 2)), np.array(groups), 3)


def test_the_compiled_loop_is_there_so_the_tests_above_check_it():
    # without it the sums fall back to the bincount the tests compare with, and would pass
    # whatever the compiled path did
    assert lattice._csc_matvecs() is not None


def test_the_fallback_gives_the_same_sums(monkeypatch):
    rng = np.random.default_rng(7)
    matrix, groups = rng.random((500, 6)), rng.integers(0, 40, size=500)
    fast = _sum_rows(matrix, groups, 40)
    monkeypatch.setattr(lattice, "_MATVECS", [None])
    slow = _sum_rows(matrix, groups, 40)
    assert np.array_equal(fast.view(np.uint64), slow.view(np.uint64))
