"""Local suppression: blanks reach k when a blank matches every value (sdcMicro's NA rule)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from anonweb.core.errors import ParameterError
from anonweb.core.release.plan import plan_from_dict, validate_plan
from anonweb.core.release.run import apply_plan
from anonweb.core.transforms.local_suppression import (
    brute_force_counts,
    local_suppression,
    na_matching_counts,
)


def _table(seed: int, n: int = 40, blanks: int = 6) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "age": rng.integers(0, 4, n),
            "zip": rng.choice(["a", "b", "c"], n),
            "sex": rng.choice(["F", "M"], n),
        }
    ).astype(object)
    for _ in range(blanks):
        df.iat[int(rng.integers(n)), int(rng.integers(3))] = None
    return df


def test_hand_worked_counts():
    df = pd.DataFrame({"a": [1, 1, None, 2], "b": ["x", "y", "x", None]}, dtype=object)
    # row 0 (1,x) matches itself and (·,x); row 2 (·,x) matches (1,x), itself and (2,·)
    assert na_matching_counts(df, quasi_identifiers=["a", "b"]).tolist() == [2, 1, 3, 2]


@pytest.mark.parametrize("seed", range(8))
def test_counts_equal_the_definition_pair_by_pair(seed):
    df = _table(seed, blanks=seed * 3)
    qis = ["age", "zip", "sex"]
    fast = na_matching_counts(df, quasi_identifiers=qis)
    assert fast.tolist() == brute_force_counts(df, quasi_identifiers=qis).tolist()


@pytest.mark.parametrize("seed,k", [(s, k) for s in range(6) for k in (2, 3, 5)])
def test_after_blanking_every_record_matches_k_by_brute_force(seed, k):
    df = _table(seed)
    before = df.copy()
    qis = ["age", "zip", "sex"]
    result = local_suppression(df, quasi_identifiers=qis, k=k, importance={"sex": 5})
    pd.testing.assert_frame_equal(df, before)  # the input is left alone
    out = df.copy()
    for j, q in enumerate(qis):
        out[q] = out[q].where(~result.blanked[:, j], None)
    counts = brute_force_counts(out, quasi_identifiers=qis)
    assert counts.min() >= k
    assert result.smallest_count == counts.min()
    # only recorded cells are blanked, and the plain counts were short of k without them
    assert not (result.blanked & df[qis].isna().to_numpy()).any()
    if result.cells:
        assert na_matching_counts(df, quasi_identifiers=qis).min() < k


def test_the_most_important_column_is_blanked_last():
    df = _table(11, n=60, blanks=0)
    qis = ["age", "zip", "sex"]
    keep_age = local_suppression(df, quasi_identifiers=qis, k=4, importance={"age": 9, "zip": 9})
    keep_sex = local_suppression(df, quasi_identifiers=qis, k=4, importance={"sex": 9, "zip": 9})
    per_age = keep_age.to_dict()["cells_blanked_per_column"]
    per_sex = keep_sex.to_dict()["cells_blanked_per_column"]
    assert per_age["sex"] > 0 and per_age["age"] <= per_sex["age"]
    assert per_sex["age"] > 0 and per_sex["sex"] <= per_age["sex"]


def test_a_k_anonymous_table_is_left_alone():
    df = pd.DataFrame({"a": [1, 1, 2, 2], "b": ["x", "x", "y", "y"]})
    assert local_suppression(df, quasi_identifiers=["a", "b"], k=2).cells == 0


def test_parameters_are_checked():
    df = _table(1)
    with pytest.raises(ParameterError, match="not quasi-identifiers"):
        local_suppression(df, quasi_identifiers=["age"], k=2, importance={"zip": 1})
    with pytest.raises(ParameterError, match="cannot reach"):
        local_suppression(df.head(3), quasi_identifiers=["age"], k=5)
    with pytest.raises(ParameterError):
        local_suppression(df, quasi_identifiers=["age"], k=0)


def test_as_a_plan_step_the_release_blanks_cells_not_records():
    df = _table(3, n=80, blanks=0)
    plan = plan_from_dict(
        {
            "quasi_identifiers": ["age", "zip", "sex"],
            "steps": [{"kind": "local_suppression", "params": {"k": 5, "importance": {"age": 3}}}],
        }
    )
    validate_plan(plan, columns=list(df.columns))
    out, report = apply_plan(df, plan, rng=np.random.default_rng(0), secrets={})
    assert len(out) == len(df)
    counts = brute_force_counts(out, quasi_identifiers=["age", "zip", "sex"])
    assert counts.min() >= 5
    blanked = int(out[["age", "zip", "sex"]].isna().to_numpy().sum())
    step = report.steps[0]
    assert step["kind"] == "local_suppression"
    assert step["cells_blanked"] == blanked > 0
    assert step["cells_blanked_per_column"]["age"] == 0  # the important column kept


def test_the_risk_after_gives_k_with_blanks_matching():
    df = _table(5, n=80, blanks=0)
    plan = plan_from_dict(
        {
            "quasi_identifiers": ["age", "zip", "sex"],
            "steps": [{"kind": "local_suppression", "params": {"k": 4}}],
        }
    )
    out, report = apply_plan(df, plan, rng=np.random.default_rng(0), secrets={})
    after = report.risk_after
    assert after is not None
    assert after["k_blanks_matching"] == report.steps[0]["smallest_count"] >= 4
    assert after["cells_blanked"] == report.steps[0]["cells_blanked"] > 0
    assert "k_blanks_matching" not in (report.risk_before or {})


def test_the_gate_judges_k_with_blanks_matching_after_local_suppression():
    from anonweb.core.release.policy import PolicyThresholds, evaluate_release

    df = _table(5, n=80, blanks=0)
    qis = ["age", "zip", "sex"]
    plan = plan_from_dict(
        {"quasi_identifiers": qis, "steps": [{"kind": "local_suppression", "params": {"k": 4}}]}
    )
    out, _ = apply_plan(df, plan, rng=np.random.default_rng(0), secrets={})
    blank_aware = brute_force_counts(out, quasi_identifiers=qis)
    # the blanked rows form classes of their own when a blank is a value: plain k is smaller
    plain = out.astype(object).fillna("<blank>").groupby(qis).size()
    assert blank_aware.min() >= 4 > int(plain.min())
    tags = dict.fromkeys(qis, "quasi_identifier")
    policy = PolicyThresholds(models=({"model": "k_anonymity", "k": 4},), max_prosecutor_risk=0.25)
    gate = evaluate_release(df, out, plan=plan, tags=tags, thresholds=policy)
    assert not [f for f in gate.findings if f.code in ("risk_k", "risk_prosecutor")]
    assert gate.risk["k"] == int(blank_aware.min())
    assert gate.risk["k_blanks_matching"] is True
    # a policy asking more than the blanks give is still refused, with the blank-aware k
    stricter = PolicyThresholds(models=({"model": "k_anonymity", "k": int(blank_aware.min()) + 1},))
    gate = evaluate_release(df, out, plan=plan, tags=tags, thresholds=stricter)
    finding = next(f for f in gate.findings if f.code == "risk_k")
    assert finding.records == int((blank_aware < blank_aware.min() + 1).sum())
    # the same table released by a plan without local suppression: a blank is a value there
    plain_plan = plan_from_dict({"quasi_identifiers": qis, "steps": []})
    gate = evaluate_release(df, out, plan=plain_plan, tags=tags, thresholds=policy)
    assert any(f.code == "risk_k" for f in gate.findings)
