"""A DP step is charged at the input distance the steps before it allow; a plan in which an
unstable (data-dependent) step feeds a DP step is refused before it runs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from anonweb.core.errors import ParameterError
from anonweb.core.release.plan import (
    get_step,
    plan_costs,
    plan_from_dict,
    step_kinds,
    validate_plan,
)
from anonweb.core.release.run import apply_plan
from anonweb.core.release.steps import ROW_WISE, UNBOUNDED, Plan

HISTOGRAM = {
    "kind": "histogram",
    "epsilon": 1.0,
    "columns": ["city"],
    "categories": {"city": ["a", "b", "*"]},
}


def _plan(*steps, hierarchies=None) -> Plan:
    return plan_from_dict(
        {
            "version": 1,
            "hierarchies": hierarchies or {},
            "steps": [{"kind": k, "params": p} for k, p in steps],
        }
    )


def test_rare_value_suppression_moves_a_histogram_by_nine_counts_for_one_person():
    """Why the rule exists: the issue's example, worked by hand. Four people in city b are
    suppressed (fewer than 5); a fifth person in b lifts all five out of suppression, so two
    tables one person apart reach the histogram 9 counts apart (4 from '*', 5 into 'b')."""
    suppress = get_step("suppress")
    ctx = type("Ctx", (), {})()
    base = pd.DataFrame({"city": ["a"] * 10 + ["b"] * 4})
    plus = pd.concat([base, pd.DataFrame({"city": ["b"]})], ignore_index=True)
    params = {"columns": ["city"], "rare": 5}
    h0 = suppress.func(base, params, ctx).frame["city"].value_counts()
    h1 = suppress.func(plus, params, ctx).frame["city"].value_counts()
    distance = h0.reindex(["a", "b", "*"], fill_value=0) - h1.reindex(["a", "b", "*"], fill_value=0)
    assert int(distance.abs().sum()) == 9


def test_a_dp_step_after_rare_value_suppression_is_refused_naming_the_step():
    plan = _plan(
        ("drop", {"columns": ["name"]}),
        ("suppress", {"columns": ["city"], "rare": 5}),
        ("dp_release", HISTOGRAM),
    )
    with pytest.raises(ParameterError) as err:
        validate_plan(plan)
    message = str(err.value)
    assert message.startswith("step 3 (dp_release) would not be differentially private")
    assert "Move step 2 after the DP step" in message and "or remove it" in message


@pytest.mark.parametrize(
    "step",
    [
        ("optimal_generalization", {"k": 5}),
        ("mondrian", {"k": 5, "columns": ["age"]}),
        ("microaggregation", {"columns": ["age"], "k": 3}),
        ("rank_swap", {"columns": ["age"], "p": 5}),
        ("shuffle", {"columns": ["age"]}),
        ("add_noise", {"columns": ["age"], "scale": 0.1}),
        ("pram", {"column": "city", "p_keep": 0.8}),
        ("ldp_randomized_response", {"column": "city", "epsilon": 1.0}),
        ("generalize", {"levels": {"age": 1}}),
    ],
)
def test_data_dependent_steps_before_a_dp_step_are_refused(step):
    plan = _plan(
        step,
        ("dp_release", HISTOGRAM),
        hierarchies={"age": {"builder": "grouping", "group_size": 2}},
    )
    with pytest.raises(ParameterError, match=rf"step 1 \({step[0]}\) before it is not stable"):
        validate_plan(plan)


@pytest.mark.parametrize(
    "step",
    [
        ("drop", {"columns": ["name"]}),
        ("tokenize", {"columns": ["name"], "key": "k"}),
        ("regex_mask", {"columns": ["name"], "preset": "first_word"}),
        ("substitute", {"columns": ["city"], "codebook": {"a": "A"}}),
        ("suppress", {"columns": ["city"], "values": ["b"]}),
        ("date_shift", {"columns": ["day"], "person": "name", "max_days": 3}),
        ("add_noise", {"columns": ["age"], "sd": 2.0}),
        ("multiplicative_noise", {"columns": ["age"], "scale": 0.1}),
        ("pram", {"column": "sex", "matrix": {"F": {"F": 0.9, "M": 0.1}, "M": {"M": 1.0}}}),
        ("ldp_laplace", {"column": "age", "epsilon": 1.0, "bounds": [0, 100]}),
        (
            "ldp_randomized_response",
            {"column": "sex", "epsilon": 1.0, "categories": ["F", "M"]},
        ),
        ("generalize", {"levels": {"age": 1}}),
    ],
)
def test_row_wise_steps_keep_the_dp_cost_at_one_row_per_row(step):
    plan = _plan(
        step,
        ("dp_release", HISTOGRAM),
        hierarchies={"age": {"builder": "interval", "width": 10, "start": 0, "top": 100}},
    )
    costs = plan_costs(plan)
    dp = [c for c in costs if c.kind == "dp_release"]
    assert len(dp) == 1 and dp[0].distance == 1
    assert dp[0].cost["epsilon"] == pytest.approx(1.0)


def test_every_step_kind_declares_its_stability_or_is_a_measurement():
    plan = Plan()
    for kind in step_kinds():
        spec = get_step(kind)
        if spec.measurement:
            continue
        assert spec.stability is not UNBOUNDED or kind in {
            "optimal_generalization",
            "mondrian",
            "microaggregation",
            "rank_swap",
            "shuffle",
            # which cells are blanked depends on the class counts of every other row
            "local_suppression",
        }, f"{kind} declares no stability"
        if not callable(spec.stability):
            assert spec.stability_of({}, plan) in (ROW_WISE, UNBOUNDED)


def test_a_step_that_doubles_rows_doubles_the_dp_cost():
    """The map is taken at the distance: a (test-only) step emitting each row twice."""
    from anonweb.core.release.steps import StepOutcome, register_step

    @register_step("test_twice", stability=2)
    def twice(df, params, ctx):
        return StepOutcome(pd.concat([df, df], ignore_index=True))

    plan = _plan(("test_twice", {}), ("dp_release", HISTOGRAM))
    (cost,) = plan_costs(plan)
    assert cost.distance == 2 and cost.cost["epsilon"] == pytest.approx(2.0)
    frame = pd.DataFrame({"city": ["a", "b", "a"]})
    _, report = apply_plan(frame, plan, rng=np.random.default_rng(0), measure_risk=False)
    assert report.privacy_cost["epsilon"] == pytest.approx(2.0)
    assert report.steps[1]["epsilon_spent"] == pytest.approx(2.0)
    assert report.steps[1]["unit_of_privacy"]["d_in"] == 2


def test_undeclared_step_kinds_count_as_unbounded():
    from anonweb.core.release.steps import StepOutcome, register_step

    @register_step("test_undeclared")
    def same(df, params, ctx):
        return StepOutcome(df.copy())

    with pytest.raises(ParameterError, match=r"step 1 \(test_undeclared\) before it is not stable"):
        validate_plan(_plan(("test_undeclared", {}), ("dp_release", HISTOGRAM)))


def test_steps_after_a_dp_step_post_process_its_output():
    frame = pd.DataFrame({"city": ["a"] * 30 + ["b"] * 20})
    plan = _plan(
        ("dp_release", HISTOGRAM),
        ("suppress", {"columns": ["city"], "values": ["b"]}),
    )
    out, report = apply_plan(frame, plan, rng=np.random.default_rng(0), measure_risk=False)
    assert list(out["city"]) == ["a", "*", "*", "(missing)"]  # it ran on the DP table
    assert report.privacy_cost == {"epsilon": pytest.approx(1.0), "delta": 0.0}


def test_several_dp_steps_read_the_same_table_and_their_outputs_are_stacked():
    """The suggested DP plan has one histogram per column; the second used to read the first's
    output and fail."""
    frame = pd.DataFrame({"city": ["a"] * 30 + ["b"] * 20, "sex": ["F", "M"] * 25})
    second = {
        "kind": "histogram",
        "epsilon": 0.5,
        "columns": ["sex"],
        "categories": {"sex": ["F", "M"]},
    }
    plan = _plan(("dp_release", HISTOGRAM), ("dp_release", second))
    out, report = apply_plan(frame, plan, rng=np.random.default_rng(0), measure_risk=False)
    assert list(out["statistic"].unique()) == ["1: histogram of city", "2: histogram of sex"]
    assert len(out) == 4 + 3  # declared cells and (missing), per histogram
    assert report.privacy_cost["epsilon"] == pytest.approx(1.5)
    assert report.risk_after is None


def test_a_dp_step_after_post_processing_is_refused():
    plan = _plan(
        ("dp_release", HISTOGRAM),
        ("drop", {"columns": ["city"]}),
        ("dp_release", HISTOGRAM),
    )
    with pytest.raises(ParameterError, match="put it after every DP release step"):
        validate_plan(plan)


def test_fixed_hierarchies_are_told_from_data_built_ones():
    from anonweb.core.io.hierarchy_builders import spec_is_fixed

    assert spec_is_fixed({"rows": [["a", "*"]]})
    assert spec_is_fixed({"builder": "date"})
    assert spec_is_fixed({"builder": "interval", "breaks": [0, 18, 65]})
    assert spec_is_fixed({"builder": "interval", "width": 10, "bottom": 0, "top": 100})
    assert not spec_is_fixed({"builder": "interval", "width": 10})  # anchored at the data's min
    assert not spec_is_fixed({"builder": "mask"})  # padded to the longest value
    assert not spec_is_fixed({"builder": "grouping", "group_size": 3})
    assert not spec_is_fixed(None)
