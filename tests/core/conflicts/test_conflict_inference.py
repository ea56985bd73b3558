"""Exact inference from the aggregates of several releases: seed 000's BMI example, seed 004's
differencing, the p% rule, and the solver against an independent rank computation."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anonweb.core.conflicts.check import ReleaseView, check_conflicts
from anonweb.core.conflicts.inference import Aggregate, infer
from anonweb.core.conflicts.lineage import read_means, source_ids, view_from_lineage_form
from anonweb.core.conflicts.solver import equations_from_lists, solve
from anonweb.core.errors import DataError, ParameterError

NAMES = [
    "Bob Smith",
    "Kate Jones",
    "Jane Armstrong",
    "Doug Fulton",
    "Louis Fisher",
    "John Hopkins",
    "Susane Lippencott",
]
BMI = np.array([24, 35, 41, 43, 44, 48, 50], dtype=float)
K1 = np.array([0, 0, 0, 0, 1, 1, 1])  # the lower four and the upper three averaged
K2 = np.array([0, 0, 0, 1, 1, 1, 1])  # the lower three and the upper four


def means(groups: np.ndarray, values: np.ndarray = BMI) -> np.ndarray:
    return np.bincount(groups, weights=values) / np.bincount(groups)


def test_seed000_figure9_discloses_doug_fulton_and_no_one_else():
    result = infer(
        BMI, [Aggregate("k1", "bmi", K1, means(K1)), Aggregate("k2", "bmi", K2, means(K2))]
    )
    assert result.determined.tolist() == [False, False, False, True, False, False, False]
    assert result.values[3] == pytest.approx(43.0, abs=1e-9)
    # The groups of three are known as sums, not person by person: 100 and 142.
    assert result.low[:3].tolist() == [24, 24, 24] and result.high[:3].tolist() == [50, 50, 50]
    assert result.low[4:].tolist() == [42, 42, 42]  # 142 - 2 x 50: the upper three are >= 42
    assert not result.narrow(0.05, BMI).any()  # [42, 50] is wider than ±5 % of 44..50


def test_each_scheme_alone_discloses_nothing():
    for g in (K1, K2):
        alone = infer(BMI, [Aggregate("k", "bmi", g, means(g))])
        assert not alone.determined.any()


def test_the_check_reports_doug_with_the_arithmetic_and_type():
    src = pd.DataFrame({"name": NAMES, "bmi": BMI})
    ids = source_ids(src, "name")
    views = [
        view_from_lineage_form(
            src,
            pd.DataFrame({"name": NAMES, "bmi": means(g)[g]}).iloc[::-1],
            label=label,
            id_column="name",
            ids=ids,
        )
        for label, g in (("release 1", K1), ("release 2", K2))
    ]
    report = check_conflicts(src, views)
    (finding,) = report.findings
    out = finding.to_dict(src["name"].tolist())
    assert out["type"] == "exact_inference"
    assert out["records"] == ["Doug Fulton"] and out["values"] == {"Doug Fulton": 43.0}
    assert (
        "4 × 35.75 − 3 × 33.3333" in out["explanation"]
        or "4 × 46.25 − 3 × 47.3333" in (out["explanation"])
    )
    assert finding.to_dict(values=False).get("values") is None


def test_sum_over_a_group_and_the_group_less_one_is_differencing():
    rng = np.random.default_rng(4)
    n = 5000  # groups far larger than any threshold: the attack does not care
    age = rng.integers(17, 90, n).astype(float)
    everyone = np.zeros(n, dtype=np.int64)
    less_one = np.zeros(n, dtype=np.int64)
    less_one[1234] = -1  # Karrie is left out of the second query
    src = pd.DataFrame({"age": age})
    first = Aggregate("release 3", "age", everyone, np.array([age.sum()]), "sum", table=True)
    second = Aggregate(
        "release 5", "age", less_one, np.array([age.sum() - age[1234]]), "sum", table=True
    )
    report = check_conflicts(
        src,
        [
            ReleaseView("release 3", aggregates=(first,)),
            ReleaseView("release 5", aggregates=(second,)),
        ],
    )
    (finding,) = report.findings
    assert finding.type == "differencing" and finding.records == (1234,)
    assert finding.values[1234] == pytest.approx(age[1234])
    assert "release 3's total of age over 5,000 people" in finding.explanation
    assert "minus release 5's total" in finding.explanation


def test_a_subset_release_after_a_whole_one():
    """A record-level release showing everyone's mean, then one of a subset (one person
    dropped): the two means, printed in full, give that person's value."""
    income = np.array([30.0, 52, 41, 75, 60, 38, 91])
    names = [f"p{i}" for i in range(7)]
    src = pd.DataFrame({"id": names, "income": income})
    ids = source_ids(src, "id")
    whole = pd.DataFrame({"id": names, "income": income.mean()})
    subset = pd.DataFrame({"id": names[:5] + names[6:], "income": np.delete(income, 5).mean()})
    views = [
        view_from_lineage_form(src, f, label=label, id_column="id", ids=ids)
        for label, f in (("whole", whole), ("subset", subset))
    ]
    (finding,) = check_conflicts(src, views).findings
    assert finding.type == "differencing" and finding.records == (5,)
    assert finding.values[5] == pytest.approx(38.0)
    assert "who is not in subset" in finding.explanation


