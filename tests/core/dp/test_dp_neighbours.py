"""The output domain of a DP step does not depend on the data.

For two tables that differ in one person (a missing value, a value outside the declared
categories, an extreme value), every DP and local-DP step either has the same set of possible
outputs on both, or refuses the table with a reason before its mechanism runs. A missing value
never turns "(missing)" into a possible answer for everyone (issue 20.1)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from anonweb.core.errors import CoreError
from anonweb.core.release.plan import plan_from_dict
from anonweb.core.release.run import apply_plan

N = 200


def _table() -> pd.DataFrame:
    rng = np.random.default_rng(5)
    return pd.DataFrame(
        {
            "pid": [f"p{i}" for i in range(N)],
            "v": rng.choice(["a", "b"], N),
            "age": rng.integers(18, 80, N).astype(float),
        }
    )


PEOPLE = {
    "missing value": {"pid": "new", "v": None, "age": None},
    "new category": {"pid": "new", "v": "z", "age": 40.0},
    "extreme value": {"pid": "new", "v": "a", "age": 1e9},
}

CATS = {"v": ["a", "b"]}
STEPS: list[tuple[str, dict[str, Any]]] = [
    ("ldp_randomized_response", {"column": "v", "epsilon": 1.0, "categories": ["a", "b"]}),
    (
        "ldp_randomized_response",
        {"column": "v", "epsilon": 1.0, "categories": ["a", "b"], "missing_as": "b"},
    ),
    (
        "ldp_randomized_response",
        {"column": "v", "epsilon": 1.0, "categories": ["a", "b", "(missing)"]},
    ),
    ("ldp_laplace", {"column": "age", "epsilon": 1.0, "bounds": [0, 100]}),
    ("ldp_laplace", {"column": "age", "epsilon": 1.0, "bounds": [0, 100], "missing_as": 50}),
    ("dp_release", {"kind": "count", "epsilon": 1.0}),
    ("dp_release", {"kind": "histogram", "epsilon": 1.0, "columns": ["v"], "categories": CATS}),
    (
        "dp_release",
        {
            "kind": "histogram",
            "epsilon": 1.0,
            "columns": ["v"],
            "categories": CATS,
            "identifier": "pid",
        },
    ),
    ("dp_release", {"kind": "sum", "epsilon": 1.0, "columns": ["age"], "bounds": [0, 100]}),
    ("dp_release", {"kind": "mean", "epsilon": 1.0, "columns": ["age"], "bounds": [0, 100]}),
    ("dp_release", {"kind": "range", "epsilon": 1.0, "columns": ["age"], "bounds": [0, 100]}),
    ("dp_release", {"kind": "quantile", "epsilon": 1.0, "columns": ["age"], "bounds": [0, 100]}),
    (
        "dp_synthetic",
        {
            "columns": ["v", "age"],
            "epsilon": 1.0,
            "categories": CATS,
            "bounds": {"age": [0, 100]},
            "bins": 4,
            "n_rows": 50,
        },
    ),
]

# The report keys that describe the mechanism: the same mechanism, the same possible outputs.
MECHANISM = ("categories", "p_keep", "q_other", "bounds", "noise", "cells", "bins", "edges")


def _possible_outputs(kind: str, params: dict[str, Any], df: pd.DataFrame) -> Any:
    """What a run can output, from the released table's shape and the mechanism it ran: the
    answer set of each randomized record, or the cells and columns of an aggregate."""
    plan = plan_from_dict({"version": 1, "steps": [{"kind": kind, "params": params}]})
    out, report = apply_plan(df, plan, rng=np.random.default_rng(0), measure_risk=False)
    (entry,) = report.steps
    mechanism = tuple((k, repr(entry.get(k))) for k in MECHANISM)
    if kind == "ldp_randomized_response":
        answers = set(entry["categories"])
        released = {"(missing)" if pd.isna(v) else str(v) for v in out["v"]}
        assert released <= answers
        return mechanism, tuple(sorted(answers))
    if kind == "ldp_laplace":
        assert np.isfinite(out["age"].to_numpy(dtype=float)).all()
        return mechanism, "a real number per record"
    noisy = ("age", "quantile")
    shape = [c for c in out.columns if not str(c).startswith("noisy") and c not in noisy]
    labels = out[shape].astype(str).agg("|".join, axis=1) if shape else pd.Series([], dtype=str)
    if kind == "dp_synthetic":
        assert set(out["v"].astype(str)) <= {"a", "b"}
        return mechanism, tuple(out.columns)
    return mechanism, tuple(out.columns), tuple(sorted(labels))


@pytest.mark.parametrize("person", list(PEOPLE))
@pytest.mark.parametrize(("kind", "params"), STEPS, ids=lambda v: v if isinstance(v, str) else "")
def test_one_more_person_never_changes_what_a_dp_step_can_output(kind, params, person):
    without = _table()
    with_them = pd.DataFrame({c: [*without[c], PEOPLE[person][c]] for c in without.columns})
    expected = _possible_outputs(kind, params, without)
    try:
        got = _possible_outputs(kind, params, with_them)
    except CoreError as refused:
        # refused before the mechanism: nothing is released, and the officer reads why
        assert "column 'v'" in str(refused) or "column 'age'" in str(refused), refused
        return
    assert got == expected


def test_a_missing_value_does_not_lower_the_keep_probability_of_everyone():
    """The reproduction of issue 20.1: declared categories a, b and one missing value among
    1,001 rows made (missing) a third answer for all records (keep probability 0.731 → 0.576)."""
    df = pd.DataFrame({"v": ["a", "b"] * 500 + [None]})
    params = {"column": "v", "epsilon": 1.0, "categories": ["a", "b"]}
    plan = plan_from_dict(
        {"version": 1, "steps": [{"kind": "ldp_randomized_response", "params": params}]}
    )
    with pytest.raises(
        CoreError, match=r"1 missing value\(s\) and '\(missing\)' is not a declared"
    ):
        apply_plan(df, plan, rng=np.random.default_rng(0), measure_risk=False)
    mapped = plan_from_dict(
        {
            "version": 1,
            "steps": [{"kind": "ldp_randomized_response", "params": {**params, "missing_as": "a"}}],
        }
    )
    out, report = apply_plan(df, mapped, rng=np.random.default_rng(0), measure_risk=False)
    assert report.steps[0]["p_keep"] == pytest.approx(np.e / (np.e + 1))  # 0.731, as without it
    assert out["v"].notna().all()
