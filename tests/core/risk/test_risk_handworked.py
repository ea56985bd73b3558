"""Risk measures on tables small enough to check by hand (the expected values are worked out in
the comments), plus the worked examples of the t-closeness paper and of seed 000."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from anonweb.core.assessment.profile import assess_risk
from anonweb.core.errors import CoreError, DataError, HierarchyError, ParameterError
from anonweb.core.io.frame import read_table
from anonweb.core.io.hierarchy import read_hierarchy
from anonweb.core.models.closeness import t_closeness
from anonweb.core.models.diversity import l_diversity
from anonweb.core.models.k_anonymity import k_anonymity
from anonweb.core.risk.classes import equivalence_classes
from anonweb.core.risk.linkage import linkage_histogram
from anonweb.core.risk.reidentification import record_risk, reidentification_risk

NAN = np.nan


@pytest.fixture
def small() -> pd.DataFrame:
    # Classes on A: a (3 rows), b (2), c (1), missing (2).
    return pd.DataFrame({"A": ["a", "a", "a", "b", "b", "c", NAN, None], "S": list("xyxxyzxx")})


def test_missing_quasi_identifier_is_a_class_of_its_own(small):
    k = k_anonymity(small, quasi_identifiers=["A"])
    assert (k.rows, k.classes, k.k, k.uniques) == (8, 4, 1, 1)
    assert k.to_dict()["class_sizes"] == [
        {"size": 1, "classes": 1, "records": 1},
        {"size": 2, "classes": 2, "records": 4},
        {"size": 3, "classes": 1, "records": 3},
    ]


def test_prosecutor_risk_and_records_at_risk(small):
    r = reidentification_risk(small, quasi_identifiers=["A"], thresholds=(0.5, 0.34, 0.2))
    d = r.to_dict()
    assert d["prosecutor_risk"] == {"max": 1.0, "mean": 0.5}  # 4 classes / 8 rows
    # Risks per record: a 1/3 (x3), b 1/2 (x2), c 1, missing 1/2 (x2).
    assert d["records_at_risk"] == {
        "0.5": {"count": 1, "share": 1 / 8},
        "0.34": {"count": 5, "share": 5 / 8},
        "0.2": {"count": 8, "share": 1.0},
    }
    assert d["marketer_risk"] == 0.5
    risk = record_risk(small, quasi_identifiers=["A"])
    assert risk.tolist() == [1 / 3] * 3 + [0.5, 0.5, 1.0, 0.5, 0.5]


def test_journalist_and_marketer_risk_with_a_population_table():
    sample = pd.DataFrame({"Q": ["a", "a", "b"]})
    population = pd.DataFrame({"Q": ["a"] * 4 + ["b"] * 2 + ["c"] * 5})
    r = reidentification_risk(sample, quasi_identifiers=["Q"], population=population)
    assert r.journalist_max == 0.5  # class b has 2 people in the population
    assert r.marketer == pytest.approx((2 / 4 + 1 / 2) / 3)
    assert r.prosecutor_max == 1.0


def test_delta_disclosure_by_hand():
    # p(x) = p(y) = 1/2; class g1 has x 2/3, y 1/3: |log2(2/3 / 1/2)| = log2 1.5 is the largest.
    df = pd.DataFrame({"G": ["g1"] * 3 + ["g2"] * 3, "S": list("xxyxyy")})
    ld = l_diversity(df, quasi_identifiers=["G"], sensitive="S")
    assert ld.delta_disclosure == pytest.approx(math.log2(1.5))
    assert ld.delta_disclosure_all_values == ld.delta_disclosure
    # Over the values a class holds: p(y) = 1/4 in the table, 1/2 in g2 -> log2 2 = 1.
    df2 = pd.DataFrame({"G": ["g1", "g1", "g2", "g2"], "S": list("xxxy")})
    ld2 = l_diversity(df2, quasi_identifiers=["G"], sensitive="S")
    assert ld2.delta_disclosure == pytest.approx(1.0)
    # Counting the values a class lacks, g1 reveals "not y": no finite δ.
    assert ld2.delta_disclosure_all_values == math.inf
    assert ld2.to_dict()["delta_disclosure_all_values"] is None


def test_delta_disclosure_model_is_strict_and_agrees_with_the_figure():
    from anonweb.core.models import DeltaDisclosure, class_data

    df = pd.DataFrame({"G": ["g1", "g1", "g2", "g2"], "S": list("xxxy")})
    data = class_data(df, quasi_identifiers=["G"], sensitive=["S"])
    reported = l_diversity(df, quasi_identifiers=["G"], sensitive="S").delta_disclosure
    assert reported == pytest.approx(1.0)
    # |log2 p(s|c)/p(s)| < δ: a class exactly at δ = 1 fails, just above passes
    assert not DeltaDisclosure("S", 1.0).check(data).satisfied
    assert DeltaDisclosure("S", 1.0 + 1e-9).check(data).satisfied
    assert DeltaDisclosure("S", 1.0).check(data).value == pytest.approx(reported)


def test_recursive_cl_diversity_by_hand():
    # One class, value counts r = 5, 3, 1, 1 (sum 10).
    # c=2: l=2 needs 5 < 2*(3+1+1)=10 yes; l=3 needs 5 < 2*(1+1)=4 no  -> l = 2.
    # c=3: l=3 needs 5 < 3*2=6 yes; l=4 needs 5 < 3*1 no               -> l = 3.
    df = pd.DataFrame({"G": ["g"] * 10, "S": list("aaaaabbbcd")})
    assert l_diversity(df, quasi_identifiers=["G"], sensitive="S", recursive_c=2).l_recursive == 2
    ld = l_diversity(df, quasi_identifiers=["G"], sensitive="S", recursive_c=3)
    assert ld.l_recursive == 3
    assert ld.satisfies_recursive(c=3, l=3)
    assert not ld.satisfies_recursive(c=2, l=3)
    assert not ld.satisfies_recursive(c=3, l=4)
    assert ld.l_distinct == 4


def test_entropy_l_is_not_floored():
    # One class with shares 0.6, 0.2, 0.2: exp(H) = 2.586..., pycanon would report 2.
    df = pd.DataFrame({"G": ["g"] * 5, "S": list("aaabc")})
    expected = math.exp(-(0.6 * math.log(0.6) + 2 * 0.2 * math.log(0.2)))
    assert l_diversity(df, quasi_identifiers=["G"], sensitive="S").l_entropy == pytest.approx(
        expected
    )


def test_missing_sensitive_value_counts_as_a_value():
    df = pd.DataFrame({"G": ["g", "g", "h", "h"], "S": ["x", NAN, "x", "x"]})
    ld = l_diversity(df, quasi_identifiers=["G"], sensitive="S")
    assert ld.per_class()["l_distinct"] == [2, 1]
    assert ld.homogeneous_classes == 1


def test_equal_distance_by_hand():
    df = pd.DataFrame({"G": ["g1"] * 3 + ["g2"] * 3, "S": list("xxyxyy")})
    # Table (1/2, 1/2), class g1 (2/3, 1/3): 1/2 * (1/6 + 1/6) = 1/6.
    assert t_closeness(df, quasi_identifiers=["G"], sensitive="S").t == pytest.approx(1 / 6)


def test_linkage_with_known_columns():
    df = pd.DataFrame({"Z": ["z1", "z1", "z2", "z3", "z3", "z3"], "S": range(6)})
    h = linkage_histogram(df, known=["Z"])
    assert h.histogram == ((1, 1), (2, 2), (3, 3))
    assert h.singled_out == 1


def test_linkage_with_an_auxiliary_table():
    df = pd.DataFrame({"Z": ["z1", "z1", "z2", "z3", "z3", "z3"], "S": range(6)})
    aux = pd.DataFrame({"Z": ["z1", "z2", "z4", "z3", None], "name": list("PQRST")})
    d = linkage_histogram(df, aux=aux).to_dict()
    assert d["columns"] == ["Z"]
    assert d["histogram"] == [
        {"candidates": 0, "records": 2},
        {"candidates": 1, "records": 1},
        {"candidates": 2, "records": 1},
        {"candidates": 3, "records": 1},
    ]
    assert (d["singled_out"], d["unmatched"], d["targets"]) == (1, 2, 5)


def test_linkage_matches_integers_and_text():
    df = pd.DataFrame({"zip": [47677, 47677, 47602]})
    aux = pd.DataFrame({"zip": ["47602", "47677"]})
    assert linkage_histogram(df, aux=aux).histogram == ((1, 1), (2, 1))


# -- The t-closeness paper (Li, Li, Venkatasubramanian 2007), Tables 3-5 ------------------------


@pytest.fixture(scope="module")
def paper(fixtures_dir):
    df = read_table(fixtures_dir / "test2.csv")
    h = {
        c: read_hierarchy(fixtures_dir / f"test2_hierarchy_{c}.csv", attribute=c)
        for c in ("ZIPCode", "Age", "Disease")
    }

    def generalize(zip_level, age_level):
        out = df.copy()
        out["ZIPCode"] = h["ZIPCode"].generalize(df["ZIPCode"], zip_level)
        out["Age"] = h["Age"].generalize(df["Age"], age_level)
        return out

    return generalize, h["Disease"]


@pytest.mark.parametrize(
    ("levels", "salary_ordered", "disease_equal", "disease_hier"),
    [((2, 1), 0.375, 0.4444, None), ((1, 2), 0.1667, 0.5556, 0.2963)],
    ids=["table4", "table5"],
)
def test_t_closeness_paper_tables(paper, levels, salary_ordered, disease_equal, disease_hier):
    generalize, disease_h = paper
    table = generalize(*levels)
    q = ["ZIPCode", "Age"]
    hier = {"Disease": disease_h} if disease_hier is not None else None
    p = assess_risk(table, quasi_identifiers=q, sensitive=["Salary", "Disease"], hierarchies=hier)
    s = p.to_dict()["sensitive"]
    assert s["Salary"]["t_distance"] == "ordered"
    assert s["Salary"]["t_closeness"] == pytest.approx(salary_ordered, abs=1e-4)
    eq = t_closeness(table, quasi_identifiers=q, sensitive="Disease", distance="equal")
    assert eq.t == pytest.approx(disease_equal, abs=1e-4)
    if disease_hier is not None:
        assert s["Disease"]["t_distance"] == "hierarchical"
        assert s["Disease"]["t_closeness"] == pytest.approx(disease_hier, abs=1e-4)
    else:
        assert s["Disease"]["t_distance"] == "equal"
    assert p.k == 3


def test_hierarchical_distance_needs_full_coverage(paper, fixtures_dir):
    generalize, _ = paper
    wrong = read_hierarchy(fixtures_dir / "test2_hierarchy_Age.csv", attribute="Disease")
    with pytest.raises(HierarchyError, match="does not cover 6 value"):
        t_closeness(
            generalize(1, 2), quasi_identifiers=["ZIPCode"], sensitive="Disease", hierarchy=wrong
        )


# -- Seed 000, Figures 7 and 8: 3-anonymous but homogeneous, then 3-diverse ---------------------


def test_figure7_leaks_low_iq_for_the_50s_with_three_limbs(fixtures_dir):
    df = read_table(fixtures_dir / "seed000_figure7.csv")
    ld = l_diversity(df, quasi_identifiers=["Age", "Limbs"], sensitive="IQ")
    assert ld.l_distinct == 1
    assert ld.l_entropy == pytest.approx(1.0)
    assert ld.homogeneous(df) == [
        {"quasi_identifiers": {"Age": 50, "Limbs": 3}, "size": 3, "value": "Low"}
    ]
    # Ordered t for Mobility over 23 < 34 < 41 < 46 < 52 (table share 1/5 each). Class (40,4)
    # holds 23 and 46: cumulative differences .3 .1 -.1 .2 0 -> 0.7 / (5 - 1) = 0.175.
    p = assess_risk(df, quasi_identifiers=["Age", "Limbs"], sensitive=["IQ", "Mobility"])
    assert p.to_dict()["sensitive"]["Mobility"]["t_closeness"] == pytest.approx(0.175)
    assert p.to_dict()["sensitive"]["IQ"]["disclosing_classes"] == ld.homogeneous(df)
    assert k_anonymity(df, quasi_identifiers=["Age", "Limbs"]).to_dict()["class_sizes"] == [
        {"size": 2, "classes": 1, "records": 2},
        {"size": 3, "classes": 1, "records": 3},
    ]


def test_figure8_is_3_diverse(fixtures_dir):
    df = read_table(fixtures_dir / "seed000_figure8.csv")
    p = assess_risk(df, quasi_identifiers=["Age", "Limbs"], sensitive=["IQ", "Mobility"])
    iq = p.to_dict()["sensitive"]["IQ"]
    assert (p.k, iq["l_distinct"], iq["homogeneous_classes"]) == (5, 3, 0)
    assert iq["l_entropy"] == pytest.approx(math.exp(-(0.6 * math.log(0.6) + 0.4 * math.log(0.2))))
    assert iq["l_recursive"] == 2  # counts 3,1,1: 3 < 2*(1+1) fails at l=3
    # One class = the whole table: its distributions equal the table's.
    assert p.to_dict()["sensitive"]["Mobility"]["t_closeness"] == pytest.approx(0.0)


# -- Validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"quasi_identifiers": []}, ParameterError, "no quasi-identifier"),
        ({"quasi_identifiers": ["nope"]}, DataError, "unknown quasi-identifier: nope"),
        ({"quasi_identifiers": ["A"], "sensitive": ["A"]}, ParameterError, "both"),
        ({"quasi_identifiers": ["A"], "sensitive": ["zz"]}, DataError, "sensitive attribute: zz"),
        (
            {"quasi_identifiers": ["A"], "sensitive": ["S"], "t_distance": "manhattan"},
            ParameterError,
            "unknown t-closeness distance",
        ),
        (
            {"quasi_identifiers": ["A"], "sensitive": ["S"], "t_distance": "hierarchical"},
            ParameterError,
            "needs a hierarchy",
        ),
        ({"quasi_identifiers": ["A"], "thresholds": [1.5]}, ParameterError, "outside 0..1"),
        ({"quasi_identifiers": ["A"], "population_size": 3}, ParameterError, "smaller than"),
    ],
)
def test_bad_parameters_are_named(small, kwargs, error, match):
    with pytest.raises(error, match=match):
        assess_risk(small, **kwargs)
    assert issubclass(error, CoreError)


def test_empty_table_is_rejected():
    with pytest.raises(DataError, match="no rows"):
        equivalence_classes(pd.DataFrame({"A": []}), quasi_identifiers=["A"])


def test_columns_that_are_not_text():
    df = pd.DataFrame({0: [1, 1, 2], 1: ["a", "b", "a"]})
    d = assess_risk(df, quasi_identifiers=[0], sensitive=[1]).to_dict()
    assert d["k"] == 1 and d["sensitive"]["1"]["l_distinct"] == 1
    with pytest.raises(DataError, match="unknown quasi-identifier: 5"):
        assess_risk(df, quasi_identifiers=[0, 5])