def test_interval_disclosure_by_the_p_rule_only_when_combined():
    # a=94, b=98, c=2 in [0, 100]. A: a+b=192 -> a >= 92. B: a+c=96 -> a <= 96, so then
    # b = 192 - a >= 96 too. Alone, A leaves both in [92, 100] (±4: more than 3 %).
    x = np.array([94.0, 98.0, 2.0])
    a = Aggregate("A", "v", np.array([0, 0, -1]), np.array([192.0]), "sum", table=True)
    b = Aggregate("B", "v", np.array([0, -1, 0]), np.array([96.0]), "sum", table=True)
    both = infer(x, [a, b], bounds=(0, 100))
    assert (both.low[0], both.high[0]) == (92.0, 96.0)
    assert both.narrow(0.03, x)[0] and not both.determined[0]
    assert not infer(x, [a], bounds=(0, 100)).narrow(0.03, x)[0]  # [92, 100]: ±4 > 3 % of 94
    report = check_conflicts(
        pd.DataFrame({"v": x}),
        [ReleaseView("A", aggregates=(a,)), ReleaseView("B", aggregates=(b,))],
        p=0.03,
        bounds={"v": (0, 100)},
    )
    (finding,) = report.findings
    assert finding.records == (0, 1)
    assert finding.intervals == {0: (92.0, 96.0), 1: (96.0, 100.0)}


def test_a_group_of_one_is_reported_as_that_release_alone():
    x = np.array([10.0, 20.0, 30.0])
    agg = Aggregate("T", "v", np.array([0, 0, 1]), np.array([15.0, 30.0]), table=True)
    (finding,) = check_conflicts(
        pd.DataFrame({"v": x}), [ReleaseView("T", aggregates=(agg,))]
    ).findings
    assert finding.records == (2,) and finding.explanation.startswith("T alone")


def test_dp_releases_are_left_to_the_budget():
    x = np.array([1.0, 2.0])
    agg = Aggregate("D", "v", np.array([0, -1]), np.array([1.0]), "sum", table=True)
    report = check_conflicts(pd.DataFrame({"v": x}), [ReleaseView("D", aggregates=(agg,), dp=True)])
    assert not report.findings and "privacy budget" in report.notes[0]


def test_past_the_budget_the_check_says_it_is_incomplete():
    rng = np.random.default_rng(0)
    n = 3000
    x = rng.normal(50, 10, n)
    # Three random groupings into 100 groups: not graph-like, not runs, too big for dense.
    aggs = [
        Aggregate(f"r{i}", "v", g, means(g, x)) for i, g in enumerate(rng.integers(0, 100, (3, n)))
    ]
    report = check_conflicts(
        pd.DataFrame({"v": x}),
        [ReleaseView(a.release, aggregates=(a,)) for a in aggs],
        budget=10,
    )
    assert report.incomplete and report.conflicting


def test_the_source_frame_is_not_modified():
    src = pd.DataFrame({"v": BMI.copy()})
    before = src.copy()
    check_conflicts(
        src,
        [
            ReleaseView("1", aggregates=(Aggregate("1", "v", K1, means(K1)),)),
            ReleaseView("2", aggregates=(Aggregate("2", "v", K2, means(K2)),)),
        ],
    )
    pd.testing.assert_frame_equal(src, before)


@pytest.mark.parametrize(
    "kwargs, message",
    [({"k": 1}, "k must be"), ({"p": 2.0}, "p must be"), ({"new": "x"}, "no release called")],
)
def test_bad_parameters_are_refused(kwargs, message):
    with pytest.raises(ParameterError, match=message):
        check_conflicts(pd.DataFrame({"v": [1.0]}), [ReleaseView("a")], **kwargs)


def test_lineage_form_reads_means_but_not_raw_noisy_or_rounded_columns():
    truth = pd.Series([24.0, 35, 41, 43, 44, 48, 50])
    rows = np.arange(7)
    rounded_means = pd.Series(np.round(means(K1)[K1], 2))
    agg = read_means(truth, rounded_means, rows, label="r", column="bmi")
    assert agg is not None and agg.figures.tolist() == [35.75, 47.33]
    assert read_means(truth, truth, rows, label="r", column="bmi") is None  # raw
    noisy = pd.Series(means(K1)[K1] + np.array([0, 0.5, 0, 0, 0, -0.5, 0]))
    assert read_means(truth, noisy, rows, label="r", column="bmi") is None  # not means any more
    ages = pd.Series([34.0, 35, 36, 44, 45, 46, 45])
    assert read_means(ages, (ages / 10).round() * 10, rows, label="r", column="a") is None


