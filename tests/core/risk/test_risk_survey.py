"""sdcMicro's risk measures for survey microdata: individual risk with weights, household risk
and SUDA2, checked against sdcMicro's own expected values (its ``tests/testthat`` files, cited
by name), hand-worked cases and, for MSUs, a brute force over column subsets."""

from __future__ import annotations

import math
from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anonweb.core.errors import DataError, ParameterError
from anonweb.core.risk.individual import household_risk, individual_risk
from anonweb.core.risk.suda2 import suda2

# sdcMicro tests/testthat/test_indivRisk.R, "without missing": three keys and a weight
_V = [2, 3, 2, 2, 3, 3, 1, 2, 3, 3, 3, 3, 3, 3, 4, 3, 1, 3, 1, 2, 1, 1, 1, 1]
WEIGHTED = pd.DataFrame(
    {
        "A": _V[0:8],
        "B": _V[8:16],
        "C": _V[16:24],
        "weight": [18.0, 45.5, 39.0, 17.0, 92.0, 8.0, 123.5, 51],
    }
)
QIS = ["A", "B", "C"]


@pytest.mark.parametrize(
    ("method", "expected"),
    [
        (
            "approx",
            [0.01369863, 0.08579129, 0.01369863, 0.17707583]
            + [0.01877883, 0.01877883, 0.03931625, 0.01369863],
        ),
        (
            "exact",
            [0.01355297, 0.08579129, 0.01355297, 0.17707583]
            + [0.01877883, 0.01877883, 0.03931625, 0.01355297],
        ),
    ],
)
def test_individual_risk_with_weights_matches_sdcmicro(method, expected):
    r = individual_risk(WEIGHTED, quasi_identifiers=QIS, weights="weight", method=method)
    np.testing.assert_allclose(r.risk, expected, atol=5e-9)
    assert r.global_risk == pytest.approx(np.mean(expected), abs=1e-8)
    assert r.expected_reidentifications == pytest.approx(np.sum(expected), abs=1e-7)


def test_individual_risk_without_weights_is_one_over_the_sample_frequency():
    # sdcMicro's survey = FALSE (and weights 1): c(1/3, 1, 1/3, 1, 1/2, 1/2, 1, 1/3)
    r = individual_risk(WEIGHTED, quasi_identifiers=QIS)
    np.testing.assert_allclose(r.risk, [1 / 3, 1, 1 / 3, 1, 0.5, 0.5, 1, 1 / 3])
    assert r.expected_reidentifications == pytest.approx(5.0)
    assert r.to_dict()["weights"].startswith("none")
    ones = WEIGHTED.assign(weight=1.0)
    same = individual_risk(ones, quasi_identifiers=QIS, weights="weight")
    np.testing.assert_allclose(same.risk, r.risk)


def test_global_risk_of_calcrisks_reference():
    # sdcMicro tests/testthat/test_calcRisks.R: ten records whose individual risks are
    # 0.5 1 0.5 1 1 0.5 1 0.5 1 1 -> global risk 0.8, expected re-identifications 8
    df = pd.DataFrame({"k": ["a", "u1", "a", "u2", "u3", "b", "u4", "b", "u5", "u6"]})
    r = individual_risk(df, quasi_identifiers=["k"])
    assert r.global_risk == pytest.approx(0.8)
    assert r.expected_reidentifications == pytest.approx(8.0)
    d = r.to_dict()
    assert d["records_above"] == {"0.2": 10, "0.1": 10, "0.05": 10, "0.01": 10}


def test_hand_worked_unique_and_pair_formulas():
    # key x: f=1, F=4 -> p=1/4: p/(1-p) log(1/p) = (1/3) log 4
    # key y: f=2, F=2+6=8 -> p=1/4: 1/3 - (1/9) log 4
    # key z: f=3, F=3*2=6 -> p=1/2: p/(f-(1-p)) = 0.5/2.5 = 0.2
    # key w: f=2, F=2 -> every person sampled: 1/2
    df = pd.DataFrame(
        {
            "q": ["x", "y", "y", "z", "z", "z", "w", "w"],
            "w": [4.0, 2.0, 6.0, 2.0, 2.0, 2.0, 1.0, 1.0],
        }
    )
    r = individual_risk(df, quasi_identifiers=["q"], weights="w")
    lg4 = math.log(4)
    expected = [lg4 / 3, 1 / 3 - lg4 / 9, 1 / 3 - lg4 / 9, 0.2, 0.2, 0.2, 0.5, 0.5]
    np.testing.assert_allclose(r.risk, expected)
    np.testing.assert_array_equal(r.sample_frequency, [1, 2, 2, 3, 3, 3, 2, 2])
    np.testing.assert_allclose(r.weight_sum, [4, 8, 8, 6, 6, 6, 2, 2])
    assert df["w"].tolist() == [4.0, 2.0, 6.0, 2.0, 2.0, 2.0, 1.0, 1.0]  # input untouched


