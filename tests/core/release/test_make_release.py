"""make_release: the one path from a plan and a table to a release ready to write."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from anonweb.core.conflicts.release import EarlierRelease
from anonweb.core.errors import DataError
from anonweb.core.release.make import make_release, perturbed_columns, synthetic
from anonweb.core.release.plan import get_step, plan_from_dict
from anonweb.core.release.steps import registered_kinds

TAGS = {"id": "identifier", "age": "quasi_identifier", "sex": "quasi_identifier"}
TAGS |= {"income": "sensitive", "weight": "other"}


def table(n: int = 120) -> pd.DataFrame:
    rng = np.random.default_rng(4)
    return pd.DataFrame(
        {
            "id": [f"r{i}" for i in range(n)],
            "age": rng.integers(20, 70, n),
            "sex": rng.choice(["F", "M"], n),
            "income": rng.integers(1000, 5000, n).astype(float),
            "weight": rng.normal(70, 10, n).round(1),
        }
    )


PLAN = {
    "quasi_identifiers": ["age", "sex"],
    "sensitive": ["income"],
    "attacks": {"holdout": 0.25, "targets": 50},
    "steps": [
        {"kind": "drop", "params": {"columns": ["id"]}},
        {"kind": "microaggregation", "params": {"columns": ["income"], "k": 4}},
        {"kind": "add_noise", "params": {"columns": ["weight"], "scale": 0.1}},
    ],
}


def test_the_registry_says_which_steps_perturb_and_which_make_records():
    for kind in registered_kinds():
        spec = get_step(kind)
        plan = plan_from_dict({"steps": [{"kind": kind, "params": {"columns": ["x"]}}]})
        assert (perturbed_columns(plan) == ["x"]) is spec.perturbs
        assert synthetic(plan) is (spec.output == "synthetic")


def test_a_release_of_a_plan_with_a_control():
    df = table()
    before = df.copy()
    made = make_release(df, plan_from_dict(PLAN), rng=np.random.default_rng(1), tags=TAGS)
    pd.testing.assert_frame_equal(df, before)  # the input is untouched
    assert made.control_rows is not None and len(made.control_rows) == 30
    assert len(made.frame) == len(made.source_rows) == 90
    # the lineage names rows of the whole table, never a control row
    assert not set(made.source_rows) & set(made.control_rows)
    assert set(made.source_rows) | set(made.control_rows) == set(range(120))
    # the published weights are the whole table's rows plus noise, row by row
    drift = made.frame["weight"].to_numpy() - df["weight"].to_numpy()[made.source_rows]
    assert np.abs(drift).max() < 10
    assert made.report["intruder"]["columns"] == ["income", "weight"]
    assert made.report["attacks"]["control_records"] == 30
    (income,) = made.aggregates
    assert income.column == "income" and (income.groups[made.control_rows] == -1).all()
    assert made.lineage()["aggregates"][0]["records"] == 90
    assert made.conflicts is not None and made.conflicts.public == []
    assert made.gate.thresholds.k == 5 and "risk_after" in made.report


def test_the_same_randomness_makes_the_same_release():
    plan = plan_from_dict(PLAN)
    one = make_release(table(), plan, rng=np.random.default_rng(9), tags=TAGS)
    two = make_release(table(), plan, rng=np.random.default_rng(9), tags=TAGS)
    pd.testing.assert_frame_equal(one.frame, two.frame)
    assert one.gate.to_dict() == two.gate.to_dict()
    assert one.report["attacks"] == two.report["attacks"]


def test_kept_order_is_attacked_and_checked_like_a_shuffled_release():
    plan = plan_from_dict({**PLAN, "attacks": {}})
    made = make_release(table(), plan, rng=np.random.default_rng(2), tags=TAGS, keep_order=True)
    pd.testing.assert_frame_equal(made.frame, made.released)  # source order, as asked
    assert (made.source_rows == np.arange(120)).all()
    assert "attacks" in made.report and made.conflicts is not None


def test_earlier_releases_are_read_once_the_plan_has_run():
    calls = []

    def earlier():
        calls.append(True)
        return []

    make_release(
        table(), plan_from_dict(PLAN), rng=np.random.default_rng(3), tags=TAGS, earlier=earlier
    )
    assert calls == [True]


def test_an_unreadable_earlier_release_stops_the_conflict_check():
    broken = EarlierRelease("release 1", "approved", 1, error="no such file")
    with pytest.raises(DataError, match="release 1 cannot be read"):
        make_release(
            table(),
            plan_from_dict(PLAN),
            rng=np.random.default_rng(3),
            tags=TAGS,
            earlier=[broken],
        )
