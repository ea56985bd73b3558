"""Issue 8's stroke case on the real data: two releases that each keep the glucose reading (unique
for most patients) can be joined row by row; joined, classes fall below k and some disclose the
stroke value. The check's records are compared with a plain pandas computation of the join."""

import numpy as np
import pandas as pd
import pytest

from anonweb.core.conflicts.check import ReleaseView, check_conflicts

A_QI = ["gender", "age"]
B_QI = ["work_type", "Residence_type", "smoking_status"]


@pytest.fixture(scope="module")
def stroke(datasets_dir):
    df = pd.read_csv(datasets_dir / "pycanon/raw/healthcare-dataset-stroke-data.csv")
    return df


def releases(src: pd.DataFrame):
    age = (src["age"] // 20 * 20).astype(int)
    a = src.assign(age=age.astype(str) + "-" + (age + 19).astype(str))[
        [*A_QI, "avg_glucose_level", "stroke"]
    ]
    b = src[[*B_QI, "avg_glucose_level", "stroke"]]
    views = []
    for label, frame, qis, seed in (("A", a, A_QI, 1), ("B", b, B_QI, 2)):
        order = np.random.default_rng(seed).permutation(len(src))
        views.append(
            ReleaseView(label, frame.iloc[order].reset_index(drop=True), order, (), tuple(qis))
        )
    return a, views


def test_glucose_joins_the_two_releases_and_the_join_is_checked_for_k_and_l(stroke):
    a, views = releases(stroke)
    report = check_conflicts(stroke, views, sensitive=["stroke"], k=5, l=2, new="B")
    by_column = {f.columns: f for f in report.findings}
    k_finding, l_finding = by_column[()], by_column[("stroke",)]
    assert k_finding.type == l_finding.type == "linkage"
    assert k_finding.facts["link_columns"] == ["avg_glucose_level"]
    assert k_finding.facts["k_joined"] == 1

    # The same by hand: the columns both releases show unchanged (reading and stroke) link a row
    # of A to a row of B when their values occur once; the joined class is (A's class, B's
    # class); each release alone keeps the record among >= 5.
    joined = pd.DataFrame({"a": a[A_QI].astype(str).agg("|".join, axis=1)})
    joined["b"] = stroke[B_QI].astype(str).agg("|".join, axis=1)
    joined["stroke"] = stroke["stroke"]
    shared = stroke.groupby(["avg_glucose_level", "stroke"])["stroke"].transform("size")
    linked = shared == 1
    size_a = joined.groupby("a")["a"].transform("size")
    size_b = joined.groupby("b")["b"].transform("size")
    size_ab = joined.groupby(["a", "b"])["a"].transform("size")
    expect_k = np.flatnonzero(linked & (size_ab < 5) & (size_a >= 5) & (size_b >= 5))
    assert sorted(k_finding.records) == expect_k.tolist() and len(expect_k) > 50

    l_a = joined.groupby("a")["stroke"].transform("nunique")
    l_b = joined.groupby("b")["stroke"].transform("nunique")
    l_ab = joined.groupby(["a", "b"])["stroke"].transform("nunique")
    expect_l = np.flatnonzero(linked & (l_ab < 2) & (l_a >= 2) & (l_b >= 2))
    assert sorted(l_finding.records) == expect_l.tolist() and len(expect_l) > 50


def test_without_the_reading_in_one_release_they_cannot_be_joined(stroke):
    _, views = releases(stroke)
    a, b = views
    b = ReleaseView(
        "B", b.frame.drop(columns=["avg_glucose_level"]), b.rows, (), b.quasi_identifiers
    )
    report = check_conflicts(stroke, [a, b], sensitive=["stroke"], k=5, l=2, new="B")
    assert not [f for f in report.findings if f.type == "linkage"]