def test_lineage_form_errors_are_one_line():
    src = pd.DataFrame({"id": ["a", "b"], "v": [1.0, 2.0]})
    ids = source_ids(src, "id")
    with pytest.raises(DataError, match="1 id\\(s\\) are not in the source"):
        view_from_lineage_form(
            src, pd.DataFrame({"id": ["a", "z"]}), label="r", id_column="id", ids=ids
        )
    with pytest.raises(DataError, match="has no id column"):
        view_from_lineage_form(src, pd.DataFrame({"x": [1]}), label="r", id_column="id", ids=ids)
    with pytest.raises(DataError, match="not unique"):
        source_ids(pd.DataFrame({"id": ["a", "a"]}), "id")


# --- the solver against an independent computation ------------------------------------------


def brute_force(n: int, groups: list) -> np.ndarray:
    """x[i] is fixed iff removing column i lowers the rank (column i is not in the span of the
    others): numpy's SVD rank, nothing shared with the code under test."""
    a = np.zeros((len(groups), n))
    for r, g in enumerate(groups):
        a[r, g] = 1.0
    full = np.linalg.matrix_rank(a) if groups else 0
    return np.array(
        [
            (np.linalg.matrix_rank(np.delete(a, i, axis=1)) if groups and n > 1 else 0) < full
            for i in range(n)
        ]
    )


@st.composite
def systems(draw):
    n = draw(st.integers(1, 12))
    intervals = draw(st.booleans())
    groups = []
    for _ in range(draw(st.integers(1, 5))):
        if intervals:
            cuts = sorted(draw(st.sets(st.integers(1, max(1, n - 1)), max_size=n)))
            edges = [0, *[c for c in cuts if c < n], n]
            parts = [list(range(lo, hi)) for lo, hi in zip(edges, edges[1:]) if hi > lo]
        else:
            labels = draw(st.lists(st.integers(-1, 4), min_size=n, max_size=n))
            parts = [[i for i in range(n) if labels[i] == g] for g in range(5)]
        groups += [p for p in parts if p and draw(st.integers(0, 9)) > 0]
    return n, groups


PATHS = {
    "default": {},
    "elimination": {"dense_max": 0},
    "set aside": {"coarse_size": 3, "coarse_max": 2},
}


@pytest.mark.parametrize("paths", PATHS)
@settings(max_examples=150, deadline=None)
@given(data=systems(), seed=st.integers(0, 2**16))
def test_solver_agrees_with_rank_brute_force(paths, data, seed):
    n, groups = data
    x = np.random.default_rng(seed).normal(size=n)
    eqs = equations_from_lists(n, groups, [x[g].sum() for g in groups])
    sol = solve(eqs, seed=seed, **PATHS[paths])
    expected = brute_force(n, groups)
    assert sol.determined.tolist() == expected.tolist()
    assert np.allclose(sol.values[expected], x[expected])


def test_three_partitions_determine_what_no_two_do():
    # {1,2},{3,4} / {1,3},{2,4} / {1,4},{2,3}: each pair of groupings leaves a 4-cycle, yet the
    # three together fix every value (2 x1 = (x1+x2) + (x1+x3) + (x1+x4) - (x1+x2+x3+x4)).
    x = np.array([3.0, 5.0, 7.0, 11.0])
    groups = [[0, 1], [2, 3], [0, 2], [1, 3], [0, 3], [1, 2]]
    sol = solve(equations_from_lists(4, groups, [x[g].sum() for g in groups]))
    assert sol.determined.all() and np.allclose(sol.values, x)
    pairs = solve(equations_from_lists(4, groups[:4], [x[g].sum() for g in groups[:4]]))
    assert not pairs.determined.any()


def test_two_microaggregations_of_100k_values_in_one_pass():
    """Groups of 3 and of 4 over sorted values: every 12 records, the one shared by a group of
    each scheme and in no other is disclosed (the BMI attack, repeated)."""
    rng = np.random.default_rng(1)
    n = 12_000
    x = rng.lognormal(10, 1, n)
    order = np.argsort(x)
    aggs = []
    for k in (3, 4):
        g = np.empty(n, dtype=np.int64)
        g[order] = np.arange(n) // k
        aggs.append(Aggregate(f"k{k}", "income", g, means(g, x)))
    result = infer(x, aggs)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n)
    # In each block of 12 ranks the groups {0-2}{3-5}... and {0-3}{4-7}{8-11} leave ranks 3 and
    # 8 alone in the difference of two groups: 4 x mean - 3 x mean.
    assert set(np.unique(rank[result.determined] % 12)) == {3, 8}
    assert result.determined.sum() == 2 * n // 12
    assert np.allclose(result.values[result.determined], x[result.determined], rtol=1e-9)
