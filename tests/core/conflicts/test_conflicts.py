"""Conflicting releases: hand-worked composition attack and properties."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anonweb.core.conflicts.intersection import release_conflicts
from anonweb.core.errors import DataError

SOURCE = pd.DataFrame({"disease": ["flu", "hiv", "cancer", "flu", "hiv", "cancer"]})
# Release A groups rows {0,1} {2,3} {4,5}; release B groups {0,5} {1,2} {3,4}: each class in each
# release holds two different diseases (distinct 2-diversity), yet every pair of classes a person
# falls in shares exactly one disease.
A = pd.DataFrame({"h": list("PPQQRR")})
B = pd.DataFrame({"g": ["X", "Y", "Y", "Z", "Z", "X"]})


def test_two_2_diverse_releases_disclose_every_disease_together():
    report = release_conflicts(
        SOURCE, A, B, quasi_identifiers_a=["h"], quasi_identifiers_b=["g"], sensitive=["disease"]
    )
    (s,) = report.sensitive
    assert (report.k_a, report.k_b) == (2, 2)
    assert report.k_if_linked == 1  # joined row by row, everyone is unique
    assert (s.l_a, s.l_b, s.l_combined) == (2, 2, 1)
    assert (s.disclosed_a, s.disclosed_b) == (0, 0)
    assert s.disclosed_combined == 6 and s.newly_disclosed == 6
    assert report.conflicting


def test_a_release_does_not_conflict_with_itself():
    report = release_conflicts(SOURCE, A, A, quasi_identifiers_a=["h"], sensitive=["disease"])
    assert not report.conflicting
    assert report.sensitive[0].l_combined == 2 and report.k_if_linked == 2


def test_already_disclosed_records_are_not_counted_as_new():
    a = pd.DataFrame({"h": list("PPQQRS")})  # row 5 alone in A: disclosed by A already
    report = release_conflicts(
        SOURCE, a, B, quasi_identifiers_a=["h"], quasi_identifiers_b=["g"], sensitive=["disease"]
    )
    s = report.sensitive[0]
    assert s.disclosed_a == 2  # rows 4 and 5 (R and S are singletons)
    assert s.newly_disclosed == s.disclosed_combined - 2


def test_missing_values_are_a_value_of_their_own():
    source = pd.DataFrame({"d": ["x", None, "x", None]})
    a = pd.DataFrame({"q": [1, 1, 2, 2]})
    b = pd.DataFrame({"q": [None, None, None, None]})
    report = release_conflicts(source, a, b, quasi_identifiers_a=["q"], sensitive=["d"])
    assert report.sensitive[0].l_a == 2 and report.k_b == 4


def test_rows_must_align():
    with pytest.raises(DataError, match="one row per source row"):
        release_conflicts(
            SOURCE, A.head(5), B, quasi_identifiers_a=["h"], quasi_identifiers_b=["g"]
        )


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(0, 4)), min_size=1, max_size=40
    )
)
def test_combined_l_never_exceeds_either_release(rows):
    arr = np.array(rows)
    source = pd.DataFrame({"s": arr[:, 2]})
    a, b = pd.DataFrame({"q": arr[:, 0]}), pd.DataFrame({"q": arr[:, 1]})
    report = release_conflicts(source, a, b, quasi_identifiers_a=["q"], sensitive=["s"])
    s = report.sensitive[0]
    assert 1 <= s.l_combined <= min(s.l_a, s.l_b)
    assert s.newly_disclosed <= s.disclosed_combined
    assert report.k_if_linked <= min(report.k_a, report.k_b)
    # the brute-force definition, record by record
    sets_a = source.groupby(a["q"])["s"].agg(set)
    sets_b = source.groupby(b["q"])["s"].agg(set)
    inter = [len(sets_a[x] & sets_b[y]) for x, y in zip(a["q"], b["q"], strict=True)]
    assert s.disclosed_combined == sum(1 for i in inter if i == 1)
