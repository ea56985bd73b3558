"""Each released DP statistic is a chart with its 95% interval, drawn from the released table and
the step's own report only."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from anonweb.core.dp.charts import dp_charts
from anonweb.core.release.plan import plan_from_dict
from anonweb.core.release.run import apply_plan


@pytest.fixture(scope="module")
def released():
    rng = np.random.default_rng(5)
    n = 3000
    df = pd.DataFrame(
        {
            "age": rng.integers(18, 90, n),
            "city": rng.choice(["a", "b", "c"], n),
            "sex": rng.choice(["F", "M"], n),
        }
    )
    bounds = {"bounds": [0, 100]}
    steps = [
        {
            "kind": "histogram",
            "epsilon": 1.0,
            "columns": ["sex"],
            "categories": {"sex": ["F", "M"]},
        },
        {"kind": "histogram", "epsilon": 1.0, "columns": ["city"], "delta": 1e-6},
        {"kind": "range", "epsilon": 1.0, "columns": ["age"], "bins": 10, **bounds},
        {"kind": "count", "epsilon": 1.0},
        {"kind": "sum", "epsilon": 1.0, "columns": ["age"], **bounds},
        {"kind": "mean", "epsilon": 1.0, "columns": ["age"], **bounds},
        {"kind": "quantile", "epsilon": 1.0, "columns": ["age"], "alphas": [0.5], **bounds},
    ]
    plan = plan_from_dict(
        {"version": 1, "steps": [{"kind": "dp_release", "params": p} for p in steps]}
    )
    table, report = apply_plan(df, plan, rng=np.random.default_rng(0), measure_risk=False)
    return table, report.to_dict()["steps"]


def test_one_chart_per_statistic_with_its_interval(released):
    table, steps = released
    charts = {c["id"]: c["figure"] for c in dp_charts(steps, table)}
    assert sorted(charts) == [f"chart-dp-step-{i}" for i in range(1, 8)]
    sex = charts["chart-dp-step-1"]["data"][0]
    assert sex["x"] == ["F", "M", "(missing)"]  # the declared cells, missing included
    assert sex["error_y"]["value"] == pytest.approx(steps[0]["ci95_halfwidth"])
    assert sex["error_y"]["visible"] is True
    assert list(sex["y"]) == list(
        table.loc[table["statistic"].str.startswith("1: "), "noisy_count"]
    )
    city = charts["chart-dp-step-2"]
    assert "keys below the threshold are not released" in city["layout"]["title"]["text"]
    age = charts["chart-dp-step-3"]["data"][0]
    assert age["x"][0] == "[0, 10)" and age["x"][-1] == "[90, 100]"  # public bin edges
    assert age["error_y"]["value"] == pytest.approx(steps[2]["ci95_halfwidth"])
    for i, key in ((4, "ci95_halfwidth"), (5, "ci95_halfwidth"), (6, "mean_ci95_halfwidth_approx")):
        bar = charts[f"chart-dp-step-{i}"]["data"][0]
        assert (
            bar["error_y"]["value"] == pytest.approx(steps[i - 1][key])
            and bar["error_y"]["value"] > 0
        )
    quantile = charts["chart-dp-step-7"]["data"][0]
    ((low, high),) = steps[6]["quantile_ci95"]
    (median,) = quantile["y"]
    assert quantile["error_y"]["arrayminus"] == [pytest.approx(median - low)]
    assert quantile["error_y"]["array"] == [pytest.approx(high - median)]


def test_a_local_dp_step_charts_its_debiased_counts():
    df = pd.DataFrame({"c": ["x"] * 300 + ["y"] * 100})
    params = {"column": "c", "epsilon": 1.0, "categories": ["x", "y"]}
    plan = plan_from_dict(
        {"version": 1, "steps": [{"kind": "ldp_randomized_response", "params": params}]}
    )
    _, report = apply_plan(df, plan, rng=np.random.default_rng(0), measure_risk=False)
    steps = report.to_dict()["steps"]
    (chart,) = dp_charts(steps, None)
    bar = chart["figure"]["data"][0]
    assert bar["x"] == ["x", "y"]
    halves = steps[0]["estimate_ci95_halfwidth"]
    assert bar["error_y"]["array"] == [pytest.approx(halves["x"]), pytest.approx(halves["y"])]


def test_record_level_steps_have_no_dp_chart():
    steps = [{"step": 1, "kind": "drop", "dropped": ["name"]}]
    assert dp_charts(steps, pd.DataFrame({"a": [1]})) == []
