"""No DP step's own report carries an exact figure of the source: its row count, its k or
classes, or a comparison with the original data. Each report holds the query's public
parameters, the cost and accuracy (computed without data) and what the released table shows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from anonweb.core.release.plan import get_step, plan_from_dict
from anonweb.core.release.report import published_report
from anonweb.core.release.run import apply_plan

ROWS = 1237  # a figure that can only come from the source
PLAN_KEYS = {"step", "kind", "seconds", "privacy_cost", "input_distance"}


@pytest.fixture(scope="module")
def source() -> pd.DataFrame:
    rng = np.random.default_rng(11)
    age = rng.integers(18, 90, ROWS)
    city = rng.choice([f"c{i}" for i in range(40)], ROWS)
    city[:7] = [f"rare{i}" for i in range(7)]  # keys below any threshold: never counted
    return pd.DataFrame(
        {
            "pid": [f"p{i // 2}" for i in range(ROWS)],  # two rows per person, mostly
            "age": age,
            "income": 20.0 + 0.8 * age + rng.normal(0, 8, ROWS),
            "sex": rng.choice(["F", "M"], ROWS),
            "city": city,
        }
    )


SEX = {"sex": ["F", "M"]}
STEPS = [
    ("dp_release", {"kind": "count", "epsilon": 1.0}),
    ("dp_release", {"kind": "histogram", "epsilon": 1.0, "columns": ["sex"], "categories": SEX}),
    ("dp_release", {"kind": "histogram", "epsilon": 1.0, "columns": ["city"], "delta": 1e-6}),
    (
        "dp_release",
        {
            "kind": "histogram",
            "epsilon": 1.0,
            "columns": ["city"],
            "delta": 1e-6,
            "identifier": "pid",
            "max_contributions": 2,
        },
    ),
    ("dp_release", {"kind": "sum", "epsilon": 1.0, "columns": ["age"], "bounds": [0, 100]}),
    ("dp_release", {"kind": "mean", "epsilon": 1.0, "columns": ["age"], "bounds": [0, 100]}),
    ("dp_release", {"kind": "quantile", "epsilon": 1.0, "columns": ["age"], "bounds": [0, 100]}),
    ("dp_release", {"kind": "range", "epsilon": 1.0, "columns": ["age"], "bounds": [0, 100]}),
    (
        "dp_synthetic",
        {
            "columns": ["age", "income", "sex"],
            "epsilon": 1.0,
            "categories": SEX,
            "bounds": {"age": [0, 100], "income": [0, 200]},
            "bins": 5,
        },
    ),
]


def _numbers(value):
    if isinstance(value, dict):
        for v in value.values():
            yield from _numbers(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _numbers(v)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield value


def _exact_figures(df: pd.DataFrame) -> set[float]:
    """Figures only the source knows: its size, people, and aggregates of what was measured."""
    from anonweb.core.assessment.profile import assess_risk

    risk = assess_risk(df, quasi_identifiers=["age", "sex"], sensitive=()).to_dict()
    exact = {
        len(df),
        df["pid"].nunique(),
        int(df["sex"].eq("F").sum()),
        int(df["sex"].eq("M").sum()),
        int(df["city"].nunique()),
        int(df["age"].sum()),
        float(df["age"].mean()),
        risk["k"],
        risk["classes"],
        risk["uniques"],
    }
    return {x for x in exact if x not in (0, 1, 2)}


@pytest.mark.parametrize("kind,params", STEPS, ids=lambda v: v if isinstance(v, str) else "")
def test_a_dp_step_report_holds_no_exact_figure_of_the_source(source, kind, params):
    plan = plan_from_dict({"version": 1, "steps": [{"kind": kind, "params": params}]})
    _, report = apply_plan(source, plan, rng=np.random.default_rng(0), measure_risk=False)
    (entry,) = report.steps
    public = set(get_step(kind).public_report)
    # Every key of the step's report is one it declares public, except what contribution
    # bounding dropped and a synthetic table's comparison with the source (officers and stewards
    # read them in the internal report): the published report loses nothing else and holds no
    # exact figure.
    internal_only = {"quality_vs_source"} if kind == "dp_synthetic" else set()
    if params.get("identifier"):
        internal_only.add("contribution_bounding")
    assert not internal_only & public
    allowed = public | PLAN_KEYS | internal_only
    assert set(entry) <= allowed, sorted(set(entry) - allowed)
    entry = {k: v for k, v in entry.items() if k not in internal_only}
    assert "utility" not in entry
    (published,) = published_report(report.to_dict(), plan)["steps"]
    assert set(published) == set(entry)
    found = set(_numbers(published)) & _exact_figures(source)
    assert not found, (found, published)


def test_a_local_dp_report_shows_only_what_its_randomized_table_shows(source):
    """A local-DP step releases one randomized row per source row: its counts are counts of the
    released column (observed and debiased), never of the original one."""
    params = {"column": "sex", "epsilon": 0.5, "categories": ["F", "M"]}
    plan = plan_from_dict(
        {"version": 1, "steps": [{"kind": "ldp_randomized_response", "params": params}]}
    )
    out, report = apply_plan(source, plan, rng=np.random.default_rng(0), measure_risk=False)
    (entry,) = report.steps
    assert set(entry) <= set(get_step("ldp_randomized_response").public_report) | PLAN_KEYS
    assert entry["observed_counts"] == out["sex"].value_counts().to_dict()
    original = source["sex"].value_counts().to_dict()
    # the released column is randomized row by row (at ε = 0.5 a row keeps its value with
    # probability about 0.62), so its counts can equal the original's by chance (about one run
    # in sixty: OpenDP draws the noise, no seed governs it); that the report counts the released
    # column is the assertion above, that the column was randomized is this one
    assert out.index.equals(source.index)
    assert (out["sex"] != source["sex"]).any()
    assert set(entry["observed_counts"]) <= set(original)