def test_missing_quasi_identifier_is_its_own_value():
    df = pd.DataFrame({"q": ["a", None, np.nan, "a"]})
    r = individual_risk(df, quasi_identifiers=["q"])
    np.testing.assert_allclose(r.risk, [0.5, 0.5, 0.5, 0.5])


def test_household_risk_hand_worked():
    # household 1: risks 0.5 and 0.5 -> 1 - 0.25 = 0.75 for both members
    # household 2: one member, risk 0.2 -> 0.2; household 3: 0.1, 0.1, 1.0 -> 1.0
    # a member without household id: a household of one (risk 0.3)
    df = pd.DataFrame({"hh": [1, 1, 2, 3, 3, 3, None]})
    r = np.array([0.5, 0.5, 0.2, 0.1, 0.1, 1.0, 0.3])
    h = household_risk(df, household="hh", individual=r)
    np.testing.assert_allclose(h.risk, [0.75, 0.75, 0.2, 1.0, 1.0, 1.0, 0.3])
    d = h.to_dict()
    assert d["max"] == 1.0
    assert d["households"] == 4
    assert d["households_above"] == {"0.2": 3, "0.1": 4, "0.05": 4, "0.01": 4}


def test_household_risk_of_survey_risks():
    ind = individual_risk(WEIGHTED, quasi_identifiers=QIS, weights="weight")
    df = WEIGHTED.assign(hh=[1, 1, 2, 2, 3, 3, 4, 4])
    h = household_risk(df, household="hh", individual=ind)
    expected = [1 - (1 - ind.risk[i]) * (1 - ind.risk[i + 1]) for i in range(0, 8, 2)]
    np.testing.assert_allclose(h.household_risk, expected)
    assert h.household_risk.max() >= ind.risk.max()


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"weights": "nope"}, DataError, "nope"),
        ({"weights": "A"}, ParameterError, "cannot also be a quasi-identifier"),
        ({"weights": "weight", "method": "fast"}, ParameterError, "approx"),
        ({"thresholds": [1.5]}, ParameterError, "between 0 and 1"),
    ],
)
def test_individual_risk_refuses_bad_parameters(kwargs, error, message):
    with pytest.raises(error, match=message):
        individual_risk(WEIGHTED, quasi_identifiers=QIS, **kwargs)


@pytest.mark.parametrize(
    ("weights", "message"), [([0.5, 2.0], "below 1"), ([np.nan, 2.0], "missing or non-numeric")]
)
def test_bad_weights_are_refused(weights, message):
    df = pd.DataFrame({"q": ["a", "b"], "w": weights})
    with pytest.raises(DataError, match=message):
        individual_risk(df, quasi_identifiers=["q"], weights="w")


# sdcMicro tests/testthat/test_suda2.R, "suda2 book example" and "suda2 sdc guideline"
BOOK = pd.DataFrame(
    {
        "age": ["20s"] * 7 + ["60s"],
        "gender": ["male"] * 4 + ["female"] * 3 + ["male"],
        "income": ["50k+", "50k+"] + ["50k-"] * 6,
        "education": ["highschool"] * 4
        + ["university", "highschool", "middleschool", "university"],
    }
)
GUIDELINE = pd.DataFrame(
    {
        "Residence": ["Urban"] * 4 + ["Rural"] + ["Urban"] * 5,
        "Gender": ["Female", "Female", "Female", "Male", "Female"]
        + ["Male", "Female", "Male", "Female", "Female"],
        "Education": ["Secondary incomplete", "Secondary incomplete", "Primary incomplete"]
        + ["Secondary complete"] * 3
        + ["Primary complete", "Post-secondary", "Secondary incomplete", "Secondary incomplete"],
        "Labor": ["Employed", "Employed", "Non-LF", "Employed", "Unemployed", "Employed"]
        + ["Non-LF", "Unemployed", "Non-LF", "Non-LF"],
    }
)


