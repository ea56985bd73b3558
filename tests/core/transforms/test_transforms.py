"""Masking and perturbation steps, run through plans as a release would run them."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from anonweb.core.errors import CoreError, ParameterError
from anonweb.core.release.run import apply_plan
from anonweb.core.release.steps import Plan, Step
from anonweb.core.transforms.perturb import mdav_groups, rank_swap_values

KEY = b"0123456789abcdef-secret"


@pytest.fixture
def people() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "pid": [1, 1, 2, 3, 3, 3],
            "name": [
                "Ada Lovelace",
                "Ada Lovelace",
                "Alan Turing",
                "Grace B. Hopper",
                "Grace B. Hopper",
                None,
            ],
            "ssn": [
                "123-45-6789",
                "123-45-6789",
                "987-65-4321",
                "555-12-0000",
                "555-12-0000",
                "555-12-0000",
            ],
            "city": ["Paris", "Paris", "London", "Rome", "Oslo", "Oslo"],
            "admitted": [
                "2020-01-10",
                "2020-02-10",
                "2021-05-01",
                "2019-12-31",
                "2020-01-05",
                "2020-03-01",
            ],
            "income": [10.0, 20.0, 30.0, 40.0, 50.0, 60.0],
        }
    )


def run(df, kind, params, *, seed=0, secrets=None):
    plan = Plan(steps=(Step(kind, params),))
    return apply_plan(
        df, plan, rng=np.random.default_rng(seed), secrets=secrets or {}, measure_risk=False
    )


def test_drop_and_input_untouched(people):
    before = people.copy()
    out, report = run(people, "drop", {"columns": ["name", "ssn"]})
    assert list(out.columns) == ["pid", "city", "admitted", "income"]
    assert report.steps[0]["dropped"] == ["name", "ssn"]
    pd.testing.assert_frame_equal(people, before)


@pytest.mark.parametrize(
    "params,expected",
    [
        ({"columns": ["city"]}, ["*"] * 6),
        (
            {"columns": ["city"], "values": ["Rome"]},
            ["Paris", "Paris", "London", "*", "Oslo", "Oslo"],
        ),
        ({"columns": ["city"], "rare": 2}, ["Paris", "Paris", "*", "*", "Oslo", "Oslo"]),
    ],
)
def test_suppress(people, params, expected):
    out, _ = run(people, "suppress", params)
    assert out["city"].tolist() == expected


def test_tokens_stable_within_a_key_distinct_across_keys_and_key_not_reported(people):
    out1, report = run(people, "tokenize", {"columns": ["ssn"], "key": "k"}, secrets={"k": KEY})
    out2, _ = run(people, "tokenize", {"columns": ["ssn"], "key": "k"}, secrets={"k": KEY})
    out3, _ = run(
        people, "tokenize", {"columns": ["ssn"], "key": "k"}, secrets={"k": b"another key"}
    )
    assert out1["ssn"].tolist() == out2["ssn"].tolist()
    assert out1["ssn"][0] == out1["ssn"][1] != out1["ssn"][2]
    assert all(a != b for a, b in zip(out1["ssn"], out3["ssn"]))
    assert len(out1["ssn"][0]) == 16 and "6789" not in out1["ssn"][0]
    text = json.dumps(report.to_dict())
    assert KEY.decode() not in text and "0123456789abcdef" not in text


def test_tokenize_needs_the_secret(people):
    with pytest.raises(ParameterError, match="secret 'k'"):
        run(people, "tokenize", {"columns": ["ssn"], "key": "k"})


def test_substitute(people):
    book = {"Paris": "C1", "London": "C2"}
    out, report = run(people, "substitute", {"columns": ["city"], "codebook": book})
    assert out["city"].tolist() == ["C1", "C1", "C2", "Rome", "Oslo", "Oslo"]
    out, _ = run(
        people, "substitute", {"columns": ["city"], "codebook": book, "unmatched": "suppress"}
    )
    assert out["city"].tolist() == ["C1", "C1", "C2", "*", "*", "*"]
    assert report.steps[0]["replaced_cells"] == {"city": 3}


def test_regex_presets_and_pattern(people):
    out, _ = run(people, "regex_mask", {"columns": ["ssn"], "preset": "keep_last_digits", "n": 4})
    assert out["ssn"][0] == "***-**-6789"
    out, _ = run(people, "regex_mask", {"columns": ["name"], "preset": "first_word"})
    assert out["name"].tolist()[:3] == ["Ada", "Ada", "Alan"] and pd.isna(out["name"][5])
    out, _ = run(
        people, "regex_mask", {"columns": ["ssn"], "pattern": r"^\d{3}", "replacement": "XXX"}
    )
    assert out["ssn"][2] == "XXX-65-4321"
    with pytest.raises(ParameterError, match="pattern is not accepted"):
        run(people, "regex_mask", {"columns": ["ssn"], "pattern": "(", "replacement": ""})


def test_date_shift_same_offset_per_person(people):
    out, report = run(
        people, "date_shift", {"columns": ["admitted"], "person": "pid", "max_days": 30}, seed=3
    )
    before = pd.to_datetime(people["admitted"])
    after = pd.to_datetime(out["admitted"])
    shift = (after - before).dt.days
    assert shift.groupby(people["pid"]).nunique().eq(1).all()
    assert shift.abs().max() <= 30
    assert "seed" not in json.dumps(report.to_dict())


def test_add_and_multiplicative_noise(people):
    out, report = run(people, "add_noise", {"columns": ["income"], "scale": 0.1})
    diff = out["income"] - people["income"]
    assert diff.abs().gt(0).all() and diff.abs().max() < 10
    assert report.steps[0]["noise_sd"]["income"] == pytest.approx(0.1 * np.std(people["income"]))
    out, _ = run(people, "multiplicative_noise", {"columns": ["income"], "scale": 0.01})
    assert np.allclose(out["income"] / people["income"], 1, atol=0.06)
    with pytest.raises(ParameterError):
        run(people, "add_noise", {"columns": ["income"]})


def test_noise_is_reproducible_from_the_rng_only(people):
    a, _ = run(people, "add_noise", {"columns": ["income"], "sd": 1.0}, seed=7)
    b, _ = run(people, "add_noise", {"columns": ["income"], "sd": 1.0}, seed=7)
    pd.testing.assert_frame_equal(a, b)


def test_rank_swap_within_p_percent():
    rng = np.random.default_rng(0)
    x = rng.normal(size=1000)
    y = rank_swap_values(x, 5, np.random.default_rng(1))
    assert sorted(x) == sorted(y)
    rank_x = pd.Series(x).rank().to_numpy()
    rank_of_value = dict(zip(x, rank_x))
    moved = np.abs(np.array([rank_of_value[v] for v in y]) - rank_x)
    assert moved.max() <= 50 and (moved > 0).mean() > 0.9


def test_mdav_groups_have_at_least_k():
    x = np.random.default_rng(2).normal(size=(503, 3))
    labels = mdav_groups(x, 5)
    sizes = np.bincount(labels)
    assert sizes.min() >= 5 and sizes.max() < 10
    df = pd.DataFrame(x, columns=["a", "b", "c"])
    out, report = run(df, "microaggregation", {"columns": ["a", "b", "c"], "k": 5})
    assert out.groupby(["a", "b", "c"]).size().min() >= 5
    assert report.steps[0]["smallest_group"] >= 5
    assert np.allclose(out.mean().to_numpy(), df.mean().to_numpy())


def test_pram_matrix_validation_and_effect():
    df = pd.DataFrame({"x": ["a"] * 500 + ["b"] * 500})
    with pytest.raises(ParameterError, match="sums to 0.9"):
        run(df, "pram", {"column": "x", "matrix": {"a": {"a": 0.5, "b": 0.4}, "b": {"b": 1.0}}})
    with pytest.raises(ParameterError, match="no row for: b"):
        run(df, "pram", {"column": "x", "matrix": {"a": {"a": 1.0}}})
    out, report = run(
        df, "pram", {"column": "x", "matrix": {"a": {"a": 0.8, "b": 0.2}, "b": {"b": 1.0}}}
    )
    assert (out["x"][500:] == "b").all()
    assert 50 < (out["x"][:500] == "b").sum() < 150
    out, _ = run(df, "pram", {"column": "x", "p_keep": 1.0})
    assert out["x"].tolist() == df["x"].tolist()


def test_shuffle_keeps_the_multiset(people):
    out, _ = run(people, "shuffle", {"columns": ["income", "city"]}, seed=5)
    assert sorted(out["income"]) == sorted(people["income"])
    pairs = set(zip(people["income"], people["city"]))
    assert set(zip(out["income"], out["city"])) == pairs


def test_bad_plan_fails_before_any_step(people):
    plan = Plan(steps=(Step("drop", {"columns": ["name"]}), Step("nope", {})))
    with pytest.raises(ParameterError, match="unknown step kind 'nope'"):
        apply_plan(people, plan, rng=np.random.default_rng(0))
    plan = Plan(steps=(Step("drop", {"columns": ["missing"]}),))
    with pytest.raises(CoreError, match="missing"):
        apply_plan(people, plan, rng=np.random.default_rng(0))
