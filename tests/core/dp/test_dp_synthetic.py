"""DP synthetic microdata: costs the histogram's ε, keeps marginals, and is deniable."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from anonweb.core.dp.accounting import epsilon_of
from anonweb.core.dp.mechanisms import prepare
from anonweb.core.dp.synthetic import SyntheticSpec, dp_synthetic, utility_report
from anonweb.core.errors import DataError, ParameterError
from anonweb.core.risk.intruder import intruder_check


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    rng = np.random.default_rng(0)
    n = 2000
    age = rng.normal(45, 12, n).clip(18, 90)
    return pd.DataFrame(
        {
            "age": age,
            "income": 20 + 0.8 * age + rng.normal(0, 8, n),
            "sex": rng.choice(["F", "M"], n),
            "region": rng.choice(list("NSEW"), n, p=[0.4, 0.3, 0.2, 0.1]),
        }
    )


PARAMS = {
    "columns": ["age", "income", "sex", "region"],
    "epsilon": 2.0,
    "categories": {"sex": ["F", "M"], "region": list("NSEW")},
    "bounds": {"age": [18, 90], "income": [0, 150]},
    "bins": 8,
}


def test_cost_is_the_histogram_map_and_sampling_adds_nothing(table):
    spec = SyntheticSpec.from_params(PARAMS)
    prepared = prepare(spec.query())
    result = dp_synthetic(table, spec, rng=np.random.default_rng(1))
    assert result.report["epsilon_spent"] == epsilon_of(prepared.measurement, 1)[0] == 2.0
    assert result.report["delta_spent"] == 0.0
    assert "seed" not in str(result.report)


def test_marginals_and_association_survive(table):
    spec = SyntheticSpec.from_params(PARAMS)
    result = dp_synthetic(table, spec, rng=np.random.default_rng(2))
    # The owner's comparison with the original is computed apart: it is not DP, so the step's
    # own report does not carry it (only the sample's distance to the noisy table).
    assert "utility" not in result.report
    assert result.report["sampling_tv"]["max"] < 0.05
    utility = utility_report(table, result.frame, spec)
    assert utility["max_marginal_tv"] < 0.08
    assert utility["correlation"]["age|income"]["synthetic"] > 0.3
    frame = result.frame
    assert list(frame.columns) == PARAMS["columns"]
    assert frame["age"].dropna().between(18, 90).all() and set(frame["sex"].dropna()) <= {"F", "M"}
    assert abs(len(frame) - len(table)) < 200


def test_requested_row_count_and_no_input_mutation(table):
    before = table.copy()
    result = dp_synthetic(
        table, SyntheticSpec.from_params({**PARAMS, "n_rows": 500}), rng=np.random.default_rng(3)
    )
    assert len(result.frame) == 500
    pd.testing.assert_frame_equal(table, before)


def test_synthetic_records_are_deniable_to_the_maximum_knowledge_intruder(table):
    spec = SyntheticSpec.from_params(
        {
            "columns": ["age", "income"],
            "epsilon": 1.0,
            "bounds": PARAMS["bounds"],
            "bins": 12,
            "n_rows": len(table),
        }
    )
    synthetic = dp_synthetic(table, spec, rng=np.random.default_rng(4)).frame
    check = intruder_check(
        table, synthetic, columns=["age", "income"], rng=np.random.default_rng(5)
    )
    assert check.not_deniable_share < 0.08


@pytest.mark.parametrize(
    "params",
    [
        {**PARAMS, "epsilon": 0},
        {**PARAMS, "bounds": {"age": [18, 90]}},
        {**PARAMS, "columns": []},
        {**PARAMS, "n_rows": -3},
        {**PARAMS, "bounds": {"age": [90, 18], "income": [0, 1]}},
    ],
)
def test_bad_parameters_are_refused(params):
    with pytest.raises(ParameterError):
        SyntheticSpec.from_params(params)


def test_a_category_outside_the_declared_set_is_refused(table):
    spec = SyntheticSpec.from_params(
        {**PARAMS, "categories": {"sex": ["F"], "region": list("NSEW")}}
    )
    with pytest.raises(DataError):
        dp_synthetic(table, spec, rng=np.random.default_rng(6))


def test_plan_step_reports_the_same_cost(table):
    from anonweb.core.release.plan import get_step
    from anonweb.core.release.steps import StepContext

    spec = get_step("dp_synthetic")
    assert spec.privacy_cost(PARAMS) == {"epsilon": 2.0, "delta": 0.0}
    outcome = spec.func(table, PARAMS, StepContext(rng=np.random.default_rng(7)))
    assert outcome.report["kind"] == "dp_synthetic"


def test_missing_values_need_an_explicit_missing_category(table):
    holed = table.copy()
    holed.loc[0, "sex"] = None
    with pytest.raises(DataError, match="missing values"):
        dp_synthetic(holed, SyntheticSpec.from_params(PARAMS), rng=np.random.default_rng(8))
    spec = SyntheticSpec.from_params({**PARAMS, "count_missing": True})
    assert spec.query().count_missing
    assert len(dp_synthetic(holed, spec, rng=np.random.default_rng(9)).frame) > 0


def test_more_rows_than_the_step_may_draw_are_refused_before_drawing():
    """The schema allowed 100,000,000 rows, which took the worker past 7 GB; the limit is
    stated in the schema, the spec and the message."""
    from anonweb.core.dp.synthetic import MAX_ROWS, SYNTHETIC_SCHEMA
    from anonweb.core.schema import check

    assert SYNTHETIC_SCHEMA["properties"]["n_rows"]["maximum"] == MAX_ROWS == 10_000_000
    assert check(SYNTHETIC_SCHEMA, {**PARAMS, "n_rows": 100_000_000})
    with pytest.raises(ParameterError, match="at most 10,000,000 rows"):
        SyntheticSpec.from_params({**PARAMS, "n_rows": 100_000_000})
    assert SyntheticSpec.from_params({**PARAMS, "n_rows": MAX_ROWS}).n_rows == MAX_ROWS


def test_a_noisy_total_past_the_limit_is_refused_not_drawn(table):
    """Without n_rows the sample is as large as the noisy total; at a tiny ε the noise makes it
    tens of millions of rows. OpenDP draws the noise itself, so its sign is random: a positive
    total comes within a few tries (all of 40 negative: 1 in 10^12)."""
    spec = SyntheticSpec.from_params({**PARAMS, "epsilon": 1e-6})
    for attempt in range(40):
        try:
            result = dp_synthetic(table, spec, rng=np.random.default_rng(attempt))
        except ParameterError as exc:
            assert re.search(r"noisy total is [\d,]+ rows.*set n_rows", str(exc)), exc
            break
        assert result.report["rows_out"] <= 10_000_000
    else:
        pytest.fail("no noisy total was over the limit in 40 tries")