def test_suda2_scores_match_sdcmicro_book_example():
    r = suda2(BOOK, quasi_identifiers=list(BOOK), max_size=4)
    np.testing.assert_array_equal(r.score[4:8], [4, 2, 6, 8])
    np.testing.assert_array_equal(r.score[:4], [0, 0, 0, 0])


def test_suda2_scores_match_sdcmicro_guideline_example():
    r = suda2(GUIDELINE, quasi_identifiers=list(GUIDELINE), max_size=4)
    np.testing.assert_array_equal(r.score, [0, 0, 6, 0, 12, 0, 6, 10, 0, 0])
    # record 5 (Rural, Female, Secondary complete, Unemployed): Rural alone (3! = 6), and the
    # pairs Female+Secondary complete, Female+Unemployed, Secondary complete+Unemployed (2! each)
    np.testing.assert_array_equal(r.msu_by_size[4], [1, 3, 0, 0])
    d = r.to_dict()
    assert d["max_score"] == 12.0
    assert d["records_with_msu"] == 4


def test_dis_suda_hand_worked():
    # guideline table: 4 full-key uniques (records 3, 5, 7, 8)... and the classes of two
    # (Urban, Female, Secondary incomplete, Employed) x2 -> P = 2 records in pairs
    r = suda2(GUIDELINE, quasi_identifiers=list(GUIDELINE), max_size=4)
    full = GUIDELINE.value_counts()
    u, p = int((full == 1).sum()), int(2 * (full == 2).sum())
    f = 0.01
    dis = u * f / (u * f + p * (1 - f))
    q = 1 + (8 - 4) / 20
    scores = r.score[r.score > 0]
    adj = np.sum(scores ** (-q))
    expected = 1 / (1 + (u / dis - u) / (scores**q * adj))
    np.testing.assert_allclose(r.dis_score[r.score > 0], expected)
    assert (r.dis_score[r.score == 0] == 0).all()
    assert r.to_dict()["dis_suda_max"] == pytest.approx(expected.max())


def test_max_size_bounds_the_search():
    full = suda2(GUIDELINE, quasi_identifiers=list(GUIDELINE), max_size=4)
    one = suda2(GUIDELINE, quasi_identifiers=list(GUIDELINE), max_size=1)
    assert one.msu_counts() == {"1": full.msu_counts()["1"]}
    np.testing.assert_array_equal(one.score, full.msu_by_size[:, 0] * 6)
    assert suda2(GUIDELINE, quasi_identifiers=list(GUIDELINE)).max_size == 3


@pytest.mark.parametrize(
    ("max_size", "message"), [(0, "from 1"), ("2", "whole number"), (True, "whole number")]
)
def test_suda2_refuses_bad_sizes(max_size, message):
    with pytest.raises(ParameterError, match=message):
        suda2(BOOK, quasi_identifiers=["age"], max_size=max_size)


def _brute_force_msus(df: pd.DataFrame, qis: list[str], max_size: int) -> np.ndarray:
    """MSU counts per record by size, straight from the definition: every column subset."""
    out = np.zeros((len(df), max_size), dtype=int)
    rows = [tuple(r) for r in df[qis].astype(object).where(df[qis].notna(), "<NA>").to_numpy()]
    for i in range(len(rows)):
        uniques: list[frozenset[int]] = []
        for s in range(1, max_size + 1):
            for cols in combinations(range(len(qis)), s):
                proj = [tuple(r[c] for c in cols) for r in rows]
                if proj.count(proj[i]) != 1:
                    continue
                if any(u <= set(cols) for u in uniques):
                    continue
                uniques.append(frozenset(cols))
                out[i, s - 1] += 1
    return out


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 5).flatmap(
        lambda m: st.lists(
            st.lists(st.sampled_from(["a", "b", "c", None]), min_size=m, max_size=m),
            min_size=1,
            max_size=12,
        )
    ),
    st.integers(1, 5),
)
def test_msus_equal_a_brute_force_over_column_subsets(rows, max_size):
    qis = [f"c{j}" for j in range(len(rows[0]))]
    df = pd.DataFrame(rows, columns=qis)
    before = df.copy()
    r = suda2(df, quasi_identifiers=qis, max_size=max_size)
    size = min(max_size, len(qis))
    np.testing.assert_array_equal(r.msu_by_size, _brute_force_msus(df, qis, size))
    weights = np.array([math.factorial(len(qis) - s) for s in range(1, size + 1)])
    np.testing.assert_array_equal(r.score, r.msu_by_size @ weights)
    # a record with an MSU is unique on all columns; a duplicated record has none
    full = df.astype(object).where(df.notna(), "<NA>").value_counts(dropna=False)
    sizes = (
        df.astype(object)
        .where(df.notna(), "<NA>")
        .apply(tuple, axis=1)
        .map({k: v for k, v in full.items()})
    )
    assert ((r.score > 0) <= (sizes.to_numpy() == 1)).all()
    if size == len(qis):  # searched up to every column: each sample unique has an MSU
        np.testing.assert_array_equal(r.score > 0, sizes.to_numpy() == 1)
    pd.testing.assert_frame_equal(df, before)


