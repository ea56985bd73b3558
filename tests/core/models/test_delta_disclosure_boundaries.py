"""δ-disclosure (anonweb/core/models/delta_disclosure.py) at its boundaries, worked by hand: δ = 0
refused and any positive δ accepted, a class with the table's own distribution at δ = 0, the
dense histogram the search keeps giving the same figures as the sparse counts, and the coverage
bound rejecting exactly the classes it proves fail."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from anonweb.core.errors import ParameterError
from anonweb.core.models import DeltaDisclosure, class_data
from anonweb.core.models.counts import SensitiveDomain, counts_for
from anonweb.core.models.delta_disclosure import (
    DeltaDisclosureCoverage,
    delta_passes_dense,
    delta_per_class,
    delta_per_class_dense,
)
from anonweb.core.models.diversity import l_diversity


@pytest.mark.parametrize("delta", [0, 0.0, -0.5])
def test_delta_zero_or_below_is_refused(delta):
    with pytest.raises(ParameterError, match=f"delta must be positive, got {delta}"):
        DeltaDisclosure("S", delta)


@pytest.mark.parametrize("delta", [1e-9, 0.5, 1, 3])
def test_any_positive_delta_is_accepted(delta):
    assert DeltaDisclosure("S", delta).delta == delta


def test_a_class_with_the_tables_distribution_discloses_nothing():
    # Both classes hold x and y half and half, as the table does: every ratio is 1, log2 1 = 0.
    df = pd.DataFrame({"G": list("gggghh"), "S": list("xyxyxy")})
    ld = l_diversity(df, quasi_identifiers=["G"], sensitive="S")
    assert ld.delta_disclosure == 0.0
    assert ld.delta_disclosure_all_values == 0.0
    data = class_data(df, quasi_identifiers=["G"], sensitive=["S"])
    assert DeltaDisclosure("S", 1e-9).check(data).satisfied


# Table: x 4 of 8 (1/2), y 2 of 8 (1/4), z 2 of 8 (1/4); classes g (x x x y), h (x y z z).
# g: x 3/4 against 1/2 -> log2 1.5; y 1/4 against 1/4 -> 0; z absent (left out).
# h: x 1/4 against 1/2 -> |log2 0.5| = 1; y 1/4 -> 0; z 1/2 against 1/4 -> 1.
THREE_VALUES = pd.DataFrame({"G": list("gggghhhh"), "S": list("xxxyxyzz")})
BY_HAND = [math.log2(1.5), 1.0]


def test_delta_per_class_by_hand():
    sc = counts_for(THREE_VALUES, quasi_identifiers=["G"], sensitive="S")
    assert delta_per_class(sc).tolist() == pytest.approx(BY_HAND)


def test_the_dense_histogram_gives_the_same_figures_as_the_counts():
    # As the search keeps them: one row per class, one column per value (x, y, z), and a class
    # with no records left (all suppressed), which discloses nothing.
    domain = SensitiveDomain("S", pd.Index(["x", "y", "z"]), np.array([4, 2, 2]))
    hist = np.array([[3, 1, 0], [1, 1, 2], [0, 0, 0]])
    with np.errstate(all="raise"):
        dense = delta_per_class_dense(domain, hist)
    assert dense.tolist() == pytest.approx([*BY_HAND, 0.0])


def test_coverage_rejects_a_class_whose_values_cannot_reach_the_share_needed():
    # Class g holds only x (table share 1/2): Q = 1/2. δ-disclosure needs 1 < 2**δ Q, i.e.
    # δ > 1. At δ = 0.9, 2**0.9 / 2 = 0.93: the bound rejects g (and δ-disclosure does too);
    # the class h holding x and y (Q = 1) meets it. (With 3**δ in place of 2**δ, g would pass.)
    df = pd.DataFrame({"G": list("gghhhh"), "S": list("xxxyyy")})
    data = class_data(df, quasi_identifiers=["G"], sensitive=["S"])
    coverage = DeltaDisclosureCoverage("S", 0.9)
    q = coverage.measure(data)
    assert q.tolist() == pytest.approx([1 / 2, 1.0])
    assert coverage.passes(data).tolist() == [False, True]
    assert DeltaDisclosure("S", 0.9).passes(data).tolist()[0] is False


def test_coverage_never_rejects_a_class_that_delta_disclosure_accepts_at_the_boundary():
    # Class g holds only x, table share 1/2: its ratio is 2, log2 2 = 1. Just above δ = 1
    # δ-disclosure accepts it, and 2**δ Q is then within float error of 1: the bound must not
    # reject what the model accepts.
    df = pd.DataFrame({"G": list("gghh"), "S": list("xxyy")})
    data = class_data(df, quasi_identifiers=["G"], sensitive=["S"])
    delta = 1 + 1e-12
    assert DeltaDisclosure("S", delta).passes(data).all()
    assert DeltaDisclosureCoverage("S", delta).passes(data).all()
    assert not DeltaDisclosureCoverage("S", 0.99).passes(data).any()


def test_a_value_held_once_counts_in_the_dense_histogram():
    # Table x, y (1/2 each); classes of one record each: x 1/1 against 1/2 -> log2 2 = 1.
    domain = SensitiveDomain("S", pd.Index(["x", "y"]), np.array([1, 1]))
    dense = delta_per_class_dense(domain, np.array([[1, 0], [0, 1]]))
    sc = counts_for(
        pd.DataFrame({"G": ["g", "h"], "S": ["x", "y"]}), quasi_identifiers=["G"], sensitive="S"
    )
    assert dense.tolist() == delta_per_class(sc).tolist() == [1.0, 1.0]


@pytest.mark.parametrize("seed", range(20))
def test_the_search_check_is_the_figure_against_delta(seed):
    # The search decides a class from its extreme ratios, taking a logarithm only within 1e-9
    # of 2**δ or 2**-δ: the same verdicts as the figure's |log2| < δ, on random classes, and
    # on classes whose ratios are exactly 4, 2, 1/2 and 1/4 (shares 1/4, 1/4, 1/2 in the
    # table) at δ of 1 and 2 and a hair either side.
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, 20))
    random_domain = SensitiveDomain("S", pd.Index(range(m)), rng.integers(1, 500, m))
    random_hist = rng.poisson(rng.uniform(0.1, 6.0), (int(rng.integers(0, 300)), m))
    exact_domain = SensitiveDomain("S", pd.Index(range(3)), np.array([100, 100, 200]))
    exact_hist = np.array([[2, 0, 0], [1, 1, 0], [1, 0, 7], [1, 0, 15], [1, 1, 2], [0, 0, 0]])
    deltas = (1.0, 2.0, 1.0 - 1e-12, 1.0 + 1e-12, 2.0 - 1e-13, 2.0 + 1e-13)
    for domain, hist in ((random_domain, random_hist), (exact_domain, exact_hist)):
        hist = hist.astype(float)
        for delta in (*deltas, float(rng.uniform(0.05, 3.0))):
            want = delta_per_class_dense(domain, hist) < delta
            assert delta_passes_dense(domain, hist, delta).tolist() == want.tolist()
    # the exact classes at δ = 1: only the one with the table's own shares passes
    assert delta_passes_dense(exact_domain, exact_hist.astype(float), 1.0).tolist() == [
        False,
        False,
        False,
        False,
        True,
        True,
    ]
