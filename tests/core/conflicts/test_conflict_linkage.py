"""Releases that can be joined: tokens under the same key or not, row order, unique shared
columns; joined classes checked for k and l; the composition attack on releases of subsets."""

import numpy as np
import pandas as pd
import pytest

from anonweb.core.conflicts.check import ReleaseView, check_conflicts
from anonweb.core.conflicts.linkage import RecordRelease, find_join
from anonweb.core.io.frame import read_table
from anonweb.core.release.plan import plan_from_dict
from anonweb.core.release.run import apply_plan

# Ten women aged 31-34, two aged 36, ten aged 41-44. Release A cuts ages at 30/40/50, B at
# 25/35/45: A's classes hold 12 and 10 people, B's 10 and 12, but the two 36-year-olds are the
# only people in A's [30, 40) and B's [35, 45) both.
AGES = [31, 32, 33, 34, 31, 32, 33, 34, 31, 32, 36, 36, 41, 42, 43, 44, 41, 42, 43, 44, 41, 42]
PEOPLE = pd.DataFrame(
    {
        "ssn": [f"{100 + i:03d}-55-{1000 + 7 * i}" for i in range(len(AGES))],
        "age": AGES,
        "disease": ["flu", "asthma"] * (len(AGES) // 2),
    }
)
TWINS = (10, 11)  # the two 36-year-olds


def bins(ages: pd.Series, start: int) -> pd.Series:
    lo = (ages - start) // 10 * 10 + start
    return lo.astype(str) + "-" + (lo + 9).astype(str)


def tokenized(key: bytes, start: int, seed: int) -> ReleaseView:
    plan = plan_from_dict(
        {"steps": [{"kind": "tokenize", "params": {"columns": ["ssn"], "key": "release-key"}}]}
    )
    out, _ = apply_plan(
        PEOPLE, plan, rng=np.random.default_rng(0), secrets={"release-key": key}, measure_risk=False
    )
    out["age"] = bins(PEOPLE["age"], start)
    order = np.random.default_rng(seed).permutation(len(out))  # no join by row order
    return ReleaseView(f"start {start}", out.iloc[order].reset_index(drop=True), order, (), ())


def check(views, **kwargs):
    return check_conflicts(PEOPLE, views, quasi_identifiers=["age"], **kwargs)


def test_tokens_under_the_same_key_join_the_releases():
    views = [tokenized(b"one key", 0, 1), tokenized(b"one key", 5, 2)]
    (finding,) = check(views, k=5).findings
    assert finding.type == "linkage" and sorted(finding.records) == list(TWINS)
    assert finding.facts["link"] == "columns" and finding.facts["link_columns"] == ["ssn"]
    assert finding.facts["k_joined"] == 2
    assert "ssn" in finding.explanation


def test_tokens_under_different_keys_do_not():
    views = [tokenized(b"first key", 0, 1), tokenized(b"second key", 5, 2)]
    a, b = (RecordRelease(v.label, v.frame, v.rows, ("age",)) for v in views)
    assert find_join(a, b) is None
    (finding,) = check(views, k=5).findings
    # Not joinable: the small joined classes are a warning of what any join would expose.
    assert finding.type == "intersection" and sorted(finding.records) == list(TWINS)
    assert "cannot be joined" in finding.explanation
    assert not check(views, k=5, unlinked_k=False).findings


def test_the_same_row_order_joins_the_releases():
    a = PEOPLE.assign(age=bins(PEOPLE["age"], 0))[["age"]]
    b = PEOPLE.assign(age=bins(PEOPLE["age"], 5))[["age"]]
    rows = np.arange(len(PEOPLE))
    (finding,) = check([ReleaseView("A", a, rows), ReleaseView("B", b, rows)], k=5).findings
    assert finding.type == "linkage" and finding.facts["link"] == "row order"
    # The subset of A (every other row) in the same order still joins.
    sub = rows[::2]
    join = find_join(
        RecordRelease("A", a, rows, ("age",)), RecordRelease("S", b.iloc[sub], sub, ("age",))
    )
    assert join is not None and join.how == "row order"


def test_a_unique_reading_kept_in_both_joins_them_and_discloses_the_diagnosis():
    """Gate's case: both releases keep a glucose reading unique per record; each has both
    diagnoses in every class; joined by the reading, the twins' class has one."""
    rng = np.random.default_rng(3)
    glucose = rng.permutation(np.arange(80, 80 + len(PEOPLE))).astype(float)
    disease = ["flu"] * len(PEOPLE)
    disease[0] = disease[12] = "stroke"  # one in each outer class
    src = PEOPLE.assign(glucose=glucose, disease=disease)
    views = []
    for start, seed in ((0, 1), (5, 2)):
        order = np.random.default_rng(seed).permutation(len(src))
        frame = src.assign(age=bins(src["age"], start))[["age", "glucose", "disease"]]
        views.append(ReleaseView(f"start {start}", frame.iloc[order], order))
    report = check_conflicts(src, views, quasi_identifiers=["age"], sensitive=["disease"], l=2)
    (finding,) = [f for f in report.findings if f.columns == ("disease",)]
    assert finding.type == "linkage" and sorted(finding.records) == list(TWINS)
    assert finding.facts["link_columns"] == ["glucose"]


def test_composition_attack_on_releases_covering_different_records():
    """The 2-diverse pair of releases from the intersection check, each missing a record."""
    source = pd.DataFrame({"disease": ["flu", "hiv", "cancer", "flu", "hiv", "cancer"]})
    a = pd.DataFrame({"h": list("PPQQRR"), "disease": source["disease"]})
    b = pd.DataFrame({"g": ["X", "Y", "Y", "Z", "Z", "X"], "disease": source["disease"]})
    reverse = np.arange(6)[::-1].copy()
    views = [
        ReleaseView("A", a, np.arange(6), quasi_identifiers=("h",)),
        ReleaseView("B", b.iloc[reverse].reset_index(drop=True), reverse, quasi_identifiers=("g",)),
    ]
    (finding,) = check_conflicts(source, views, sensitive=["disease"]).findings
    assert finding.type == "intersection" and finding.records == tuple(range(6))
    assert finding.facts == {"l": 2, "l_combined": 1}


@pytest.mark.shared_data
def test_two_k_anonymous_releases_of_adult_under_different_hierarchies(datasets_dir):
    arx = datasets_dir / "arx"
    adult = read_table(arx / "adult.csv", sep=";")
    qis = ["age", "sex", "race", "marital-status"]
    levels = {"age": 1, "sex": 0, "race": 1, "marital-status": 2}
    outputs = []
    for start in (0, 5):
        hierarchies = {q: {"path": str(arx / f"adult_hierarchy_{q}.csv"), "sep": ";"} for q in qis}
        hierarchies["age"] = {"builder": "interval", "width": 10, "start": start}
        plan = plan_from_dict(
            {
                "quasi_identifiers": qis,
                "hierarchies": hierarchies,
                "steps": [{"kind": "generalize", "params": {"levels": levels}}],
            }
        )
        out, _ = apply_plan(adult, plan, rng=np.random.default_rng(0), measure_risk=False)
        outputs.append(out[qis])
    k = 10
    assert [o.groupby(qis).size().min() for o in outputs] == [10, 13]  # both 10-anonymous
    rows = np.arange(len(adult))
    views = [ReleaseView(f"bins from {s}", o, rows) for s, o in zip((0, 5), outputs)]
    (finding,) = check_conflicts(adult, views, quasi_identifiers=qis, k=k).findings
    # Independently: group the records by both releases' classes with pandas.
    joined = pd.concat([outputs[0].add_suffix(" A"), outputs[1].add_suffix(" B")], axis=1)
    size = joined.groupby(list(joined.columns))["age A"].transform("size")
    expected = np.flatnonzero((size < k).to_numpy())
    assert list(finding.records) == expected.tolist() and len(expected) == 7
    assert finding.type == "linkage" and finding.facts["link"] == "row order"
    assert finding.facts["k_joined"] == int(size.min())
