"""Risk after a release whose search suppresses records: one definition, the search's.

Fully suppressed records (``*`` in every quasi-identifier) are taken out of the evaluation, as
ARX does with the outliers it suppresses; the report states how many, and the release gate
reads the same figures."""

import numpy as np
import pandas as pd
import pytest

from anonweb.core.assessment.profile import assess_risk
from anonweb.core.errors import ParameterError
from anonweb.core.release.plan import plan_from_dict
from anonweb.core.release.policy import PolicyThresholds, evaluate_release
from anonweb.core.release.run import apply_plan
from anonweb.core.risk.classes import suppressed_records

AGES = {"rows": [[a, f"{a // 10 * 10}-{a // 10 * 10 + 9}", "*"] for a in (20, 21, 30, 31, 50)]}


def hand_plan(suppression: float) -> dict:
    return {
        "quasi_identifiers": ["age", "sex"],
        "sensitive": ["disease"],
        "hierarchies": {"age": AGES, "sex": {"rows": [["f", "*"], ["m", "*"]]}},
        "steps": [
            {"kind": "optimal_generalization", "params": {"k": 2, "suppression": suppression}}
        ],
    }


def hand_table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "age": [20, 21, 30, 31, 50],
            "sex": ["f", "f", "m", "m", "f"],
            "disease": ["flu", "hiv", "flu", "flu", "hiv"],
        }
    )


def test_hand_worked_release_reports_the_searchs_k_and_the_suppressed_records():
    # With 1 record of 5 allowed out (floor(0.2 * 5)), ages by decade give classes 20-29/f (2),
    # 30-39/m (2) and 50-59/f (1): the lone 50-59 record is suppressed and k is 2. Counted as a
    # class of its own, the suppressed record would make k 1.
    df = hand_table()
    out, report = apply_plan(df, plan_from_dict(hand_plan(0.2)), rng=np.random.default_rng(0))
    (step,) = report.steps
    assert step["levels"] == {"age": 1, "sex": 0} and step["suppressed"] == 1
    assert list(out["age"]) == ["20-29", "20-29", "30-39", "30-39", "*"]
    assert list(out["sex"]) == ["f", "f", "m", "m", "*"]
    after = report.risk_after
    assert after is not None
    assert (after["k"], after["classes"], after["suppressed"], after["rows"]) == (2, 2, 1, 4)
    assert after["k"] == step["k"] == 2
    assert after["prosecutor_risk"]["max"] == pytest.approx(0.5)
    # t-closeness keeps the whole table as reference: 3 flu, 2 hiv (0.6, 0.4). 20-29/f is half
    # and half (distance 0.1), 30-39/m all flu (0.4).
    assert after["sensitive"]["disease"]["t_closeness"] == pytest.approx(0.4)
    assert after["sensitive"]["disease"]["l_distinct"] == 1
    assert report.risk_before is not None and report.risk_before["suppressed"] == 0
    # the release gate measures the same: k 2, one record suppressed
    tags = {"age": "quasi_identifier", "sex": "quasi_identifier", "disease": "sensitive"}
    gate = evaluate_release(
        df,
        out,
        plan=hand_plan(0.2),
        tags=tags,
        thresholds=PolicyThresholds(k=2, l=1, t=0.5, max_prosecutor_risk=0.5),
    )
    assert (gate.risk["k"], gate.risk["suppressed"], gate.risk["classes"]) == (2, 1, 2)
    assert gate.risk["t"]["disease"] == pytest.approx(after["sensitive"]["disease"]["t_closeness"])
    assert gate.findings == ()


def test_without_suppression_nothing_is_left_out():
    df = hand_table()
    out, report = apply_plan(df, plan_from_dict(hand_plan(0.0)), rng=np.random.default_rng(0))
    (step,) = report.steps
    assert step["suppressed"] == 0
    assert report.risk_after is not None and report.risk_after["suppressed"] == 0
    assert report.risk_after["k"] == step["k"] >= 2
    assert report.risk_after["rows"] == len(df)


def test_every_record_at_the_root_is_one_class_not_suppression():
    df = pd.DataFrame({"a": ["*"] * 3, "b": ["*"] * 3})
    assert not suppressed_records(df, ["a", "b"]).any()
    df = pd.DataFrame({"a": ["*", "x", "x"], "b": ["*", "*", "y"]})
    assert suppressed_records(df, ["a", "b"]).tolist() == [True, False, False]
    assert suppressed_records(df, ["a"]).tolist() == [True, False, False]
    assert not suppressed_records(df, []).any()


def test_assess_risk_refuses_misaligned_exclusion():
    df = hand_table()
    with pytest.raises(ParameterError):
        assess_risk(df, quasi_identifiers=["age"], exclude=np.zeros(3, dtype=bool))


@pytest.mark.parametrize("seed", range(6))
def test_release_k_after_is_the_searchs_on_adult_like_tables(seed):
    rng = np.random.default_rng(seed)
    n = 300
    ages = rng.integers(17, 80, n)
    df = pd.DataFrame(
        {
            "age": ages,
            "zip": rng.choice(["53710", "53711", "53712", "53720", "53721", "60001"], n),
            "disease": rng.choice(["flu", "hiv", "cold", "asthma"], n),
        }
    )
    plan = {
        "quasi_identifiers": ["age", "zip"],
        "sensitive": ["disease"],
        "hierarchies": {
            "age": {"builder": "interval", "width": 5},
            "zip": {"builder": "mask"},
        },
        "steps": [
            {
                "kind": "optimal_generalization",
                "params": {
                    "k": 5,
                    "suppression": 0.1,
                    "models": [{"model": "distinct_l", "sensitive": "disease", "l": 2}],
                },
            }
        ],
    }
    out, report = apply_plan(df, plan_from_dict(plan), rng=np.random.default_rng(0))
    (step,) = report.steps
    after = report.risk_after
    assert after is not None
    assert after["k"] == step["k"] >= 5
    assert after["suppressed"] == step["suppressed"]
    assert after["rows"] + after["suppressed"] == n
    assert step["suppressed"] > 0  # the table is built to need some
    assert all(c["satisfied"] for c in step["model_checks"])
    assert after["sensitive"]["disease"]["l_distinct"] >= 2
    tags = {"age": "quasi_identifier", "zip": "quasi_identifier", "disease": "sensitive"}
    gate = evaluate_release(df, out, plan=plan, tags=tags)
    assert (gate.risk["k"], gate.risk["suppressed"]) == (after["k"], after["suppressed"])
