"""Published figures are intervals, and all equations are solved together with the bounds.

A mean printed with two decimals stands for every value within ± 0.005 of it; the check claims an
exact value only when the intervals pin it, and reports what the equations confine together (not
one at a time). A property test compares the check with a solver written here, which enumerates
the vertices of the feasible set instead of solving linear programs.
"""

from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anonweb.core.conflicts.check import ReleaseView, check_conflicts
from anonweb.core.conflicts.feasible import feasible_intervals
from anonweb.core.conflicts.gate import conflict_findings
from anonweb.core.conflicts.inference import Aggregate, infer
from anonweb.core.conflicts.lineage import printed_precision, read_means
from anonweb.core.conflicts.solver import equations_from_lists
from anonweb.core.errors import ParameterError

BMI = np.array([24, 35, 41, 43, 44, 48, 50], dtype=float)
K1 = np.array([0, 0, 0, 0, 1, 1, 1])
K2 = np.array([0, 0, 0, 1, 1, 1, 1])


def sums(view: str, groups: np.ndarray, x: np.ndarray) -> Aggregate:
    return Aggregate(
        view,
        "v",
        groups,
        np.bincount(groups[groups >= 0], weights=x[groups >= 0]),
        "sum",
        table=True,
    )


def views(*aggs: Aggregate) -> list[ReleaseView]:
    return [ReleaseView(a.release, aggregates=(a,)) for a in aggs]


# Item 2: rounded means are intervals.


def test_seed000_bmi_table_as_printed_confines_doug_but_does_not_fix_him():
    # Figure 9 prints the means with two decimals: 35.75 / 47.33 and 33.33 / 46.25.
    k1 = Aggregate("k1", "bmi", K1, np.array([35.75, 47.33]), precision=0.005)
    k2 = Aggregate("k2", "bmi", K2, np.array([33.33, 46.25]), precision=0.005)
    result = infer(BMI, [k1, k2])
    assert not result.determined.any()  # 4 x 35.75 - 3 x 33.33 = 43.01 is not his value
    low, high = result.low[3], result.high[3]
    assert 42.97 < low < 43 < high < 43.05
    assert result.narrow(0.05, BMI).tolist() == [False, False, False, True, False, False, False]


def test_seed000_bmi_rounded_to_one_decimal_is_the_interval_the_figures_allow():
    # 35.75 -> 35.8, 47.33 -> 47.3; 33.33 -> 33.3, 46.25 -> 46.2: Doug is 4 x 35.8 - 3 x 33.3 =
    # 43.3 by the old arithmetic, but anywhere in [42.95, 43.25] by the figures.
    k1 = Aggregate("k1", "bmi", K1, np.array([35.8, 47.3]), precision=0.05)
    k2 = Aggregate("k2", "bmi", K2, np.array([33.3, 46.2]), precision=0.05)
    result = infer(BMI, [k1, k2])
    assert not result.determined[3]
    assert result.low[3] == pytest.approx(42.95) and result.high[3] == pytest.approx(43.25)


def test_the_same_figures_published_exactly_still_fix_doug():
    means1 = np.bincount(K1, weights=BMI) / np.bincount(K1)
    means2 = np.bincount(K2, weights=BMI) / np.bincount(K2)
    result = infer(BMI, [Aggregate("k1", "bmi", K1, means1), Aggregate("k2", "bmi", K2, means2)])
    assert result.determined.tolist() == [False, False, False, True, False, False, False]
    assert result.values[3] == pytest.approx(43.0)


@pytest.mark.parametrize("decimals, finding", [(1, None), (2, None), (None, "differencing")])
def test_whole_and_less_one_rounded_means_claim_nothing_they_cannot_pin(decimals, finding):
    """A thousand ages and the same less one person (81): with means rounded to one or two
    decimals the difference only confines that age to tens of years or ±5, not within 5 %."""
    rng = np.random.default_rng(7)
    n = 1000
    age = rng.integers(17, 91, n).astype(float)
    age[123] = 81
    everyone = np.zeros(n, dtype=np.int64)
    less_one = everyone.copy()
    less_one[123] = -1
    m1, m2 = age.mean(), np.delete(age, 123).mean()
    half = 0.0
    if decimals is not None:
        m1, m2, half = round(m1, decimals), round(m2, decimals), 0.5 * 10.0**-decimals
    a = Aggregate("whole", "age", everyone, np.array([m1]), precision=half)
    b = Aggregate("less one", "age", less_one, np.array([m2]), precision=half)
    report = check_conflicts(pd.DataFrame({"age": age}), views(a, b), bounds={"age": (0, 120)})
    assert [f.type for f in report.findings] == ([finding] if finding else [])
    if finding:
        assert report.findings[0].values[123] == pytest.approx(81)
    only = infer(age, [a, b], bounds=(0, 120))
    assert only.low[123] <= 81 <= only.high[123]
    if decimals == 1:
        assert only.high[123] == 120 and only.low[123] < 60