# sdcMicro's data(testdata2) (93 records), its seven key variables, weight and household id,
# read from data/testdata2.RData with pyreadr and kept as a CSV so the test needs no network
TESTDATA2 = Path(__file__).resolve().parents[2] / "fixtures" / "sdcmicro_testdata2.csv"
KEYS7 = ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex"]


def test_suda2_on_sdcmicro_testdata2_matches_its_expected_scores():
    df = pd.read_csv(TESTDATA2)
    # test_suda2.R "suda2 sdcObject original scores": round(score[1], 2) == 180
    seven = suda2(df, quasi_identifiers=KEYS7, max_size=7)
    assert seven.score[0] == 180
    # test_suda2.R "suda2 data frame" (five variables): score[1] == 2
    five = suda2(df, quasi_identifiers=["urbrur", "roof", "walls", "water", "sex"], max_size=5)
    assert five.score[0] == 2
    np.testing.assert_array_equal(seven.msu_by_size, _brute_force_msus(df, KEYS7, 7))


def test_survey_risk_on_testdata2_is_consistent():
    df = pd.read_csv(TESTDATA2)
    ind = individual_risk(df, quasi_identifiers=KEYS7, weights="sampling_weight")
    # every weight is 100 here, so F_k = 100 f_k and p_k = 1/100 for every key
    p = 0.01
    unique = ind.sample_frequency == 1
    np.testing.assert_allclose(ind.risk[unique], p / (1 - p) * np.log(1 / p))
    h = household_risk(df, household="ori_hid", individual=ind)
    for hid, members in df.groupby("ori_hid").groups.items():
        r = ind.risk[np.asarray(df.index.get_indexer(members))]
        np.testing.assert_allclose(h.risk[df["ori_hid"] == hid], 1 - np.prod(1 - r))


def test_risk_bands_are_closed_on_the_right():
    from anonweb.core.assessment.survey import risk_bands

    bands = risk_bands([0.0, 0.01, 0.0100001, 0.05, 0.2, 0.5, 0.51, 1.0])
    assert [b["count"] for b in bands] == [2, 2, 0, 1, 1, 2]


def test_survey_summary_lists_highest_risk_first_and_hides_it_from_the_public():
    from anonweb.core.assessment.survey import survey_risk
    from anonweb.core.raw_values import public_result

    df = WEIGHTED.assign(hh=[1, 1, 2, 2, 3, 3, 4, 4])
    s = survey_risk(df, quasi_identifiers=QIS, weights="weight", household="hh", with_suda2=True)
    summary = s.summary(df, quasi_identifiers=QIS, limit=3)
    top = summary["highest_risk_records"]
    # household 2 (rows 3 and 4) has the highest household risk; row 4 the higher own risk
    assert [r["row"] for r in top] == [4, 3, 2]
    assert top[0]["values"] == {"A": 2, "B": 3, "C": 2}
    assert summary["risk_bands"]["unit"] == "households"
    assert sum(b["count"] for b in summary["risk_bands"]["bands"]) == 4
    public = public_result(summary)
    assert "highest_risk_records" not in public and public["highest_risk_records_count"] == 3
    records = s.records()
    assert list(records.columns) == [
        "row",
        "individual_risk",
        "household_risk",
        "suda_score",
        "dis_suda_score",
    ]
    assert records["row"].tolist() == list(range(1, 9))
