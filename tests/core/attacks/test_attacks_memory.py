"""The attacks' memory: on a release where each person is as close to thousands of released
rows as to any (a generalized release whose other columns are unique), the person/row pairs
the attacker picks among are kept compactly and linkage and inference go through them a
bounded number at a time, never copying them all."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pandas as pd
import pytest

from anonweb.core.attacks import records
from anonweb.core.attacks.matching import Column
from anonweb.core.attacks.records import (
    inference_successes,
    linkage_successes,
    neighbours,
    release_combos,
)

COLS = ["sex", "disease", "income"]


@pytest.fixture(scope="module")
def many_ties():
    rng = np.random.default_rng(5)
    n = 5000
    source = pd.DataFrame(
        {
            "sex": rng.choice(["F", "M"], n),
            "disease": rng.choice(["flu", "asthma", "ulcer"], n),
            "income": rng.normal(40_000, 9_000, n).round(),
        }
    )
    combos = release_combos(source, COLS)
    people = source.iloc[rng.choice(n, 2000, replace=False)].reset_index(drop=True)
    span = float(source["income"].max() - source["income"].min())
    columns = {
        c: Column(
            c,
            combos.frame[c],
            people[c],
            source_range=span if c == "income" else 1.0,
            tolerance=0.05,
        )
        for c in COLS
    }
    nb = neighbours(combos, columns, ["sex"], len(people))
    return combos, columns, nb


def peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_pairs_are_kept_as_32_bit_row_indices_per_person(many_ties):
    combos, _, nb = many_ties
    assert len(nb.combo) > 4_000_000  # every person ties with about half the release
    assert nb.combo.dtype == np.int32
    assert len(nb.ptr) == 2001 and nb.ptr[-1] == len(nb.combo)
    assert nb.combo.nbytes + nb.ptr.nbytes < 4.1 * len(nb.combo)


def test_linkage_and_inference_hold_a_bounded_share_of_the_pairs(many_ties, monkeypatch):
    combos, columns, nb = many_ties
    stored = nb.combo.nbytes + nb.ptr.nbytes
    members = np.arange(1000)
    control = np.arange(1000, 2000)
    expected = (
        linkage_successes(nb, combos, columns, members),
        inference_successes(nb, combos, columns["disease"], control),
        inference_successes(nb, combos, columns["income"], members),
    )
    monkeypatch.setattr(records, "PAIRS", 50_000)
    results: list[float] = []
    for step in (
        lambda: results.append(linkage_successes(nb, combos, columns, members)),
        lambda: results.append(inference_successes(nb, combos, columns["disease"], control)),
        lambda: results.append(inference_successes(nb, combos, columns["income"], members)),
    ):
        used = peak(step)
        assert used < stored / 2
    # in pieces, the same figures, for people in any order too
    assert results == pytest.approx(list(expected))
    shuffled = np.random.default_rng(0).permutation(members)
    assert linkage_successes(nb, combos, columns, shuffled) == pytest.approx(expected[0])