def test_a_column_printed_with_few_decimals_is_read_as_rounded():
    assert printed_precision(np.array([35.75, 47.33])) == pytest.approx(0.005)
    assert printed_precision(np.array([35.8, 47.3])) == pytest.approx(0.05)
    assert printed_precision(np.array([43.0, 81.0])) == pytest.approx(0.5)
    assert printed_precision(np.array([35.75, 47.333333333333336])) == 0.0  # printed in full
    truth = pd.Series(BMI)
    agg = read_means(
        truth,
        pd.Series(np.round(np.array([35.75, 47.33])[K1], 1)),
        np.arange(7),
        label="r",
        column="bmi",
    )
    assert agg is not None and agg.precision == pytest.approx(0.05)


def test_precision_must_be_a_non_negative_number():
    with pytest.raises(ParameterError, match="precision of 'v' must be a non-negative number"):
        Aggregate("r", "v", np.array([0, 0]), np.array([1.0]), precision=-0.5)


# Item 3: equations together, not one at a time.


@pytest.mark.parametrize(
    "values, interval",
    [
        ((50, 99, 51, 2), (97, 100)),
        ((50, 97, 51, 3), (94, 100)),
        ((50, 99, 51, 0), (99, 100)),
        ((50, 97, 51, 0), (97, 100)),
    ],
)
def test_two_totals_whose_difference_confines_a_value(values, interval):
    # A: s1 + s2 + s3, B: s1 + s3 + s4, so s2 - s4 is known: with s4 >= 0 and s2 <= 100, s2 is
    # in a short interval, which no single equation shows.
    x = np.array(values, dtype=float)
    a = sums("A", np.array([0, 0, 0, -1]), x)
    b = sums("B", np.array([0, -1, 0, 0]), x)
    report = check_conflicts(pd.DataFrame({"v": x}), views(a, b), p=0.05, bounds={"v": (0, 100)})
    (finding,) = report.findings
    assert finding.records == (1,) and finding.releases == ("A", "B")
    assert finding.intervals[1] == pytest.approx(interval)
    assert "within ±5%" in finding.explanation


def test_bounds_that_leave_out_source_values_are_refused():
    x = np.array([50.0, 120.0])
    a = sums("A", np.array([0, 0]), x)
    with pytest.raises(ParameterError, match="leave out 1 of the source's values"):
        check_conflicts(pd.DataFrame({"v": x}), views(a), bounds={"v": (0, 100)})


# The property: the check's findings are those of an independent solver.

LOW, HIGH, P = 0.0, 100.0, 0.05
TOL = 1e-6 * HIGH


def vertex_intervals(rows: list[list[int]], lo: list[float], hi: list[float], n: int):
    """Each unknown's range over {LOW <= x <= HIGH, lo[e] <= sum(x[rows[e]]) <= hi[e]} by
    enumerating vertices: every choice of n independent constraint planes, solved, kept if it
    satisfies all constraints. A bounded polytope attains each coordinate's min and max at one."""
    planes = [(np.eye(n)[i], b) for i in range(n) for b in (LOW, HIGH)]
    for r, low_e, high_e in zip(rows, lo, hi, strict=True):
        a = np.zeros(n)
        a[r] = 1.0
        planes += [(a, low_e)] + ([(a, high_e)] if high_e != low_e else [])
    coef = np.array([p[0] for p in planes])
    rhs = np.array([p[1] for p in planes])
    combos = np.array(list(combinations(range(len(planes)), n)))
    mats, bs = coef[combos], rhs[combos]
    ok = np.abs(np.linalg.det(mats)) > 1e-9
    pts = np.linalg.solve(mats[ok], bs[ok][..., None])[..., 0]
    inside = ((pts >= LOW - 1e-9) & (pts <= HIGH + 1e-9)).all(axis=1)
    for r, low_e, high_e in zip(rows, lo, hi, strict=True):
        s = pts[:, r].sum(axis=1)
        inside &= (s >= low_e - 1e-9) & (s <= high_e + 1e-9)
    pts = pts[inside]
    return pts.min(axis=0), pts.max(axis=0)


def expected_findings(x: np.ndarray, aggs: list[Aggregate]) -> dict:
    """What the check must report: per release alone, then what all together add."""

    def classify(subset: list[Aggregate]):
        rows, lo, hi = [], [], []
        for a in subset:
            for g in range(len(a.figures)):
                members = np.flatnonzero(a.groups == g).tolist()
                t = a.figures[g] * (len(members) if a.statistic == "mean" else 1)
                half = a.precision * (len(members) if a.statistic == "mean" else 1)
                rows.append(members)
                lo.append(t - half)
                hi.append(t + half)
        low, high = vertex_intervals(rows, lo, hi, x.size)
        covered = np.zeros(x.size, dtype=bool)
        for a in subset:
            covered |= a.groups >= 0
        half = (high - low) / 2
        exact = covered & (high - low <= TOL)
        narrow = covered & ~exact & (half <= P * np.abs(x) + TOL) & (half > TOL)
        return exact, narrow, low, high

    out: dict = {}
    labels = sorted({a.release for a in aggs})
    known = np.zeros(x.size, dtype=bool)
    known_any = np.zeros(x.size, dtype=bool)
    for r in labels:
        exact, narrow, low, high = classify([a for a in aggs if a.release == r])
        for i in np.flatnonzero(exact):
            out[(r, "exact", int(i))] = None
        for i in np.flatnonzero(narrow):
            out[(r, "within", int(i))] = (low[i], high[i])
        known |= exact
        known_any |= exact | narrow
    if len(labels) > 1:
        exact, narrow, low, high = classify(aggs)
        for i in np.flatnonzero(exact & ~known):
            out[("together", "exact", int(i))] = None
        for i in np.flatnonzero(narrow & ~known_any):
            out[("together", "within", int(i))] = (low[i], high[i])
    return out


