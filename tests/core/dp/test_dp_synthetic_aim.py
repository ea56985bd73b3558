"""AIM (McKenna et al. 2022): accepted as a method, charged what OpenDP maps its rounds to,
bounded in rounds, and better than the independent baseline on associated columns."""

from __future__ import annotations

import math

import numpy as np
import opendp.prelude as dp
import pytest

from anonweb.core.dp import marginals as mg
from anonweb.core.dp.synthetic import SyntheticSpec
from anonweb.core.errors import ParameterError
from anonweb.core.release.plan import get_step, plan_from_dict
from anonweb.core.release.report import published_report
from anonweb.core.release.run import apply_plan
from tests.core.dp.test_dp_synthetic_marginals import PARAMS, _table

dp.enable_features("contrib")

AIM = {**PARAMS, "method": "aim", "epsilon": 2.0}


@pytest.fixture(scope="module")
def aim():
    table = _table(4000, 3)
    plan = plan_from_dict({"version": 1, "steps": [{"kind": "dp_synthetic", "params": AIM}]})
    out, report = apply_plan(table, plan, rng=np.random.default_rng(4), measure_risk=False)
    return table, out, report, plan


def test_aim_is_a_method_a_plan_may_ask_for():
    assert SyntheticSpec.from_params(AIM).method == "aim"


def test_aim_on_one_column_is_refused_with_the_reason():
    with pytest.raises(ParameterError, match="two or more columns"):
        SyntheticSpec.from_params({**AIM, "columns": ["sex"]})


def test_the_workload_is_every_pair_and_the_candidates_every_marginal_inside_one():
    candidates, weights = mg._workload(3, 2)
    assert candidates == [(0,), (0, 1), (0, 2), (1,), (1, 2), (2,)]
    # a pair shares both columns with itself and one with each of the other pairs
    assert weights[(0, 1)] == 4 and weights[(0,)] == 2
    triples, _ = mg._workload(4, 3)
    assert (0, 1, 2) in triples and len(triples) == 4 + 6 + 4


def _opendp_rho(entry, d_in: int) -> float:
    """ρ rebuilt from each measurement's scale with OpenDP's own constructors."""
    ints = (dp.vector_domain(dp.atom_domain(T=int)), dp.l2_distance(T=int))
    rho = 0.0
    for m in entry["measurements"]:
        if m["kind"] == "select":
            meas = dp.m.make_noisy_max(
                dp.vector_domain(dp.atom_domain(T=float, nan=False)),
                dp.linf_distance(T=float, monotonic=False),
                dp.zero_concentrated_divergence(),
                scale=m["scale"],
            )
            rho += meas.map(float(d_in))
        else:
            rho += dp.m.make_gaussian(*ints, scale=m["scale"]).map(d_in)
    return rho


def test_aim_charges_the_ledger_the_sum_of_opendp_s_maps_of_its_rounds(aim):
    _, _, report, _ = aim
    (entry,) = report.steps
    assert entry["method"] == "aim"
    rho = _opendp_rho(entry, d_in=1)
    assert entry["rho_spent"] == pytest.approx(rho, rel=1e-12)
    gauss = dp.m.make_gaussian(
        dp.atom_domain(T=float, nan=False), dp.absolute_distance(T=float), scale=1.0
    )
    eps = dp.c.make_zCDP_to_approxDP(gauss).map(math.sqrt(2 * rho)).epsilon(1e-9)
    # the ledger's charge, computed before any data is read, is that same figure
    cost = get_step("dp_synthetic").privacy_cost(AIM)
    assert cost["epsilon"] == pytest.approx(eps, rel=1e-9)
    assert 1.999 < cost["epsilon"] <= 2.0 and cost["delta"] == 1e-9


def test_aim_s_rounds_are_bounded_and_each_selects_then_measures(aim):
    _, _, report, _ = aim
    (entry,) = report.steps
    rounds = len(entry["measured_marginals"])
    assert 1 <= rounds <= mg.AIM_MAX_ROUNDS
    kinds = [m["kind"] for m in entry["measurements"]]
    assert kinds == ["one_way"] * 5 + ["select", "measure"] * rounds
    assert entry["estimation_iterations"] <= mg.AIM_ROUND_ITERS * rounds + mg.ESTIMATION_ITERS


def test_aim_beats_the_independent_baseline_on_associated_columns(aim):
    table, out, report, _ = aim
    (entry,) = report.steps
    assert list(out.columns) == PARAMS["columns"] and len(out) == pytest.approx(len(table), 0.1)
    quality = entry["quality_vs_source"]
    assert quality["beats_baseline"] is True
    assert quality["improvement_over_baseline"] > 0.2


def test_analysts_see_which_marginals_aim_measured_but_nothing_from_the_source(aim):
    _, _, report, plan = aim
    (entry,) = published_report(report.to_dict(), plan)["steps"]
    assert entry["measured_marginals"] == report.steps[0]["measured_marginals"]
    assert entry["measurements"]
    assert "quality_vs_source" not in entry


def test_a_workload_of_three_way_marginals_is_asked_for_and_checked():
    assert SyntheticSpec.from_params({**AIM, "workload": 3}).marginal_plan().workload_degree == 3
    assert SyntheticSpec.from_params(AIM).marginal_plan().workload_degree == 2
    for bad, reason in (
        ({**AIM, "workload": 4}, "2 or 3"),
        ({**AIM, "workload": True}, "2 or 3"),
        ({**AIM, "workload": 3, "columns": ["sex", "sick"]}, "at least 3 columns"),
        ({**AIM, "method": "mst", "workload": 3}, "AIM's"),
    ):
        with pytest.raises(ParameterError, match=reason):
            SyntheticSpec.from_params(bad)
    validate = get_step("dp_synthetic").validate
    assert validate is not None
    with pytest.raises(ParameterError, match="2 or 3"):
        validate({**AIM, "workload": 4})


def test_aim_aimed_at_three_way_marginals_measures_them_and_says_so():
    # sick depends on sex and age together: a three-way relation
    table = _table(4000, 5)
    params = {**AIM, "workload": 3}
    plan = plan_from_dict({"version": 1, "steps": [{"kind": "dp_synthetic", "params": params}]})
    _, report = apply_plan(table, plan, rng=np.random.default_rng(6), measure_risk=False)
    (entry,) = report.steps
    assert entry["workload"] == 3
    assert published_report(report.to_dict(), plan)["steps"][0]["workload"] == 3
    quality = entry["quality_vs_source"]
    assert quality["three_way_tvd"] < quality["baseline_three_way_tvd"], quality
