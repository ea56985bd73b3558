"""t-closeness distances against direct, per-class implementations of the paper's formulas."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anonweb.core.io.hierarchy import read_hierarchy
from anonweb.core.models.closeness import t_closeness
from anonweb.core.models.counts import (
    ClassData,
    SensitiveCounts,
    SensitiveDomain,
    sensitive_domain,
)
from anonweb.core.models.criteria import DeltaDisclosure, TCloseness
from anonweb.core.models.delta_disclosure import DeltaDisclosureCoverage
from anonweb.core.models.t_closeness import hierarchical_distance, hierarchical_distance_dense

DISEASES = ["gastric ulcer", "gastritis", "stomach cancer", "flu", "bronchitis", "pneumonia"]


@st.composite
def frames(draw):
    n = draw(st.integers(2, 30))
    return pd.DataFrame(
        {
            "g": draw(st.lists(st.sampled_from("abc"), min_size=n, max_size=n)),
            "num": draw(st.lists(st.integers(0, 6), min_size=n, max_size=n)),
            "dis": draw(st.lists(st.sampled_from(DISEASES), min_size=n, max_size=n)),
        }
    )


def shares(series: pd.Series, values) -> np.ndarray:
    return series.value_counts(normalize=True).reindex(values, fill_value=0.0).to_numpy()


def naive_ordered(df: pd.DataFrame) -> float:
    values = np.sort(df["num"].unique())
    if len(values) < 2:
        return 0.0
    q = shares(df["num"], values)
    return max(
        np.abs(np.cumsum(shares(g["num"], values) - q)).sum() / (len(values) - 1)
        for _, g in df.groupby("g")
    )


def naive_equal(df: pd.DataFrame) -> float:
    values = df["dis"].unique()
    q = shares(df["dis"], values)
    return max(0.5 * np.abs(shares(g["dis"], values) - q).sum() for _, g in df.groupby("g"))


def naive_hierarchical(df: pd.DataFrame, hierarchy) -> float:
    """The paper's recursion: extra, pos_extra, neg_extra per node, cost = h/H * min."""
    rows = hierarchy.rows
    top = len(rows[0]) - 1
    q_all = df["dis"].value_counts(normalize=True)
    worst = 0.0
    for _, g in df.groupby("g"):
        p_all = g["dis"].value_counts(normalize=True)
        extra = {(0, r[0]): p_all.get(r[0], 0.0) - q_all.get(r[0], 0.0) for r in rows}
        cost = 0.0
        for level in range(1, top + 1):
            children: dict[str, set] = {}
            for r in rows:
                children.setdefault(r[level], set()).add(r[level - 1])
            for node, kids in children.items():
                ex = [extra[(level - 1, k)] for k in kids]
                pos = sum(e for e in ex if e > 0)
                neg = -sum(e for e in ex if e < 0)
                cost += level / top * min(pos, neg)
                extra[(level, node)] = sum(ex)
        worst = max(worst, cost)
    return worst


@pytest.fixture(scope="module")
def disease_hierarchy(fixtures_dir):
    return read_hierarchy(fixtures_dir / "test2_hierarchy_Disease.csv", attribute="dis")


@settings(max_examples=80, deadline=None)
@given(frames())
def test_ordered_distance_matches_the_formula(df):
    assert t_closeness(df, quasi_identifiers=["g"], sensitive="num").t == pytest.approx(
        naive_ordered(df), abs=1e-12
    )


@settings(max_examples=80, deadline=None)
@given(frames())
def test_equal_distance_matches_the_formula(df):
    assert t_closeness(df, quasi_identifiers=["g"], sensitive="dis").t == pytest.approx(
        naive_equal(df), abs=1e-12
    )


def test_hierarchical_distance_matches_the_recursion(disease_hierarchy):
    # A plain loop over generated frames: hypothesis cannot take a function-scoped fixture.
    rng = np.random.default_rng(7)
    for _ in range(60):
        n = int(rng.integers(2, 30))
        df = pd.DataFrame({"g": rng.choice(list("abc"), n), "dis": rng.choice(DISEASES, n)})
        ours = t_closeness(
            df, quasi_identifiers=["g"], sensitive="dis", hierarchy=disease_hierarchy
        )
        assert ours.distance == "hierarchical"
        assert ours.t == pytest.approx(naive_hierarchical(df, disease_hierarchy), abs=1e-12)