def reported_findings(report) -> dict:
    out: dict = {}
    for f in report.findings:
        alone = f.explanation.split(" alone")[0] if " alone" in f.explanation else "together"
        kind = "within" if "within" in f.facts else "exact"
        for r in f.records:
            out[(alone, kind, r)] = f.intervals.get(r)
    return out


@st.composite
def releases(draw):
    n = draw(st.integers(2, 4))
    whole = draw(st.booleans())
    values = draw(
        st.lists(
            st.integers(0, 100) if whole else st.integers(0, 1000).map(lambda v: v / 10),
            min_size=n,
            max_size=n,
        )
    )
    x = np.array(values, dtype=float)
    aggs = []
    for r in range(draw(st.integers(1, 3))):
        labels = draw(st.lists(st.integers(-1, 1), min_size=n, max_size=n))
        g = np.array(labels, dtype=np.int64)
        present = np.unique(g[g >= 0])
        if not present.size:
            continue
        g = np.where(g >= 0, np.searchsorted(present, g), -1)  # groups 0..k-1, none empty
        statistic = draw(st.sampled_from(["mean", "sum"]))
        decimals = draw(st.sampled_from([None, 0, 1, 2]))
        size = np.bincount(g[g >= 0])
        figures = np.bincount(g[g >= 0], weights=x[g >= 0])
        if statistic == "mean":
            figures = figures / size
        half = 0.0
        if decimals is not None:
            figures, half = np.round(figures, decimals), 0.5 * 10.0**-decimals
        aggs.append(Aggregate(f"r{r}", "v", g, figures, statistic, table=True, precision=half))
    return x, aggs


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(releases())
def test_findings_equal_an_independent_vertex_solver(case):
    x, aggs = case
    if not aggs:
        return
    report = check_conflicts(pd.DataFrame({"v": x}), views(*aggs), p=P, bounds={"v": (LOW, HIGH)})
    assert not report.incomplete
    got = reported_findings(report)
    want = expected_findings(x, aggs)
    assert set(got) == set(want)
    for key, interval in want.items():
        if interval is not None:
            assert got[key] == pytest.approx(interval, abs=1e-6)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_screening_a_large_part_keeps_every_interval_it_does_not_settle_exact(seed):
    """Past ``exact_part`` unknowns, an unknown whose reachable values already settle it gets no
    LP of its own: its interval is then inside the exact one; every other is exact."""
    rng = np.random.default_rng(seed)
    n = 12
    x = rng.integers(0, 101, n).astype(float)
    groups = [rng.choice(n, size=int(rng.integers(2, 5)), replace=False) for _ in range(6)]
    eqs = equations_from_lists(n, groups, [x[g].sum() for g in groups])
    rhs = np.asarray(eqs.rhs)
    half = rng.choice([0.0, 0.5], size=rhs.size)
    args = (eqs, rhs - half, rhs + half, np.zeros(n), np.full(n, 100.0))

    def settled(lo, hi):
        return (hi - lo) / 2 > 0.05 * x + 1e-4

    exact = feasible_intervals(*args, point=x)
    screened = feasible_intervals(*args, point=x, settled=settled, exact_part=0)
    done = settled(screened.low, screened.high)
    assert np.allclose(screened.low[~done], exact.low[~done], atol=1e-6)
    assert np.allclose(screened.high[~done], exact.high[~done], atol=1e-6)
    assert (screened.low >= exact.low - 1e-6).all() and (screened.high <= exact.high + 1e-6).all()
    assert (settled(exact.low, exact.high) == done).all()


def test_the_release_gate_follows_the_intervals():
    """The gate reads the same check: printed means confine Doug (p% rule), exact ones fix him."""
    printed = [
        Aggregate("k1", "bmi", K1, np.array([35.75, 47.33]), precision=0.005),
        Aggregate("k2", "bmi", K2, np.array([33.33, 46.25]), precision=0.005),
    ]
    exact = [
        Aggregate("k1", "bmi", K1, np.bincount(K1, weights=BMI) / np.bincount(K1)),
        Aggregate("k2", "bmi", K2, np.bincount(K2, weights=BMI) / np.bincount(K2)),
    ]
    messages = []
    for aggs in (printed, exact):
        report = check_conflicts(pd.DataFrame({"bmi": BMI}), views(*aggs), new="k2")
        (finding,) = conflict_findings(report)
        assert finding.code == "conflict_exact_inference" and finding.records == 1
        messages.append(finding.message)
    assert "confine the bmi of 1 record(s) to within the p% rule" in messages[0]
    assert "fix the bmi of 1 record(s)" in messages[1]
