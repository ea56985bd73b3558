"""Marginal-based DP synthetic data (MST and the independent baseline): what it costs, what it
releases, how its quality is reported, and what is refused."""

from __future__ import annotations

import math

import numpy as np
import opendp.prelude as dp
import pandas as pd
import pytest

from anonweb.core.dp.synthetic import SyntheticSpec, dp_synthetic
from anonweb.core.errors import ParameterError
from anonweb.core.release.plan import get_step, plan_from_dict
from anonweb.core.release.report import published_report
from anonweb.core.release.run import apply_plan

dp.enable_features("contrib")

CATEGORIES = {"sex": ["F", "M"], "region": list("NSEW"), "sick": ["yes", "no"]}
PARAMS = {
    "columns": ["age", "income", "sex", "region", "sick"],
    "epsilon": 1.0,
    "delta": 1e-9,
    "categories": CATEGORIES,
    "bounds": {"age": [18, 90], "income": [0, 150]},
    "bins": {"age": 8, "income": [0, 40, 60, 80, 100, 150]},
}


def _table(n: int, seed: int) -> pd.DataFrame:
    """Columns tied in pairs (age→income, sex and age→sick): an independent model misses them."""
    rng = np.random.default_rng(seed)
    age = rng.normal(45, 12, n).clip(18, 90)
    sex = rng.choice(["F", "M"], n)
    return pd.DataFrame(
        {
            "age": age,
            "income": 20 + 0.8 * age + rng.normal(0, 8, n),
            "sex": sex,
            "region": rng.choice(list("NSEW"), n, p=[0.4, 0.3, 0.2, 0.1]),
            "sick": np.where((sex == "F") & (age > 50), "yes", "no"),
        }
    )


@pytest.fixture(scope="module")
def table() -> pd.DataFrame:
    return _table(4000, 0)


@pytest.fixture(scope="module")
def mst(table):
    """One MST release through the plan runner: its output and its internal report entry."""
    plan = plan_from_dict({"version": 1, "steps": [{"kind": "dp_synthetic", "params": PARAMS}]})
    seen: list[tuple[float, str]] = []
    out, report = apply_plan(
        table,
        plan,
        rng=np.random.default_rng(1),
        measure_risk=False,
        progress=lambda fraction, what: seen.append((fraction, what)),
    )
    PROGRESS[:] = seen
    return out, report, plan


PROGRESS: list[tuple[float, str]] = []


def test_a_job_s_progress_bar_follows_the_rounds_and_the_estimation(mst):
    fractions = [f for f, _ in PROGRESS]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    messages = [m for _, m in PROGRESS]
    assert [m for m in messages if "chosen" in m] == [
        f"step 1: pair {r} of 4 chosen" for r in range(1, 5)
    ]
    assert "step 1: estimating the model" in messages


def _opendp_charge(report, *, d_in: int, columns: int, delta: float) -> tuple[float, float]:
    """ρ and ε rebuilt from the scales the report states, with OpenDP's own constructors."""
    noise = report["noise"]
    ints = (dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int))
    one = dp.m.make_gaussian(*ints, scale=noise["one_way_scale"])
    rho = columns * one.map(d_in)
    if "selection_scale" in noise:
        rounds = columns - 1
        select = dp.m.make_noisy_max(
            dp.vector_domain(dp.atom_domain(T=float, nan=False)),
            dp.linf_distance(T=float, monotonic=False),
            dp.zero_concentrated_divergence(),
            scale=noise["selection_scale"],
        )
        two = dp.m.make_gaussian(*ints, scale=noise["two_way_scale"])
        rho += rounds * (select.map(float(d_in)) + two.map(d_in))
    gauss = dp.m.make_gaussian(
        dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=1.0
    )
    eps = dp.c.make_zCDP_to_approxDP(gauss).map(math.sqrt(2 * rho)).epsilon(delta)
    return rho, eps


def test_mst_charges_the_ledger_what_opendp_maps_its_measurements_to(mst):
    _, report, plan = mst
    (entry,) = report.steps
    assert entry["method"] == "mst"
    rho, eps = _opendp_charge(entry, d_in=1, columns=5, delta=1e-9)
    assert entry["rho_spent"] == pytest.approx(rho, rel=1e-12)
    assert entry["epsilon_spent"] == pytest.approx(eps, rel=1e-9)
    assert entry["epsilon_spent"] <= 1.0 and entry["epsilon_spent"] > 0.999
    # the ledger's charge (the plan's cost, computed without data) is the same number
    cost = get_step("dp_synthetic").privacy_cost(PARAMS)
    assert cost == {"epsilon": entry["epsilon_spent"], "delta": 1e-9}
    assert report.privacy_cost["epsilon"] == pytest.approx(entry["epsilon_spent"])


