"""Ceilings on sdcMicro's global and household risk (anonweb.core.models.survey_risk) as team
policy thresholds of the release gate: hand-worked figures, the gate's findings, and what
cannot be judged."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from anonweb.core.errors import ParameterError
from anonweb.core.models import class_data, model_from_dict
from anonweb.core.models.survey_risk import GlobalRisk, HouseholdRiskCeiling
from anonweb.core.release.plan import plan_from_dict
from anonweb.core.release.policy import PolicyThresholds, evaluate_release, policy_spec_check
from anonweb.core.search.flash import optimal_generalization

# keys: a (f=1, F=2), b (f=1, F=2), c (f=2, F=4); p = f/F = 1/2 everywhere
#   f = 1: p/(1-p) * ln(1/p) = ln 2 = 0.6931;  f = 2: p/(1-p) - (p/(1-p))^2 ln(1/p) = 1 - ln 2
#   global risk = (2 ln 2 + 2 (1 - ln 2)) / 4 = 1/2 exactly
#   households {a, c} and {b, c}: 1 - (1 - ln 2)(1 - (1 - ln 2)) = 1 - (1 - ln 2) ln 2 = 0.7873
TABLE = pd.DataFrame(
    {
        "key": ["a", "b", "c", "c"],
        "w": [2.0, 2.0, 2.0, 2.0],
        "hh": ["h1", "h2", "h1", "h2"],
    }
)
LN2 = math.log(2)
HOUSEHOLD = 1 - (1 - LN2) * LN2


def _data(df=TABLE):
    return class_data(df, quasi_identifiers=["key"])


def test_global_risk_by_hand():
    assert GlobalRisk(0.5, "w").table_value(_data()) == pytest.approx(0.5)
    assert GlobalRisk(0.5, "w").measure(_data()).tolist() == pytest.approx([LN2, LN2, 1 - LN2])
    # without weights each record stands for itself: 1/f, the mean is (1 + 1 + 1/2 + 1/2) / 4
    assert GlobalRisk(0.5).table_value(_data()) == pytest.approx(0.75)
    assert GlobalRisk(0.5, "w").check(_data()).satisfied
    assert not GlobalRisk(0.49, "w").check(_data()).satisfied


def test_household_risk_by_hand():
    model = HouseholdRiskCeiling(0.8, "hh", "w")
    assert model.table_value(_data()) == pytest.approx(HOUSEHOLD)
    assert model.check(_data()).satisfied
    assert not HouseholdRiskCeiling(0.78, "hh", "w").check(_data()).satisfied
    # unweighted: a = 1 already, so both households are re-identified for sure
    assert HouseholdRiskCeiling(0.8, "hh").table_value(_data()) == pytest.approx(1.0)


def _gate(models, released=TABLE):
    tags = {"key": "quasi_identifier", "w": "other", "hh": "other"}
    plan = plan_from_dict({"quasi_identifiers": ["key"], "steps": []})
    policy = PolicyThresholds(models=({"model": "k_anonymity", "k": 1}, *models))
    return evaluate_release(TABLE, released, plan=plan, tags=tags, thresholds=policy)


def test_the_gate_blocks_a_release_above_the_policys_global_or_household_risk():
    passing = _gate(
        [
            {"model": "global_risk", "max": 0.5, "weights": "w"},
            {"model": "household_risk", "max": 0.8, "household": "hh", "weights": "w"},
        ]
    )
    codes = {f.code for f in passing.findings}
    assert not codes & {"risk_global", "risk_household"}
    assert passing.risk["global"] == pytest.approx(0.5)
    assert passing.risk["household"] == pytest.approx(HOUSEHOLD)
    failing = _gate(
        [
            {"model": "global_risk", "max": 0.4, "weights": "w"},
            {"model": "household_risk", "max": 0.7, "household": "hh", "weights": "w"},
        ]
    )
    blocking = {f.code: f for f in failing.findings if f.severity == "block"}
    assert {"risk_global", "risk_household"} <= set(blocking)
    assert "0.5" in blocking["risk_global"].message


def test_a_release_without_the_weight_column_cannot_pass_the_threshold():
    gate = _gate(
        [{"model": "global_risk", "max": 0.9, "weights": "w"}], released=TABLE.drop(columns="w")
    )
    finding = next(f for f in gate.findings if f.code == "risk_global")
    assert finding.severity == "block" and "cannot be judged" in finding.message


def test_policy_specs_are_checked_and_population_models_refused():
    assert policy_spec_check({"model": "global_risk", "max": 0.05})
    with pytest.raises(ParameterError):
        policy_spec_check({"model": "global_risk", "max": 1.5})
    with pytest.raises(ParameterError, match="household"):
        model_from_dict({"model": "household_risk", "max": 0.1})
    with pytest.raises(ParameterError, match="population table"):
        policy_spec_check({"model": "delta_presence", "min": 0.0, "max": 0.5})


def test_the_search_refuses_the_household_ceiling_with_a_reason():
    from anonweb.core.io.hierarchy import Hierarchy

    key = Hierarchy((("a", "*"), ("b", "*"), ("c", "*")), "key")
    with pytest.raises(ParameterError, match="judged on a table's records"):
        optimal_generalization(
            TABLE,
            quasi_identifiers=["key"],
            hierarchies={"key": key},
            models=[HouseholdRiskCeiling(0.9, "hh")],
        )
    # the unweighted global risk is a function of the class sizes: the search can use it
    found = optimal_generalization(
        TABLE, quasi_identifiers=["key"], hierarchies={"key": key}, models=[GlobalRisk(0.5)]
    )
    assert found.levels == {"key": 1}  # 0.75 at level 0, 1/4 at the root
    assert np.isclose(GlobalRisk(0.5).table_value(_data(TABLE.assign(key="*"))), 0.25)
