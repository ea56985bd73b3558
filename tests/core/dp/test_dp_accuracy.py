"""Each DP statistic states one 95% interval, and it holds the truth in about 95% of runs.

Repeated releases of the same table: the share of runs whose interval covers the exact figure
must lie between 93% and 97% (issue 20.6: the range bars claimed ±43.8 where the 95% error was
±11.2, and covered every run). The exact figures come from the source, binned as the mechanism
bins it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from anonweb.core.dp.mechanisms import DPQuery, prepare, release
from anonweb.core.release.plan import plan_from_dict
from anonweb.core.utility.dp import dp_statistics

RUNS = 400
BAND = (0.93, 0.97)


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    n = 1000
    return pd.DataFrame(
        {
            "age": rng.uniform(0, 100, n).round(1),
            "score": np.clip(rng.normal(40, 15, n), 0, 100),
            "city": rng.choice([f"c{i}" for i in range(20)], n),
        }
    )


def _coverage(table: pd.DataFrame, params: dict, runs: int = RUNS) -> tuple[float, int]:
    """Share of (run, statistic) pairs whose stated interval holds the exact figure, read the
    way the utility table reads them."""
    plan = plan_from_dict({"version": 1, "steps": [{"kind": "dp_release", "params": params}]})
    query = DPQuery.from_params(params)
    rng = np.random.default_rng(0)
    hits = checked = 0
    exact: dict[str, float] = {}
    for run in range(runs):
        out = release(table, query, rng=rng)
        entry = {"step": 1, **out.report}
        source = table if run == 0 else None  # the exact figures do not change between runs
        for stat in dp_statistics([entry], out.table, source=source, plan=plan):
            if run == 0:
                assert stat.exact is not None, stat
                exact[stat.label] = stat.exact
            assert stat.halfwidth is not None, stat
            hits += abs(stat.value - exact[stat.label]) <= stat.halfwidth
            checked += 1
    return hits / checked, checked


CATEGORIES = {"city": [f"c{i}" for i in range(20)]}


@pytest.mark.slow
@pytest.mark.parametrize(
    "params",
    [
        # ε = 0.4: OpenDP's discrete accuracy covers 95.1% (at ε = 1 the nearest integers
        # give 92.7% or 97.3%, and OpenDP takes the safe one)
        {"kind": "count", "epsilon": 0.4},
        {"kind": "histogram", "epsilon": 0.4, "columns": ["city"], "categories": CATEGORIES},
        {"kind": "sum", "epsilon": 1.0, "columns": ["age"], "bounds": [0, 100]},
        {"kind": "mean", "epsilon": 0.5, "columns": ["age"], "bounds": [0, 100]},
        {"kind": "range", "epsilon": 1.0, "columns": ["age"], "bounds": [0, 100], "bins": 16},
        {"kind": "range", "epsilon": 1.0, "columns": ["age"], "bounds": [0, 100], "bins": 32},
        {"kind": "range", "epsilon": 0.5, "columns": ["age"], "bounds": [0, 100], "bins": 10},
        # quantiles as the public bins read them (linear within a bin), at three levels
        {
            "kind": "quantile",
            "epsilon": 1.0,
            "columns": ["age"],
            "bounds": [0, 100],
            "bins": 16,
            "alphas": [0.25, 0.5, 0.75],
        },
        {
            "kind": "quantile",
            "epsilon": 1.0,
            "columns": ["score"],
            "bounds": [0, 100],
            "bins": 32,
            "alphas": [0.25, 0.5, 0.75],
        },
    ],
    ids=lambda p: f"{p['kind']}-{p.get('bins', '')}",
)
def test_every_stated_interval_covers_about_95_percent_of_runs(table, params):
    # one figure per run (a count, a sum, a mean) or three correlated ones (quantiles): more
    # runs keep the share's own spread (about ±0.5%) well inside the band
    runs = {"count": 2000, "sum": 2000, "mean": 2000, "quantile": 1000}.get(params["kind"], RUNS)
    share, checked = _coverage(table, params, runs)
    assert BAND[0] <= share <= BAND[1], (share, checked)


def test_range_bars_state_the_error_of_a_bin_not_a_sum_of_tree_nodes():
    """16 bins at ε = 1: each node has noise of scale 5 (±15.5 at 95%); after the consistency
    step a bin's count is within ±11.4, a cumulative count within ±6 to ±15, not ±43.8."""
    query = DPQuery.from_params(
        {"kind": "range", "epsilon": 1.0, "columns": ["age"], "bounds": [0, 100], "bins": 16}
    )
    preview = prepare(query).preview()
    assert preview["ci95_halfwidth"] == pytest.approx(11.4, abs=0.3)
    cumulative = preview["cumulative_ci95_halfwidth"]
    assert len(cumulative) == 16 and max(cumulative) < 16
    # the last cumulative count is the total: read off the root and its children
    assert cumulative[-1] < cumulative[len(cumulative) // 2 - 2]


def test_the_stated_accuracy_is_the_same_number_every_time():
    params = {"kind": "range", "epsilon": 0.7, "columns": ["age"], "bounds": [0, 100]}
    first = prepare(DPQuery.from_params(params)).preview()
    again = prepare(DPQuery.from_params(params)).preview()
    assert first["ci95_halfwidth"] == again["ci95_halfwidth"]
    assert first["cumulative_ci95_halfwidth"] == again["cumulative_ci95_halfwidth"]


@pytest.mark.slow
def test_local_dp_estimates_state_an_interval_that_covers_about_95_percent_of_runs(table):
    """Randomized response's debiased counts: the interval of each, from its own variance (the
    worst case over categories covered far more than 95% for a rare category)."""
    from anonweb.core.dp.local import randomize_categories

    cats = [f"c{i}" for i in range(20)]
    rows = table.head(500)
    rows = rows.assign(city=np.where(np.arange(len(rows)) < 300, "c0", rows["city"]))
    truth = rows["city"].value_counts()
    hits = checked = 0
    for _ in range(100):
        report = randomize_categories(rows, column="city", epsilon=2.0, categories=cats).report
        for c in cats:
            half = report["estimate_ci95_halfwidth"][c]
            hits += abs(report["estimated_counts"][c] - truth.get(c, 0)) <= half
            checked += 1
    assert BAND[0] <= hits / checked <= BAND[1], (hits / checked, checked)