def test_hierarchical_distance_from_a_count_matrix_matches_the_recursion(disease_hierarchy):
    # the search's route: a dense (classes x values) matrix of counts, not sparse triples
    rng = np.random.default_rng(11)
    for _ in range(60):
        n = int(rng.integers(2, 30))
        df = pd.DataFrame({"g": rng.choice(list("abc"), n), "dis": rng.choice(DISEASES, n)})
        domain, codes = sensitive_domain(df["dis"])
        groups, group_codes = np.unique(df["g"], return_inverse=True)
        hist = np.zeros((len(groups), len(domain.values)))
        np.add.at(hist, (group_codes, codes), 1)
        got = hierarchical_distance_dense(domain, hist, disease_hierarchy)
        assert got.max() == pytest.approx(naive_hierarchical(df, disease_hierarchy), abs=1e-12)
        sparse = SensitiveCounts.from_codes(domain, group_codes, codes, len(groups))
        assert got == pytest.approx(hierarchical_distance(sparse, disease_hierarchy), abs=1e-12)


def test_hierarchical_distance_is_the_same_on_a_table_copied_many_times(disease_hierarchy):
    # ARX's EMD tree holds each value's p*Q - q*P (P the table's records, Q the class's) in a
    # Java int, which wraps on a million rows (README, "Where ARX's optimum differs"); copying a
    # table changes no share, so no distance may change, even past 10**11 records
    rng = np.random.default_rng(13)
    for _ in range(20):
        n = int(rng.integers(2, 30))
        df = pd.DataFrame({"g": rng.choice(list("abc"), n), "dis": rng.choice(DISEASES, n)})
        domain, codes = sensitive_domain(df["dis"])
        groups, group_codes = np.unique(df["g"], return_inverse=True)
        hist = np.zeros((len(groups), len(domain.values)))
        np.add.at(hist, (group_codes, codes), 1)
        once = hierarchical_distance_dense(domain, hist, disease_hierarchy)
        assert once.max() == pytest.approx(naive_hierarchical(df, disease_hierarchy), abs=1e-12)
        for copies in (33, 100_000, 10**10):
            copied = SensitiveDomain("dis", domain.values, domain.counts * copies)
            got = hierarchical_distance_dense(copied, hist * copies, disease_hierarchy)
            assert got == pytest.approx(once, abs=1e-12)
            # the sparse route reads the class's records once against the copied table
            sparse = SensitiveCounts.from_codes(copied, group_codes, codes, len(groups))
            assert hierarchical_distance(sparse, disease_hierarchy) == pytest.approx(
                once, abs=1e-12
            )


def _random_classes(rng, domain_size: int, n: int) -> np.ndarray:
    """A (classes x values) count matrix: classes of a few values each, some of one value."""
    hist = rng.integers(0, 4, (n, domain_size)) * (rng.random((n, domain_size)) < rng.random())
    hist[hist.sum(axis=1) == 0, 0] = 1
    return hist.astype(float)


def _dense(domain, hist: np.ndarray) -> ClassData:
    """Classes as the search hands them to the models: a count matrix per sensitive column."""
    return ClassData(hist.sum(axis=1), histograms=lambda name: (domain, hist))


@pytest.mark.parametrize("distance", ["equal", "hierarchical"])
def test_the_coverage_bound_never_exceeds_the_distance(disease_hierarchy, distance):
    # the search settles sublattices with the bound, as a monotonic model: a class it rejects
    # must fail t-closeness too, or the search would suppress classes that pass
    rng = np.random.default_rng(5)
    hierarchy = disease_hierarchy if distance == "hierarchical" else None
    for _ in range(60):
        df = pd.DataFrame({"dis": rng.choice(DISEASES, int(rng.integers(6, 40)))})
        domain, _ = sensitive_domain(df["dis"])
        hist = _random_classes(rng, len(domain.values), int(rng.integers(1, 30)))
        data = _dense(domain, hist)
        sparse = ClassData(hist.sum(axis=1), {"dis": SensitiveCounts.from_histogram(domain, hist)})
        t = float(rng.uniform(0.05, 0.6))
        model = TCloseness("dis", t, distance, hierarchy)
        (coverage,) = model.implied()
        assert coverage.monotonic
        bound = coverage.measure(data)
        assert (bound <= model.measure(data) + 1e-12).all()
        assert bound == pytest.approx(coverage.measure(sparse), abs=1e-12)
        assert not (model.passes(data) & ~coverage.passes(data)).any()
        # merging classes only adds values: a merge of classes one of which meets the bound
        # meets it (what declaring it monotonic promises)
        merged = hist[rng.integers(0, len(hist), len(hist))] + hist
        both = _dense(domain, merged)
        assert (coverage.measure(both) <= bound + 1e-12).all()