def test_a_person_of_several_rows_is_charged_at_that_distance(table):
    params = {
        **PARAMS,
        "columns": ["sex", "region"],
        "method": "independent",
        "identifier": "pid",
        "max_contributions": 3,
    }
    people = table.assign(pid=[i // 3 for i in range(len(table))])
    result = dp_synthetic(people, SyntheticSpec.from_params(params), rng=np.random.default_rng(2))
    rho, eps = _opendp_charge(result.report, d_in=3, columns=2, delta=1e-9)
    assert result.report["rho_spent"] == pytest.approx(rho, rel=1e-12)
    assert result.report["epsilon_spent"] == pytest.approx(eps, rel=1e-9) and eps <= 1.0
    assert result.report["unit_of_privacy"]["max_rows_per_person"] == 3


def test_the_released_table_has_the_declared_columns_and_domains(mst, table):
    out, report, _ = mst
    assert list(out.columns) == PARAMS["columns"]
    for col, cats in CATEGORIES.items():
        assert set(out[col]) <= set(cats)
    assert out["age"].between(18, 90).all() and out["income"].between(0, 150).all()
    # the declared income edges are the bins: each bin is sampled within its own edges
    assert out["income"].notna().all() and out["income"].max() <= 150
    (entry,) = report.steps
    assert entry["domain"] == {"age": 8, "income": 5, "sex": 2, "region": 4, "sick": 2}
    assert len(entry["measured_pairs"]) == 4
    assert abs(len(out) - len(table)) < 0.05 * len(table)


def test_mst_beats_the_independent_baseline_on_associated_columns(mst):
    _, report, _ = mst
    (entry,) = report.steps
    quality = entry["quality_vs_source"]
    assert quality["beats_baseline"] is True
    assert quality["two_way_tvd"] < 0.7 * quality["baseline_two_way_tvd"]
    assert quality["three_way_tvd"] < quality["baseline_three_way_tvd"]
    assert set(quality["two_way_by_pair"]) >= {"age|income", "sex|sick"}
    noisy = entry["quality"]
    assert noisy["baseline"] == "independent"
    assert 0 <= noisy["two_way_tvd_noisy"] <= noisy["two_way_tvd_noisy_max"] < 0.3
    assert len(noisy["measured_two_way"]) == 4


def test_the_published_report_for_analysts_holds_no_source_side_figure(mst):
    _, report, plan = mst
    internal = report.to_dict()
    published = published_report(internal, plan)
    (step,) = published["steps"]
    assert "quality_vs_source" in internal["steps"][0]
    assert "quality_vs_source" not in step
    assert step["quality"] == internal["steps"][0]["quality"]
    source_figures = {
        v for k, v in internal["steps"][0]["quality_vs_source"].items() if isinstance(v, float)
    }
    assert source_figures and not source_figures & set(_floats(published))


def _floats(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _floats(v)
    elif isinstance(value, list):
        for v in value:
            yield from _floats(v)
    elif isinstance(value, float):
        yield value


def test_a_budget_too_small_for_the_domain_is_refused_before_anything_runs():
    params = {**PARAMS, "epsilon": 0.01, "n_rows": 500, "bins": 40}
    with pytest.raises(ParameterError, match="too small for this domain.*Raise ε"):
        SyntheticSpec.from_params(params)
    with pytest.raises(ParameterError, match="too small"):
        get_step("dp_synthetic").validate(params)
    # the same budget on a domain it can resolve is accepted
    SyntheticSpec.from_params({**params, "epsilon": 4.0, "bins": 8})


def test_a_budget_too_small_for_the_data_is_refused_on_its_noisy_total():
    small = _table(300, 3)
    params = {**PARAMS, "epsilon": 0.02, "method": "independent"}
    with pytest.raises(ParameterError, match="too small for this domain"):
        dp_synthetic(small, SyntheticSpec.from_params(params), rng=np.random.default_rng(4))


@pytest.mark.parametrize(
    "params,method",
    [
        ({k: v for k, v in PARAMS.items() if k != "delta"}, "full_table"),
        (PARAMS, "mst"),
        ({**PARAMS, "columns": ["sex"]}, "independent"),
    ],
)
def test_the_default_method_fits_the_budget_given(params, method):
    assert SyntheticSpec.from_params({**params, "bins": 8}).method == method


@pytest.mark.parametrize(
    "params,message",
    [
        ({**PARAMS, "method": "mst", "delta": None}, "give a delta"),
        ({**PARAMS, "method": "pgm"}, "method must be one of"),
        ({**PARAMS, "bins": {"income": [0, 50, 40]}}, "increasing"),
    ],
)
def test_bad_method_parameters_are_refused_with_the_reason(params, message):
    with pytest.raises(ParameterError, match=message):
        SyntheticSpec.from_params(params)


def _gate(internal, plan, table, out):
    from anonweb.core.release.policy import evaluate_release

    report = internal.to_dict() if hasattr(internal, "to_dict") else internal
    return evaluate_release(
        table,
        out,
        plan=plan,
        tags={},
        report=published_report(report, plan),
        internal_report=report,
    )


def test_the_gate_is_quiet_when_the_synthetic_table_beats_the_baseline(mst, table):
    out, report, plan = mst
    codes = [f.code for f in _gate(report, plan, table, out).findings]
    assert "synthetic_below_baseline" not in codes
    assert "dp_exact_figures" not in codes  # the internal comparison is never published


def test_the_gate_warns_when_the_synthetic_table_does_not_beat_the_baseline(mst, table):
    out, report, plan = mst
    internal = report.to_dict()
    step = internal["steps"][0]
    worse = {**step["quality_vs_source"], "beats_baseline": False}
    internal["steps"][0] = {**step, "quality_vs_source": worse}
    (finding,) = [
        f
        for f in _gate(internal, plan, table, out).findings
        if f.code == "synthetic_below_baseline"
    ]
    assert finding.severity == "warn"
    assert "does not beat the independent baseline" in finding.message
    # the steward reads the parameters, not figures measured on the source
    assert set(finding.facts) == {"method", "epsilon"}
    assert str(round(worse["two_way_tvd"], 3)) not in finding.message


def test_the_page_charts_each_two_way_error_and_shows_analysts_only_the_dp_part(mst):
    from anonweb.core.dp.charts import dp_charts

    _, report, plan = mst
    internal = report.to_dict()
    (staff,) = dp_charts(internal["steps"], None)
    names = [trace["name"] for trace in staff["figure"]["data"]]
    assert names == ["synthetic", "independent baseline"]
    assert len(staff["figure"]["data"][0]["x"]) == 10  # every pair of the 5 columns
    (analyst,) = dp_charts(published_report(internal, plan)["steps"], None)
    (bars,) = analyst["figure"]["data"]
    assert len(bars["x"]) == 4  # the measured pairs only
    assert list(bars["y"]) == list(internal["steps"][0]["quality"]["measured_two_way"].values())


def test_a_full_table_release_carries_the_same_quality_reports(table):
    params = {
        "columns": ["sex", "region", "sick"],
        "epsilon": 1.0,
        "categories": CATEGORIES,
        "method": "full_table",
    }
    result = dp_synthetic(table, SyntheticSpec.from_params(params), rng=np.random.default_rng(6))
    noisy, source = result.report["quality"], result.report["quality_vs_source"]
    assert noisy["method"] == "full_table" and noisy["baseline"] == "independent"
    assert 0 <= noisy["one_way_tvd_noisy"] < 0.05
    # the full table keeps sex × sick, which the independent baseline cannot
    assert source["two_way_by_pair"]["sex|sick"] < source["baseline_two_way_by_pair"]["sex|sick"]
    assert source["beats_baseline"] is True
    assert "quality_vs_source" not in get_step("dp_synthetic").public_report


def test_mst_merges_a_sparse_column_s_rare_categories_and_draws_them_back():
    """MST's compression: categories whose noisy count is below 3σ are measured as one cell in
    the pairs, and the synthetic records spread that cell back over them by their noisy shares."""
    rng = np.random.default_rng(5)
    n = 6000
    common = ["US", "MX"]
    rare = [f"c{i:02d}" for i in range(30)]
    country = rng.choice(common + rare, n, p=[0.85, 0.1] + [0.05 / 30] * 30)
    table = pd.DataFrame(
        {
            "country": country,
            "language": np.where(country == "MX", "es", rng.choice(["en", "es"], n, p=[0.9, 0.1])),
            "sex": rng.choice(["F", "M"], n),
        }
    )
    params = {
        "columns": ["country", "language", "sex"],
        "epsilon": 1.0,
        "delta": 1e-9,
        "method": "mst",
        "categories": {
            "country": common + rare,
            "language": ["en", "es"],
            "sex": ["F", "M"],
        },
    }
    spec = SyntheticSpec.from_params(params)
    result = dp_synthetic(table, spec, rng=np.random.default_rng(6))
    merged = result.report["merged_cells"]
    # 1.6 expected records per rare country, 3σ ≈ 52 (OpenDP's noise is not seeded, so a rare
    # country clears it now and then, about 0.1% each): nearly all 30 are one cell
    assert set(merged) == {"country"} and 25 <= merged["country"] <= 30
    out = result.frame
    assert set(out["country"]) <= set(common + rare)
    assert {"US", "MX"} <= set(out["country"])
    assert out["country"].isin(rare).mean() == pytest.approx(0.05, abs=0.04)
    # the pair country × language is still learnt on the compressed cells
    mx = out[out["country"] == "MX"]
    assert (mx["language"] == "es").mean() > 0.8
    assert result.report["quality"]["two_way_tvd_noisy"] is not None
