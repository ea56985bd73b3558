"""Agreement with pycanon 1.3.6 on the reference datasets, and the cases where pycanon is wrong.

pycanon's known defects (shared/datasets/README.md): it groups with ``dropna=True``, mixes
positional and label indexing, fails on missing sensitive values, floors entropy l, and averages
the re-identification risk over classes instead of records. Each has a test below that shows
the correct value and why.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pandas as pd
import pytest

from anonweb.core.assessment.profile import assess_risk
from anonweb.core.io.frame import read_table

pycanon = pytest.importorskip("pycanon")
from pycanon import anonymity as pc  # noqa: E402
from pycanon import metrics as pcm  # noqa: E402

pytestmark = pytest.mark.shared_data

CASES = {
    "drug_type": ("pycanon/raw/drug_type.csv", ["Age", "Sex", "BP", "Cholesterol"], "Drug"),
    "drugs_k5": (
        "pycanon/raw/drugs_k5.csv",
        ["Age", "Sex", "BP", "Cholesterol", "Na_to_K"],
        "Drug",
    ),
    "adult_subset": ("arx/adult_subset.csv", ["sex", "race", "salary-class"], "occupation"),
    "stroke_k5_num": (
        "pycanon/processed/stroke_k5.csv",
        ["gender", "age", "hypertension", "heart_disease", "ever_married"],
        "avg_glucose_level",
    ),
}


def _pycanon(fn, *args):
    with warnings.catch_warnings():  # pycanon's own numpy warnings are not under test
        warnings.simplefilter("ignore")
        return fn(*args)


@pytest.fixture(scope="module")
def load(datasets_dir):
    def _load(name):
        path, q, s = CASES[name]
        return read_table(datasets_dir / path), q, s

    return _load


@pytest.mark.parametrize("name", list(CASES))
def test_same_values_as_pycanon(load, name):
    df, q, s = load(name)
    ours = assess_risk(df, quasi_identifiers=q, sensitive=[s]).to_dict()
    sa = ours["sensitive"][s]
    assert ours["k"] == _pycanon(pc.k_anonymity, df, q)
    assert sa["l_distinct"] == _pycanon(pc.l_diversity, df, q, [s])
    # pycanon floors entropy l; the unfloored value must floor to pycanon's.
    assert math.floor(sa["l_entropy"] + 1e-9) == _pycanon(pc.entropy_l_diversity, df, q, [s])
    assert sa["t_closeness"] == pytest.approx(_pycanon(pc.t_closeness, df, q, [s]), abs=1e-9)
    # pycanon takes the natural log over the values a class holds; the model (as ARX) log2
    assert sa["delta_disclosure"] * math.log(2) == pytest.approx(
        _pycanon(pc.delta_disclosure, df, q, [s]), abs=1e-9
    )
    assert ours["prosecutor_risk"]["max"] == pytest.approx(_pycanon(pcm.max_rir, df, q))


def test_missing_quasi_identifier_rows_are_kept(datasets_dir):
    # bmi is "N/A" in 201 stroke records. pycanon's groupby drops them: its classes cover 4,909
    # of 5,110 rows and the 201 people with no bmi vanish from the risk figures.
    df = read_table(datasets_dir / "pycanon/raw/healthcare-dataset-stroke-data.csv")
    missing = int(df["bmi"].isna().sum())
    assert missing == 201
    ours = assess_risk(df, quasi_identifiers=["bmi"])
    assert sum(d["records"] for d in ours.to_dict()["class_sizes"]) == len(df)
    sub = df[df["bmi"].isna() | (df["bmi"] > 45)].reset_index(drop=True)
    sub = pd.concat([sub[sub["bmi"].notna()], sub[sub["bmi"].isna()].head(1)], ignore_index=True)
    # One record without bmi: it is unique (k = 1); pycanon does not see it and reports more.
    theirs = _pycanon(pc.k_anonymity, sub, ["bmi"])
    ours_k = assess_risk(sub, quasi_identifiers=["bmi"]).k
    assert ours_k == 1
    grouped = sub.groupby(["bmi"]).size()  # pandas' default, as pycanon groups
    assert grouped.sum() == len(sub) - 1
    assert theirs == grouped.min() >= ours_k


def test_index_labels_do_not_matter(load):
    # pycanon takes group *labels* and reads them with iloc (positions). On a shuffled frame
    # that keeps its labels it reads the wrong rows: t drops from 0.67 to 0.44 on drugs_k5, a
    # table that is less safe than reported. Our figures equal those of the same rows indexed
    # 0..n-1, where pycanon is right.
    df, q, s = load("drugs_k5")
    shuffled = df.sample(frac=1.0, random_state=0)
    ours = assess_risk(shuffled, quasi_identifiers=q, sensitive=[s]).to_dict()["sensitive"][s]
    clean = shuffled.reset_index(drop=True)
    truth = _pycanon(pc.t_closeness, clean, q, [s])
    assert truth == pytest.approx(0.67)
    assert ours["t_closeness"] == pytest.approx(truth)
    assert ours["delta_disclosure"] * math.log(2) == pytest.approx(
        _pycanon(pc.delta_disclosure, clean, q, [s])
    )
    assert _pycanon(pc.t_closeness, shuffled, q, [s]) == pytest.approx(0.44)


def test_entropy_l_is_a_float(load):
    # drugs_k5: the least diverse class has entropy l between 1 and 2; pycanon reports int 1.
    df, q, s = load("drugs_k5")
    ours = assess_risk(df, quasi_identifiers=q, sensitive=[s]).to_dict()["sensitive"][s]
    floored = _pycanon(pc.entropy_l_diversity, df, q, [s])
    assert floored == math.floor(ours["l_entropy"])
    assert ours["l_entropy"] != floored  # the information pycanon throws away


def test_average_risk_is_over_records(load):
    # Mean prosecutor risk over records = classes / rows. pycanon averages 1/size over classes,
    # which counts a class of 1 and a class of 50 equally.
    df, q, _ = load("drugs_k5")
    ours = assess_risk(df, quasi_identifiers=q).to_dict()
    sizes = df.groupby(q, dropna=False).size().to_numpy()
    per_record = np.repeat(1.0 / sizes, sizes).mean()
    assert ours["prosecutor_risk"]["mean"] == pytest.approx(per_record)
    assert ours["prosecutor_risk"]["mean"] == pytest.approx(ours["classes"] / ours["rows"])
    theirs = _pycanon(pcm.average_rir, df, q)
    assert theirs == pytest.approx((1.0 / sizes).mean())
    assert theirs != pytest.approx(per_record)


def test_missing_sensitive_values_are_counted(datasets_dir):
    # pycanon cannot compute l for bmi (it has "N/A"s); here a missing bmi is a value of its own.
    df = read_table(datasets_dir / "pycanon/raw/healthcare-dataset-stroke-data.csv").head(400)
    q = ["gender", "hypertension", "heart_disease"]
    ours = assess_risk(df, quasi_identifiers=q, sensitive=["bmi"]).to_dict()["sensitive"]["bmi"]
    distinct = df.groupby(q, dropna=False)["bmi"].nunique(dropna=False).min()
    assert ours["l_distinct"] == distinct
    assert 0.0 <= ours["t_closeness"] <= 1.0
    assert ours["t_distance"] == "ordered"