def test_ordered_t_closeness_implies_no_coverage_bound():
    assert TCloseness("num", 0.2, "ordered").implied() == ()


def test_the_coverage_bound_of_a_large_domain_is_one_minus_the_share_present():
    # past the tabulated sizes the bound is computed class by class: the same figure
    rng = np.random.default_rng(9)
    df = pd.DataFrame({"v": rng.integers(0, 20, 400)})
    domain, _ = sensitive_domain(df["v"])
    assert len(domain.values) == 20
    hist = _random_classes(rng, 20, 50)
    (coverage,) = TCloseness("v", 0.3).implied()
    expected = 1.0 - ((hist > 0) * domain.share).sum(axis=1)
    assert coverage.measure(_dense(domain, hist)) == pytest.approx(expected, abs=1e-12)
    assert (
        coverage.measure(_dense(domain, hist))
        <= TCloseness("v", 0.3).measure(_dense(domain, hist)) + 1e-12
    ).all()


@settings(max_examples=80, deadline=None)
@given(seed=st.integers(0, 100_000), delta=st.floats(0.05, 4.0))
def test_the_delta_coverage_bound_never_rejects_a_class_delta_disclosure_accepts(seed, delta):
    # the search settles sublattices with the bound, as a monotonic model: a class it rejects
    # must fail δ-disclosure too, or the search would suppress classes that pass
    rng = np.random.default_rng(seed)
    df = pd.DataFrame({"dis": rng.choice(DISEASES, int(rng.integers(6, 60)))})
    domain, _ = sensitive_domain(df["dis"])
    hist = _random_classes(rng, len(domain.values), int(rng.integers(1, 30)))
    data = _dense(domain, hist)
    sparse = ClassData(hist.sum(axis=1), {"dis": SensitiveCounts.from_histogram(domain, hist)})
    model = DeltaDisclosure("dis", delta)
    (coverage,) = model.implied()
    assert isinstance(coverage, DeltaDisclosureCoverage) and coverage.monotonic
    assert not (model.passes(data) & ~coverage.passes(data)).any()
    # the search's dense figures are the sparse ones, bit for bit
    assert (model.measure(data) == model.measure(sparse)).all()
    assert coverage.measure(data) == pytest.approx(coverage.measure(sparse), abs=1e-12)
    # merging classes only adds values: a merge of classes one of which meets the bound
    # meets it (what declaring it monotonic promises)
    merged = hist[rng.integers(0, len(hist), len(hist))] + hist
    both = _dense(domain, merged)
    assert (coverage.measure(both) >= coverage.measure(data) - 1e-12).all()
    assert not (coverage.passes(data) & ~coverage.passes(both)).any()


def test_the_delta_coverage_bound_rejects_a_class_of_rare_values_only():
    # a table of 10 records: a 50%, b 30%, c 20%; δ = 1 needs the values a class contains to
    # hold more than half of the table. A class of c alone (Q = 0.2) fails the bound and
    # δ-disclosure; b and c (Q = 0.5, on the boundary) pass the bound and fail δ-disclosure (a
    # necessary condition, not a sufficient one); a and b (Q = 0.8) pass both.
    df = pd.DataFrame({"v": list("aaaaabbbcc")})
    domain, _ = sensitive_domain(df["v"])
    hist = np.array([[0.0, 0, 2], [0, 1, 1], [1, 1, 0]])
    data = _dense(domain, hist)
    coverage = DeltaDisclosureCoverage("v", 1.0)
    assert coverage.measure(data) == pytest.approx([0.2, 0.5, 0.8])
    assert coverage.passes(data).tolist() == [False, True, True]
    assert DeltaDisclosure("v", 1.0).passes(data).tolist() == [False, False, True]
