"""Release plans: serialisation, validation, the step registry and the plan report."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anonweb.core.errors import HierarchyError, ParameterError
from anonweb.core.io.hierarchy_builders import (
    date_hierarchy,
    grouping_hierarchy,
    interval_hierarchy,
    mask_hierarchy,
    resolve_hierarchies,
)
from anonweb.core.release.plan import (
    get_step,
    plan_from_dict,
    plan_from_json,
    plan_to_dict,
    plan_to_json,
    step_kinds,
)
from anonweb.core.release.run import apply_plan
from anonweb.core.release.steps import Plan, Step, StepOutcome, register_step

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**6), 10**6)
    | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
names = st.lists(st.text(min_size=1, max_size=6), max_size=4)
plans = st.builds(
    Plan,
    steps=st.lists(
        st.builds(
            Step,
            kind=st.sampled_from(["drop", "tokenize", "dp_count"]),
            params=st.dictionaries(st.text(max_size=6), json_values, max_size=4),
        ),
        max_size=4,
    ).map(tuple),
    quasi_identifiers=names.map(tuple),
    sensitive=names.map(tuple),
    hierarchies=st.dictionaries(
        st.text(min_size=1, max_size=5),
        st.fixed_dictionaries({"path": st.text(max_size=10)}),
        max_size=3,
    ),
)


@settings(max_examples=100, deadline=None)
@given(plan=plans)
def test_plan_round_trip(plan):
    assert plan_from_dict(plan_to_dict(plan)) == plan
    assert plan_from_json(plan_to_json(plan)) == plan
    assert json.loads(plan_to_json(plan_from_json(plan_to_json(plan)))) == json.loads(
        plan_to_json(plan)
    )


@pytest.mark.parametrize(
    "bad,message",
    [
        ([], "JSON object"),
        ({"steps": {}}, "must be a list"),
        ({"steps": [{"params": {}}]}, "'kind'"),
        ({"version": 9}, "version"),
        ({"colour": 1}, "unknown plan field"),
        ({"quasi_identifiers": "age"}, "list of column names"),
    ],
)
def test_malformed_plans(bad, message):
    with pytest.raises(ParameterError, match=message):
        plan_from_dict(bad)


def test_builtin_steps_registered():
    kinds = set(step_kinds())
    assert {
        "drop",
        "suppress",
        "tokenize",
        "substitute",
        "regex_mask",
        "date_shift",
        "generalize",
        "optimal_generalization",
        "mondrian",
        "add_noise",
        "multiplicative_noise",
        "rank_swap",
        "microaggregation",
        "pram",
        "shuffle",
    } <= kinds


def test_registering_a_step_with_privacy_cost():
    def check(params):
        if params.get("epsilon", 0) <= 0:
            raise ParameterError("epsilon must be positive")

    @register_step(
        "test_noop_cost", validate=check, privacy_cost=lambda p: {"epsilon": p["epsilon"]}
    )
    def noop(df, params, ctx):
        return StepOutcome(df.copy(), {"rows": len(df)})

    df = pd.DataFrame({"a": [1, 2]})
    plan = Plan(
        steps=(Step("test_noop_cost", {"epsilon": 0.5}), Step("test_noop_cost", {"epsilon": 0.25}))
    )
    out, report = apply_plan(df, plan, rng=np.random.default_rng(0), measure_risk=False)
    assert report.privacy_cost == {"epsilon": 0.75}
    assert report.steps[0]["privacy_cost"] == {"epsilon": 0.5}
    assert get_step("test_noop_cost").func is noop
    with pytest.raises(ParameterError, match="step 1 \\(test_noop_cost\\): epsilon"):
        apply_plan(df, Plan(steps=(Step("test_noop_cost", {}),)), rng=np.random.default_rng(0))


def test_plan_with_search_reports_levels_and_risk_before_and_after(fixtures_dir):
    df = pd.read_csv(fixtures_dir / "test2.csv", sep=";")
    plan = plan_from_dict(
        {
            "quasi_identifiers": ["ZIPCode", "Age"],
            "sensitive": ["Disease"],
            "hierarchies": {
                "ZIPCode": {"path": str(fixtures_dir / "test2_hierarchy_ZIPCode.csv")},
                "Age": {"path": str(fixtures_dir / "test2_hierarchy_Age.csv")},
            },
            "steps": [
                {
                    "kind": "optimal_generalization",
                    "params": {
                        "k": 3,
                        "models": [{"model": "distinct_l", "sensitive": "Disease", "l": 2}],
                    },
                }
            ],
        }
    )
    out, report = apply_plan(df, plan, rng=np.random.default_rng(0))
    step = report.steps[0]
    assert step["k"] >= 3 and set(step["levels"]) == {"ZIPCode", "Age"}
    assert out.groupby(["ZIPCode", "Age"])["Disease"].nunique().min() >= 2
    data = report.to_dict()
    json.dumps(data)
    if data["risk_before"] is not None:  # the risk module is present
        assert data["risk_before"]["k"] == 1 and data["risk_after"]["k"] >= 3


def test_generalize_step_with_builders():
    df = pd.DataFrame({"age": [23, 37, 41, 58], "zip": ["53715", "53710", "53706", "53703"]})
    plan = plan_from_dict(
        {
            "hierarchies": {
                "age": {"builder": "interval", "width": 10},
                "zip": {"builder": "mask"},
            },
            "steps": [{"kind": "generalize", "params": {"levels": {"age": 1, "zip": 2}}}],
        }
    )
    out, report = apply_plan(df, plan, rng=np.random.default_rng(0), measure_risk=False)
    assert out["age"].tolist() == ["[20, 30[", "[30, 40[", "[40, 50[", "[50, 60["]
    assert out["zip"].tolist() == ["537**"] * 4
    assert report.steps[0]["levels"] == {"age": 1, "zip": 2}


def test_interval_builder_fixed_width_breaks_and_coding():
    h = interval_hierarchy([5, 17, 25, 44, 90, 101], breaks=[18, 30, 65], bottom=18, top=65)
    m = h.mapping(1)
    assert m["5"] == "<18" and m["17"] == "<18" and m["25"] == "[18, 30[" and m["44"] == "[30, 65["
    assert m["90"] == ">=65" and h.mapping(h.height - 1)["44"] == "*"
    h = interval_hierarchy(range(0, 100), width=10, fanout=2)
    assert (
        h.mapping(1)["37"] == "[30, 40["
        and h.mapping(2)["37"] == "[20, 40["
        and h.mapping(3)["37"] == "[0, 40["
    )


@pytest.mark.parametrize(
    "spec,outside",
    [
        ({"breaks": [18, 30, 45, 65]}, {"10": "<18", "17": "<18", "65": ">=65", "99": ">=65"}),
        ({"width": 10, "start": 20}, {"10": "<20", "17": "<20", "18": "<20"}),
    ],
)
def test_values_outside_the_intervals_get_open_ended_labels_at_every_level(spec, outside):
    """Age 99 is not in "[45, 65[" and age 10 is not in "[18, 30[": values that no interval
    contains are coded open-ended, as bottom and top coding are, and the hierarchy stays monotone
    (each label at one level maps to one label at the next)."""
    values = [10, 17, 18, 29, 30, 44, 45, 64, 65, 99]
    h = interval_hierarchy(values, **spec)
    for level in range(1, h.height - 1):
        mapping = h.mapping(level)
        assert {v: mapping[v] for v in outside} == outside
        # Every other value lies in the interval its label names.
        for value, label in mapping.items():
            if value not in outside:
                lo, hi = (float(x) for x in label.strip("[").rstrip("[").split(", "))
                assert lo <= float(value) < hi, (level, value, label)
    for level in range(1, h.height - 1):
        upward: dict[str, set[str]] = {}
        for row in h.rows:
            upward.setdefault(row[level], set()).add(row[level + 1])
        assert all(len(parents) == 1 for parents in upward.values()), upward


def test_breaks_through_a_plan_publish_out_of_range_ages_as_open_intervals():
    df = pd.DataFrame({"age": [10, 25, 50, 99]})
    plan = plan_from_dict(
        {
            "version": 1,
            "hierarchies": {"age": {"builder": "interval", "breaks": [18, 30, 45, 65]}},
            "steps": [{"kind": "generalize", "params": {"levels": {"age": 1}}}],
        }
    )
    out, _ = apply_plan(df, plan, rng=np.random.default_rng(0), measure_risk=False)
    assert out["age"].tolist() == ["<18", "[18, 30[", "[45, 65[", ">=65"]


def test_other_builders():
    g = grouping_hierarchy(["a", "b", "c", "d", "e"], group_size=2)
    assert g.mapping(1) == {"a": "a-b", "b": "a-b", "c": "c-d", "d": "c-d", "e": "e"}
    assert g.mapping(2)["e"] == "e" and g.mapping(2)["a"] == "a-d"
    z = mask_hierarchy(["53715", "53710"])
    assert [z.mapping(i)["53715"] for i in range(z.height)] == [
        "53715",
        "5371*",
        "537**",
        "53***",
        "5****",
        "*",
    ]
    d = date_hierarchy(["2021-03-14", "1999-12-31"])
    assert [d.mapping(i)["2021-03-14"] for i in range(d.height)] == [
        "2021-03-14",
        "2021-03",
        "2021",
        "2020s",
        "*",
    ]
    with pytest.raises(HierarchyError, match="not dates"):
        date_hierarchy(["2021-03-14", "soon"])


def test_hierarchy_that_misses_values_lists_them():
    df = pd.DataFrame({"sex": ["F", "M", "X", "Y"]})
    hs = resolve_hierarchies({"sex": {"rows": [["F", "*"], ["M", "*"]]}}, df)
    with pytest.raises(HierarchyError, match="does not cover 2 value\\(s\\): 'X', 'Y'"):
        hs["sex"].validate_covers(df["sex"])


def test_mondrian_step_through_a_plan():
    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {
            "age": rng.integers(18, 90, 300),
            "income": rng.integers(0, 10**5, 300),
            "disease": rng.choice(["a", "b"], 300),
        }
    )
    plan = plan_from_dict(
        {
            "quasi_identifiers": ["age", "income"],
            "steps": [{"kind": "mondrian", "params": {"k": 7}}],
        }
    )
    out, report = apply_plan(df, plan, rng=np.random.default_rng(0), measure_risk=False)
    assert out.groupby(["age", "income"]).size().min() >= 7
    assert report.steps[0]["smallest_partition"] >= 7 and out["disease"].equals(df["disease"])


def test_hierarchical_t_closeness_takes_the_plan_hierarchy(fixtures_dir):
    df = pd.read_csv(fixtures_dir / "test2.csv", sep=";")
    h = {
        c: {"path": str(fixtures_dir / f"test2_hierarchy_{c}.csv")}
        for c in ("ZIPCode", "Age", "Disease")
    }
    plan = plan_from_dict(
        {
            "quasi_identifiers": ["ZIPCode", "Age"],
            "sensitive": ["Disease"],
            "hierarchies": h,
            "steps": [
                {
                    "kind": "optimal_generalization",
                    "params": {
                        "k": 3,
                        "models": [
                            {
                                "model": "t_closeness",
                                "sensitive": "Disease",
                                "t": 0.3,
                                "distance": "hierarchical",
                            }
                        ],
                    },
                }
            ],
        }
    )
    out, report = apply_plan(df, plan, rng=np.random.default_rng(0), measure_risk=False)
    assert report.steps[0]["k"] >= 3
    assert any("hierarchical" in m for m in report.steps[0]["models"])


def test_unknown_privacy_model_fails_validation():
    plan = plan_from_dict(
        {
            "quasi_identifiers": ["a"],
            "hierarchies": {"a": {"rows": [["1", "*"]]}},
            "steps": [
                {
                    "kind": "optimal_generalization",
                    "params": {"k": 2, "models": [{"model": "magic"}]},
                }
            ],
        }
    )
    with pytest.raises(ParameterError, match="unknown model 'magic'"):
        apply_plan(pd.DataFrame({"a": ["1", "1"]}), plan, rng=np.random.default_rng(0))


def test_search_models_may_be_spelled_with_kind_and_are_stored_as_model() -> None:
    """The documented plan form ``{"kind": "k_map", "k": 5}`` reads as ``{"model": ...}``, and
    average risk's ``max`` as its threshold; the stored plan holds the one canonical form."""
    from anonweb.core.release.plan import plan_from_dict, plan_to_dict

    plan = plan_from_dict(
        {
            "quasi_identifiers": ["age"],
            "steps": [
                {
                    "kind": "optimal_generalization",
                    "params": {
                        "k": 2,
                        "models": [
                            {"kind": "average_risk", "max": 0.05},
                            {"kind": "delta_presence", "min": 0.0, "max": 0.5},
                            {"kind": "beta_likeness", "sensitive": "disease", "beta": 1.0},
                            {"model": "distinct_l", "sensitive": "disease", "l": 2},
                        ],
                    },
                }
            ],
        }
    )
    models = plan_to_dict(plan)["steps"][0]["params"]["models"]
    assert models == [
        {"model": "average_risk", "threshold": 0.05},
        {"model": "delta_presence", "min": 0.0, "max": 0.5},
        {"model": "beta_likeness", "sensitive": "disease", "beta": 1.0},
        {"model": "distinct_l", "sensitive": "disease", "l": 2},
    ]


def test_a_kind_spelling_of_an_unknown_model_is_refused_by_name() -> None:
    import pytest

    from anonweb.core.errors import ParameterError
    from anonweb.core.models.registry import model_from_dict

    with pytest.raises(ParameterError, match="unknown privacy model 'k_mapp'"):
        model_from_dict({"kind": "k_mapp", "k": 5})
