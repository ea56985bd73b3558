"""A plan that cannot run is refused when it is submitted, not by the worker: every reason the
worker would stop that the plan and the table's profile already show is found by
``validate_plan`` (the one check behind the page, the live check, the API and the command line),
named by step and column with the way out, and in words a privacy officer reads (no Python
representations)."""

import re

import numpy as np
import pandas as pd
import pytest

from anonweb.core.errors import HierarchyError, PlanError
from anonweb.core.io.hierarchy import parse_hierarchy
from anonweb.core.release.plan import plan_from_dict, validate_plan
from anonweb.core.release.run import apply_plan


def _table(n=60, seed=3):
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "name": [f"Person {i}" for i in range(n)],
            "zip": rng.choice(["02138", "02139", "02141"], n),
            "age": rng.integers(20, 70, n),
            "sex": rng.choice(["F", "M"], n),
            "disease": rng.choice(["flu", "asthma", "gastritis"], n),
        }
    )


HIERARCHIES = {
    "zip": {"builder": "mask"},
    "age": {"builder": "interval", "width": 10},
    "sex": {"rows": [["F", "*"], ["M", "*"]]},
}
SEARCH = {"kind": "optimal_generalization", "params": {"k": 2, "suppression": 0.0}}
PYTHON_WORDS = re.compile(r"np\.|float64|int64|numpy|Traceback|<class|\bdtype\b")


def _plan(*steps):
    return plan_from_dict(
        {
            "quasi_identifiers": ["zip", "age", "sex"],
            "sensitive": ["disease"],
            "hierarchies": HIERARCHIES,
            "steps": list(steps),
        }
    )


def _refusals(plan, df):
    types = {c: "numeric" if pd.api.types.is_numeric_dtype(df[c]) else "text" for c in df}
    with pytest.raises(PlanError) as caught:
        validate_plan(
            plan,
            list(df.columns),
            types=types,
            rows=len(df),
            distinct={c: int(df[c].nunique()) for c in df},
        )
    return caught.value.errors


@pytest.mark.parametrize(
    "step,column",
    [
        # the reporter's case: means of a generalized column are not in its hierarchy
        ({"kind": "microaggregation", "params": {"columns": ["age"], "k": 3}}, "age"),
        ({"kind": "add_noise", "params": {"columns": ["age"], "sd": 1.5}}, "age"),
        ({"kind": "multiplicative_noise", "params": {"columns": ["age"], "scale": 0.1}}, "age"),
        ({"kind": "tokenize", "params": {"columns": ["zip"], "key": "k"}}, "zip"),
        ({"kind": "suppress", "params": {"columns": ["zip"]}}, "zip"),
        (
            {
                "kind": "regex_mask",
                "params": {"columns": ["zip"], "pattern": "\\d$", "replacement": "*"},
            },
            "zip",
        ),
        ({"kind": "generalize", "params": {"levels": {"age": 1}}}, "age"),
        ({"kind": "mondrian", "params": {"k": 3, "columns": ["age"]}}, "age"),
        (
            {"kind": "ldp_laplace", "params": {"column": "age", "epsilon": 1, "bounds": [0, 100]}},
            "age",
        ),
        (
            {"kind": "pram", "params": {"column": "sex", "matrix": {"F": {"X": 1}, "M": {"M": 1}}}},
            "sex",
        ),
    ],
)
def test_a_column_changed_before_the_search_generalizes_it_is_refused(step, column):
    df = _table()
    plan = _plan(step, SEARCH)
    # what the worker would do: stop at the search, the hierarchy not covering the new values
    [error] = _refusals(plan, df)
    assert error.startswith("step 2 (optimal_generalization): ")
    assert f"generalizes {column!r} with its hierarchy" in error
    assert f"step 1 ({step['kind']}) changes those values first" in error
    assert f"take {column!r} out of step 1 ({step['kind']})" in error
    assert "take it out of the quasi-identifiers" in error
    assert not PYTHON_WORDS.search(error)


@pytest.mark.parametrize(
    "step",
    [
        {"kind": "rank_swap", "params": {"columns": ["age"], "p": 5}},
        {"kind": "shuffle", "params": {"columns": ["age", "zip"]}},
        {"kind": "pram", "params": {"column": "sex", "p_keep": 0.8}},
        {"kind": "pram", "params": {"column": "sex", "matrix": {"F": {"M": 1}, "M": {"F": 1}}}},
        {
            "kind": "ldp_randomized_response",
            "params": {"column": "sex", "epsilon": 1, "categories": ["F", "M"]},
        },
        {"kind": "microaggregation", "params": {"columns": ["age"], "k": 3}},
    ],
)
def test_steps_that_keep_the_values_or_follow_the_search_are_accepted_and_run(step):
    df = _table()
    # a step that only moves values among the column's own values may come first; a step that
    # writes new ones may come after the search only when it still reads numbers there
    after = step["kind"] == "microaggregation"
    plan = _plan(SEARCH, step) if after else _plan(step, SEARCH)
    if after:
        [error] = _refusals(plan, df)
        assert error == (
            "step 2 (microaggregation): 'columns[0]': column 'age' holds text labels after "
            "step 1 (optimal_generalization), not numbers: put this step before that one, or "
            "leave the column out of it"
        )
        return
    validate_plan(plan, list(df.columns), rows=len(df))
    out, report = apply_plan(
        df, plan, rng=np.random.default_rng(0), secrets={"k": b"k" * 32}, measure_risk=False
    )
    assert report.steps[-1]["kind"] == "optimal_generalization" and len(out) == len(df)


