"""Column types on the way through: integers read with blank cells stay integers (pandas'
nullable ``Int64``) and every measure and step takes them; a step that writes text into part of
a numeric column leaves a column of one type, which Parquet (the web's release format) stores."""

from __future__ import annotations

import io

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anonweb.core.io.frame import read_table
from anonweb.core.io.hierarchy import Hierarchy
from anonweb.core.release.plan import plan_from_dict
from anonweb.core.release.run import apply_plan, one_type_per_column
from anonweb.core.risk.classes import equivalence_classes, group_codes
from anonweb.core.search.flash import optimal_generalization

AGE_ROWS = tuple((str(a), f"{a // 10 * 10}-{a // 10 * 10 + 9}", "*") for a in range(100))


def _table(n: int = 300, seed: int = 1) -> pd.DataFrame:
    """Read from CSV text as an upload is: zip int64, age and income Int64 with blanks."""
    rng = np.random.default_rng(seed)
    age = rng.integers(20, 70, n).astype(object)
    age[::17] = None
    income = rng.integers(1000, 9000, n).astype(object)
    income[::13] = None
    raw = pd.DataFrame(
        {
            "zip": np.r_[99999, rng.choice([47677, 47602, 47678, 47905, 47909, 12345], n - 1)],
            "age": age,
            "sex": rng.choice(["F", "M"], n),
            "income": income,
            "disease": rng.choice(["flu", "ulcer", "cancer"], n),
        }
    )
    df = read_table(io.BytesIO(raw.to_csv(index=False).encode()), name="t.csv")
    assert str(df["age"].dtype) == "Int64" and str(df["income"].dtype) == "Int64"
    assert df["zip"].dtype == np.int64
    return df


def _one_type(series: pd.Series) -> set[str]:
    if series.dtype != object:
        return {str(series.dtype)}
    return {type(v).__name__ for v in series if not pd.isna(v)}


@settings(max_examples=80, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.integers(-3, 3)), min_size=1, max_size=40),
    st.lists(st.one_of(st.none(), st.integers(-(2**62), 2**62)), min_size=1, max_size=40),
)
def test_nullable_integer_classes_match_pandas_groupby(narrow, wide):
    n = min(len(narrow), len(wide))
    df = pd.DataFrame(
        {"a": pd.array(narrow[:n], dtype="Int64"), "b": pd.array(wide[:n], dtype="Int64")}
    )
    for qis in (["a"], ["b"], ["a", "b"]):
        expected = df.groupby(qis, dropna=False, sort=False).ngroup().to_numpy()
        ours = group_codes(df, qis)
        pairs = set(zip(ours.tolist(), expected.tolist(), strict=True))
        assert len(pairs) == len(set(ours.tolist())) == len(set(expected.tolist()))


def test_blank_integers_are_one_class_of_their_own():
    df = pd.DataFrame({"age": pd.array([39, None, 39, None, 40], dtype="Int64")})
    ec = equivalence_classes(df, quasi_identifiers=["age"])
    assert sorted(ec.sizes.tolist()) == [1, 2, 2]


def test_the_search_reads_an_integer_column_as_its_hierarchy_writes_it():
    """The same ages as integers with blanks and as text give the same optimum."""
    df = _table()
    hierarchies = {"age": Hierarchy(rows=AGE_ROWS)}
    as_text = df.assign(age=df["age"].astype("string").astype(object))
    results = [
        optimal_generalization(
            frame, quasi_identifiers=["age"], hierarchies=hierarchies, k=5, suppression=0.05
        )
        for frame in (df, as_text)
    ]
    assert results[0].to_dict() | {"search": {}} == results[1].to_dict() | {"search": {}}
    out = results[0].apply(df)
    assert _one_type(out["age"]) <= {"str"}


PLAN_HIERARCHIES = {
    "zip": {"builder": "mask"},
    "age": {"rows": [list(r) for r in AGE_ROWS]},
    "sex": {"rows": [["F", "*"], ["M", "*"]]},
}


@pytest.mark.parametrize(
    "kind,params,column",
    [
        ("suppress", {"columns": ["age", "zip"], "values": [30, 47677]}, "age"),
        ("suppress", {"columns": ["zip"], "values": [47677]}, "zip"),
        ("suppress", {"columns": ["age"], "rare": 7}, "age"),
        ("substitute", {"columns": ["age"], "codebook": {"30": "thirty"}}, "age"),
        ("substitute", {"columns": ["zip"], "codebook": {"12345": "elsewhere"}}, "zip"),
        ("generalize", {"levels": {"age": 1, "zip": 2}}, "age"),
        ("optimal_generalization", {"k": 4, "suppression": 0.05}, "zip"),
        ("optimal_generalization", {"k": 4, "suppression": 0.05}, "age"),
    ],
)
def test_a_step_writing_text_into_numbers_leaves_one_type(tmp_path, kind, params, column):
    df = _table()
    plan = plan_from_dict(
        {
            "quasi_identifiers": ["zip", "age", "sex"],
            "sensitive": ["disease"],
            "hierarchies": PLAN_HIERARCHIES,
            "steps": [{"kind": kind, "params": params}],
        }
    )
    out, _ = apply_plan(df, plan, rng=np.random.default_rng(0), secrets={})
    for c in out.columns:
        assert len(_one_type(out[c])) <= 1, (c, _one_type(out[c]))
    out.to_parquet(tmp_path / "data.parquet", index=False)
    back = pd.read_parquet(tmp_path / "data.parquet")
    changed = out[column].astype(str) != df[column].astype(str)
    assert changed.any()  # the step wrote into this column
    # numbers are written as they read: 47677, never 47677.0; blanks stay blank
    kept = back[column][~changed & df[column].notna()]
    assert kept.astype(str).tolist() == df[column][kept.index].astype(str).tolist()
    assert back[column][df[column].isna() & ~changed].isna().all()


def test_one_type_per_column_leaves_typed_columns_alone():
    df = pd.DataFrame(
        {
            "i": pd.array([1, None], dtype="Int64"),
            "f": [1.5, np.nan],
            "t": ["a", None],
            "n": pd.Series([1, 2.5], dtype=object),  # numbers only: Parquet takes them
            "m": pd.Series([np.int64(7), "*"], dtype=object),
            "x": pd.Series([3.0, "*"], dtype=object),
        }
    )
    out = one_type_per_column(df)
    assert out["m"].tolist() == ["7", "*"] and out["x"].tolist() == ["3", "*"]
    for c in "iftn":
        pd.testing.assert_series_equal(out[c], df[c])
