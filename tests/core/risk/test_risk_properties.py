"""Properties of the risk measures on generated tables (hypothesis)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anonweb.core.assessment.profile import assess_risk
from anonweb.core.risk.classes import group_codes

QIS = ["q1", "q2"]

values = st.one_of(st.none(), st.sampled_from(["a", "b", "c"]))


@st.composite
def tables(draw, min_rows=1, max_rows=40):
    n = draw(st.integers(min_rows, max_rows))
    return pd.DataFrame(
        {
            "q1": draw(st.lists(values, min_size=n, max_size=n)),
            "q2": draw(st.lists(st.integers(0, 3), min_size=n, max_size=n)),
            "cat": draw(
                st.lists(st.one_of(st.none(), st.sampled_from("xyzw")), min_size=n, max_size=n)
            ),
            "num": draw(st.lists(st.integers(0, 9), min_size=n, max_size=n)),
        }
    )


def profile(df, qis=QIS):
    return assess_risk(df, quasi_identifiers=qis, sensitive=["cat", "num"])


def summary(df, qis=QIS):
    d = profile(df, qis).to_dict()
    return d


@settings(max_examples=60, deadline=None)
@given(tables())
def test_codes_match_pandas_groupby(df):
    expected = df.groupby(QIS, dropna=False, sort=False).ngroup().to_numpy()
    ours = group_codes(df, QIS)
    # The same partition: a one-to-one map between our class numbers and pandas'.
    pairs = set(zip(ours.tolist(), expected.tolist(), strict=True))
    assert len(pairs) == len(set(ours.tolist())) == len(set(expected.tolist()))


@settings(max_examples=60, deadline=None)
@given(tables())
def test_merging_classes_never_lowers_k_or_l(df):
    fine, coarse = profile(df, QIS), profile(df, ["q1"])
    assert coarse.k >= fine.k
    for sa in ("cat", "num"):
        f, c = fine.to_dict()["sensitive"][sa], coarse.to_dict()["sensitive"][sa]
        assert c["l_distinct"] >= f["l_distinct"]
        assert c["l_entropy"] >= f["l_entropy"] - 1e-9


@settings(max_examples=60, deadline=None)
@given(tables())
def test_bounds(df):
    d = summary(df)
    for sa in ("cat", "num"):
        s = d["sensitive"][sa]
        assert 1 <= s["l_distinct"] <= d["k"]
        assert 1 - 1e-9 <= s["l_entropy"] <= s["l_distinct"] + 1e-9
        assert 0.0 <= s["t_closeness"] <= 1.0
        assert s["l_recursive"] <= s["l_distinct"]
    assert 0 < d["prosecutor_risk"]["mean"] <= d["prosecutor_risk"]["max"] <= 1.0


@settings(max_examples=60, deadline=None)
@given(tables(), st.randoms(use_true_random=False))
def test_row_order_and_index_do_not_matter(df, rnd):
    order = list(range(len(df)))
    rnd.shuffle(order)
    shuffled = df.iloc[order]
    shuffled.index = [f"r{rnd.randint(0, 10**6)}-{i}" for i in range(len(df))]
    a, b = summary(df), summary(shuffled)
    for key in ("rows", "classes", "k", "uniques", "class_sizes", "records_at_risk"):
        assert a[key] == b[key]
    for sa in ("cat", "num"):
        # Which tied classes make the capped list depends on order; the count does not.
        a["sensitive"][sa].pop("disclosing_classes")
        b["sensitive"][sa].pop("disclosing_classes")
        for key, val in a["sensitive"][sa].items():
            other = b["sensitive"][sa][key]
            if isinstance(val, float):
                assert np.isclose(val, other)
            else:
                assert val == other


@settings(max_examples=40, deadline=None)
@given(tables())
def test_input_frame_is_unchanged(df):
    before = df.copy(deep=True)
    profile(df).to_dict(per_class=True)
    pd.testing.assert_frame_equal(df, before)


@settings(max_examples=40, deadline=None)
@given(tables())
def test_per_class_lists_agree_with_the_summary(df):
    d = profile(df).to_dict(per_class=True)
    json.dumps(d, allow_nan=False)  # JSON-safe: no NaN, no NumPy scalars
    sizes = d["per_class"]["size"]
    assert sum(sizes) == d["rows"] and len(sizes) == d["classes"]
    for sa in ("cat", "num"):
        s = d["sensitive"][sa]
        pc = s["per_class"]
        assert min(pc["l_distinct"]) == s["l_distinct"]
        assert max(pc["t"]) == s["t_closeness"]
        assert sum(1 for n in pc["l_distinct"] if n == 1) == s["homogeneous_classes"]
        assert all(0 < share <= 1 for share in pc["top_share"])


def _same_partition(a: np.ndarray, b: np.ndarray) -> bool:
    pairs = set(zip(a.tolist(), b.tolist(), strict=True))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


@pytest.mark.parametrize(
    ("cards", "rows"),
    [
        ((3, 4, 5), 1000),  # small key space: dense slot table
        ((997, 991, 983), 2000),  # key space far above the rows: hashing
        ((10**5,) * 5, 3000),  # product beyond int64: the key is compacted on the way
    ],
    ids=["dense", "hashed", "compacted"],
)
def test_every_coding_path_gives_the_groupby_partition(cards, rows):
    rng = np.random.default_rng(5)
    df = pd.DataFrame({f"c{i}": rng.integers(0, c, rows) for i, c in enumerate(cards)})
    df.iloc[::7, 0] = np.nan  # missing values are a value of their own on every path
    cols = list(df.columns)
    expected = df.groupby(cols, dropna=False, sort=False).ngroup().to_numpy()
    assert _same_partition(group_codes(df, cols), expected)


def test_categorical_and_integer_columns_partition_like_groupby():
    rng = np.random.default_rng(6)
    n = 500
    cat = pd.Categorical(rng.choice(["x", "y", None], n), categories=["x", "y", "unused"])
    df = pd.DataFrame(
        {"cat": cat, "neg": rng.integers(-5, 5, n), "big": rng.integers(0, 10**12, n)}
    )
    cols = list(df.columns)
    expected = df.groupby(cols, dropna=False, observed=True, sort=False).ngroup().to_numpy()
    assert _same_partition(group_codes(df, cols), expected)
    k = assess_risk(df, quasi_identifiers=["cat"]).to_dict()
    assert k["classes"] == 3  # x, y and missing; the unused category is no class