def test_a_quasi_identifier_dropped_before_the_search_is_refused():
    df = _table()
    [error] = _refusals(_plan({"kind": "drop", "params": {"columns": ["age"]}}, SEARCH), df)
    assert error == (
        "step 2 (optimal_generalization): it generalizes 'age', but step 1 (drop) removed that "
        "column before it. Drop 'age' after this step, or take it out of the quasi-identifiers"
    )


def test_an_l_the_sensitive_column_cannot_reach_is_refused():
    df = _table()  # three diseases
    search = {
        "kind": "optimal_generalization",
        "params": {"k": 2, "models": [{"model": "distinct_l", "sensitive": "disease", "l": 4}]},
    }
    [error] = _refusals(_plan(search), df)
    assert error == (
        "step 1 (optimal_generalization): Distinct l-diversity asks for l = 4 different values "
        "of 'disease' in every class, but 'disease' has only 3 different value(s): lower l to "
        "at most 3"
    )
    search["params"]["models"][0]["l"] = 3
    validate_plan(_plan(search), list(df.columns), distinct={"disease": 3})


def test_an_impossible_k_is_refused_with_the_row_count():
    df = _table(n=40)
    search = {"kind": "optimal_generalization", "params": {"k": 41}}
    assert _refusals(_plan(search), df) == [
        "step 1 (optimal_generalization): 'k' is 41 but the table has only 40 rows"
    ]


def test_each_problem_is_listed_once():
    df = _table()
    count = {"kind": "dp_release", "params": {"kind": "count", "epsilon": 0.5, "columns": ["age"]}}
    assert _refusals(_plan(count), df) == ["step 1 (dp_release): a DP count takes no column"]


def test_the_workers_coverage_message_writes_values_plainly():
    hierarchy = parse_hierarchy("18;18-19;*\n19;18-19;*\n", attribute="age")
    means = pd.Series([18.333333333333332, 19.0, 19.5], name="age")
    with pytest.raises(HierarchyError) as caught:
        hierarchy.validate_covers(means)
    message = str(caught.value)
    assert message.startswith(
        "the hierarchy for 'age' does not cover 2 value(s): 18.333333333333332 (a number), "
        "19.5 (a number) (its values look like '18', '19')"
    )
    assert not PYTHON_WORDS.search(message)


COUNT = {"kind": "dp_release", "params": {"kind": "count", "epsilon": 0.5}}
SEX_HISTOGRAM = {
    "kind": "dp_release",
    "params": {
        "kind": "histogram",
        "epsilon": 0.5,
        "columns": ["sex"],
        "categories": {"sex": ["F", "M"]},
    },
}


def test_a_step_after_a_dp_release_names_only_the_released_columns():
    """Steps after a DP release post-process its table: a source column is gone (the worker
    stopped with a bare KeyError), the released ones can be named."""
    df = _table()
    drop_name = {"kind": "drop", "params": {"columns": ["name"]}}
    assert _refusals(_plan(COUNT, drop_name), df) == [
        "step 2 (drop): 'columns[0]': column 'name' was removed by step 1 (dp_release), whose "
        "released table (noisy_count) replaces the rows"
    ]
    assert _refusals(_plan(COUNT, SEARCH), df) == [
        "step 2 (optimal_generalization): it generalizes 'zip', 'age', 'sex', but step 1 "
        "(dp_release), whose released table (noisy_count) replaces the rows. A released DP "
        "table needs no generalization: remove this step"
    ]
    keep_counts = {"kind": "drop", "params": {"columns": ["statistic"]}}
    plan = _plan(SEX_HISTOGRAM, COUNT, keep_counts)
    validate_plan(plan, list(df.columns))
    out, _ = apply_plan(df, plan, rng=np.random.default_rng(0), measure_risk=False)
    assert list(out.columns) == ["sex", "noisy_count"]


def test_fixed_levels_must_fit_the_quasi_identifiers_and_their_hierarchies():
    df = _table()
    levels = {"kind": "optimal_generalization", "params": {"levels": {"sex": 5, "name": 1}}}
    assert _refusals(_plan(levels), df) == [
        "step 1 (optimal_generalization): fixed levels name 'name', which the plan does not "
        "list as quasi-identifiers: give levels for the quasi-identifiers only",
        "step 1 (optimal_generalization): level 5 for 'sex' is out of range (its hierarchy has "
        "levels 0..1)",
    ]


def test_microaggregating_a_column_with_missing_values_is_refused():
    df = _table().assign(income=lambda t: t["age"] * 1000.0)
    df.loc[4, "income"] = np.nan
    step = {"kind": "microaggregation", "params": {"columns": ["income"], "k": 3}}
    with pytest.raises(PlanError) as caught:
        validate_plan(_plan(step), list(df.columns), has_missing=frozenset({"income"}))
    assert caught.value.errors == [
        "step 1 (microaggregation): 'income' has missing values, and microaggregation needs a "
        "value in every row: leave it out of this step (noise and swapping leave missing values "
        "as they are)"
    ]
