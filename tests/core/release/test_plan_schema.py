"""Plans are refused before they run: every step kind and hierarchy builder declares its
parameters, and a plan is checked against those schemas and the table's columns at submission.

The schemas are JSON Schema documents; ``jsonschema`` (an independent implementation) checks
that they are well formed and agrees with our validator on generated parameters."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import anonweb.core.release.plan as plan_module
from anonweb.core import schema as sch
from anonweb.core.errors import ParameterError, PlanError
from anonweb.core.io.hierarchy_builders import BUILDER_SCHEMAS, hierarchy_spec_errors
from anonweb.core.release.plan import (
    get_step,
    plan_from_dict,
    plan_from_json,
    step_kinds,
    step_schemas,
    validate_plan,
)

COLUMNS = ["name", "ssn", "age", "zip", "sex", "disease", "income"]
TYPES = {c: "numeric" if c in ("age", "income") else "text" for c in COLUMNS}


def refused(doc, **kwargs) -> list[str]:
    kwargs.setdefault("columns", COLUMNS)
    kwargs.setdefault("types", TYPES)
    with pytest.raises(PlanError) as info:
        validate_plan(plan_from_dict(doc), **kwargs)
    return info.value.errors


def one_step(kind, params, **plan):
    return {"steps": [{"kind": kind, "params": params}], **plan}


def _strict_class():
    """A jsonschema validator whose integers and numbers are what ours accept: no booleans,
    no 5.0 for an integer, no infinities."""
    import math

    base = jsonschema.Draft202012Validator
    checker = base.TYPE_CHECKER.redefine(
        "integer", lambda _c, x: isinstance(x, int) and not isinstance(x, bool)
    ).redefine(
        "number",
        lambda _c, x: isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x),
    )
    return jsonschema.validators.extend(base, type_checker=checker)


STRICT = _strict_class()


def _strict(schema):
    return STRICT(schema)


def builtin_kinds() -> list[str]:
    """Step kinds of the core (tests register throwaway kinds of their own)."""
    return [k for k in step_kinds() if get_step(k).func.__module__.startswith("anonweb.core")]


def test_every_step_kind_and_builder_declares_a_schema():
    assert len(builtin_kinds()) >= 19
    for kind in builtin_kinds():
        assert get_step(kind).schema is not None, kind
    assert set(BUILDER_SCHEMAS) == {"interval", "grouping", "mask", "date"}


def test_schemas_are_well_formed_json_schema_and_exported_as_json():
    exported = step_schemas()
    assert json.loads(json.dumps(exported)) == exported
    assert set(exported["steps"]) == set(step_kinds())
    for kind in builtin_kinds():
        entry = exported["steps"][kind]
        jsonschema.Draft202012Validator.check_schema(entry["schema"])
        assert entry["output"] in ("rows", "aggregate", "synthetic"), kind
    for schema in exported["hierarchy_builders"].values():
        jsonschema.Draft202012Validator.check_schema(schema)
    assert exported["steps"]["dp_release"]["privacy_cost"] is True
    assert exported["steps"]["add_noise"]["perturbs"] is True


json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(10**7), 10**7)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | st.sampled_from(["age", "zip", "", "loss", "keep", "x" * 600, "k_anonymity", "interval"])
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=4,
)


def _params(kind_schema):
    names = sorted(kind_schema.get("properties", {}))
    keys = st.sampled_from(names + ["unknown"]) if names else st.just("unknown")
    return st.dictionaries(keys, json_values, max_size=4)


@pytest.mark.parametrize("kind", sorted(builtin_kinds()))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_our_validator_agrees_with_jsonschema(kind, data):
    schema = get_step(kind).schema
    params = data.draw(_params(schema))
    ours = sch.check(schema, params)
    theirs = sorted(_strict(schema).iter_errors(params), key=str)
    assert (not ours) == (not theirs), (params, ours, [e.message for e in theirs])


@pytest.mark.parametrize("builder", sorted(BUILDER_SCHEMAS))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_builder_validator_agrees_with_jsonschema(builder, data):
    schema = BUILDER_SCHEMAS[builder]
    params = data.draw(_params(schema))
    ours = sch.check(schema, params)
    theirs = list(_strict(schema).iter_errors(params))
    assert (not ours) == (not theirs), (params, ours, [e.message for e in theirs])


# -- the defects found in review, each refused with a clear message ------------------------------


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"k": True}, "'k' must be a whole number between 1 and 1,000,000, not true"),
        ({"k": 1e9}, "'k' must be a whole number between 1 and 1,000,000, not 1e+09"),
        ({"k": 1_000_000_000}, "not 1,000,000,000"),
        ({"k": 5.0}, "'k' must be a whole number"),
        ({"k": 5, "suppression": 1.5}, "'suppression' must be a number at least 0 and below 1"),
        ({"k": 5, "metric": "los"}, "did you mean 'loss'"),
        ({"k": 5, "lenght": 3}, "unknown parameter 'lenght'"),
        (
            {"k": 5, "models": [{"model": "distinct_l", "sensitive": "disease", "l": True}]},
            "'models[0].l' must be a whole number",
        ),
    ],
)
def test_search_parameters(params, message):
    errors = refused(
        one_step("optimal_generalization", params, quasi_identifiers=["age"]),
        rows=100,
    )
    assert any(message in e for e in errors), errors
    assert errors[0].startswith("step 1 (optimal_generalization): ")


def test_k_larger_than_the_table_is_refused():
    doc = one_step(
        "optimal_generalization",
        {"k": 500},
        quasi_identifiers=["age"],
        hierarchies={"age": {"builder": "interval", "width": 10}},
    )
    assert refused(doc, rows=100) == [
        "step 1 (optimal_generalization): 'k' is 500 but the table has only 100 rows"
    ]
    validate_plan(plan_from_dict(doc), COLUMNS, types=TYPES, rows=1000)


@pytest.mark.parametrize("epsilon", [709.0, 710, 800, 1e308])
def test_local_dp_epsilon_that_would_overflow_is_refused(epsilon):
    errors = refused(one_step("ldp_randomized_response", {"column": "sex", "epsilon": epsilon}))
    assert "'epsilon' must be a number above 0 and at most 30" in errors[0]


def test_local_dp_at_the_largest_epsilon_runs():
    import numpy as np
    import pandas as pd

    from anonweb.core.release.run import apply_plan

    df = pd.DataFrame({"sex": ["F", "M"] * 10})
    plan = plan_from_dict(
        one_step(
            "ldp_randomized_response", {"column": "sex", "epsilon": 30, "categories": ["F", "M"]}
        )
    )
    out, report = apply_plan(df, plan, rng=np.random.default_rng(0), measure_risk=False)
    assert report.privacy_cost["local_epsilon"] == 30


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"(a)\1", "invalid escape sequence"),
        (r"(?=a)", "invalid perl operator"),
        (r"(?<=a)b", "invalid perl operator"),
        (r"(a", "missing )"),
        ("a" * 600, "at most 500 characters"),
    ],
)
def test_regex_mask_refuses_patterns_that_cannot_run_in_linear_time(pattern, reason):
    errors = refused(
        one_step("regex_mask", {"columns": ["ssn"], "pattern": pattern, "replacement": "x"})
    )
    assert reason in errors[0], errors


def test_a_catastrophic_pattern_for_backtracking_engines_runs_in_linear_time():
    """``(a+)+$`` on 'aaa...ab' takes 2^n steps in Python's re; RE2 answers at once (without
    RE2 this test would run past the suite's timeout)."""
    import numpy as np
    import pandas as pd

    from anonweb.core.release.run import apply_plan

    df = pd.DataFrame({"ssn": ["a" * 5000 + "b", "aaa"]})
    plan = plan_from_dict(
        one_step("regex_mask", {"columns": ["ssn"], "pattern": "(a+)+$", "replacement": "X"})
    )
    out, _ = apply_plan(df, plan, rng=np.random.default_rng(0), measure_risk=False)
    assert out["ssn"].tolist() == ["a" * 5000 + "b", "X"]


def test_replacement_must_fit_the_pattern():
    errors = refused(
        one_step("regex_mask", {"columns": ["ssn"], "pattern": r"(\d+)", "replacement": r"\2"})
    )
    assert "refers to group 2, but the pattern has 1 group(s)" in errors[0]


@pytest.mark.parametrize("depth", [40, 1000, 100_000])
def test_deeply_nested_plans_are_refused_not_crashed(depth):
    text = '{"steps": [{"kind": "drop", "params": {"columns": ' + "[" * depth + "]" * depth + "}}]}"
    with pytest.raises(ParameterError, match="nested more than 32 levels"):
        plan_from_json(text)
    nested: list = []
    for _ in range(depth):
        nested = [nested]
    with pytest.raises(ParameterError, match="nested more than 32 levels"):
        plan_from_dict({"steps": [{"kind": "drop", "params": {"columns": nested}}]})


def test_the_plan_modules_own_example_validates():
    """The docstring's example once used a ``length`` the mask builder does not take."""
    doc = plan_module.__doc__
    block = re.search(r"::\n\n(    \{.*?\n    \})\n", doc, re.S).group(1)
    example = json.loads(block)
    validate_plan(
        plan_from_dict(example),
        ["name", "ssn", "age", "zip", "sex", "race", "disease"],
        files=True,
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"builder": "mask", "length": 5}, "unknown parameter 'length'"),
        ({"builder": "interval"}, "give either 'width' or 'breaks'"),
        ({"builder": "interval", "width": 0}, "'width' must be a number above 0"),
        ({"builder": "interval", "width": 5, "breaks": [1, 2]}, "exactly one of these"),
        ({"builder": "grouping"}, "'group_size' is required"),
        ({"builder": "date", "levels": ["fortnight"]}, "'levels[0]' must be one of"),
        ({"builder": "spiral"}, "unknown builder 'spiral'"),
        ({"rows": [["a", "*"], ["b"]]}, "'rows[1]' needs at least 2 items, not 1"),
        ({"rows": [["a", "x", "*"], ["b", "*"]]}, "rows of different lengths"),
        ({"rows": []}, "'rows' must not be empty"),
        ({"path": "/etc/passwd"}, "upload the hierarchy file"),
        ("/etc/passwd", "upload the hierarchy file"),
        (42, "expected a file path, rows or a builder"),
    ],
)
def test_hierarchy_specs_are_checked_at_submission(spec, message):
    errors = hierarchy_spec_errors("age", spec, files=False)
    assert any(message in e for e in errors), errors
    assert "'age'" in errors[0]


def test_builder_parameters_are_checked_when_built_too():
    import pandas as pd

    from anonweb.core.io.hierarchy_builders import build_hierarchy

    with pytest.raises(ParameterError, match="unknown parameter 'length'"):
        build_hierarchy({"builder": "mask", "length": 5}, pd.Series(["12345"], name="zip"))


def test_columns_follow_the_plan_and_types_are_checked():
    doc = {
        "steps": [
            {"kind": "drop", "params": {"columns": ["name"]}},
            {"kind": "tokenize", "params": {"columns": ["name"], "key": "k"}},
            {"kind": "add_noise", "params": {"columns": ["zip"], "scale": 0.1}},
            {"kind": "suppress", "params": {"columns": ["zipp"]}},
        ]
    }
    assert refused(doc) == [
        "step 2 (tokenize): 'columns[0]': column 'name' was removed by step 1 (drop)",
        "step 3 (add_noise): 'columns[0]': column 'zip' is not numeric",
        "step 4 (suppress): 'columns[0]': unknown column 'zipp' (did you mean 'zip'?)",
    ]


def test_plan_level_problems_are_listed_together():
    doc = {
        "quasi_identifiers": ["age", "disease", "height"],
        "sensitive": ["disease"],
        "hierarchies": {"weight": {"builder": "interval", "width": 5}},
        "steps": [{"kind": "optimal_generalization", "params": {"k": 5}}],
    }
    errors = refused(doc)
    assert "unknown quasi-identifier(s): 'height'" in errors
    assert "hierarchies name unknown column(s): 'weight'" in errors
    assert "a column cannot be both quasi-identifier and sensitive: 'disease'" in errors
    assert any("the search needs a hierarchy for 'age', 'disease', 'height'" in e for e in errors)


def test_generalize_levels_beyond_an_inline_hierarchy_are_refused():
    doc = one_step(
        "generalize",
        {"levels": {"sex": 2}},
        hierarchies={"sex": {"rows": [["F", "*"], ["M", "*"]]}},
    )
    assert "level 2 for 'sex' is out of range (its hierarchy has levels 0..1)" in refused(doc)[0]


def test_every_dp_parameter_is_declared():
    errors = refused(
        one_step("dp_release", {"kind": "count", "epsilon": 1, "epsilonn": 2, "bins": True})
    )
    assert any("unknown parameter 'epsilonn' (did you mean 'epsilon'?)" in e for e in errors)
    assert any("'bins' must be a whole number" in e for e in errors)
    errors = refused(one_step("dp_release", {"kind": "count", "epsilon": 101}))
    assert "'epsilon' must be a number above 0 and at most 100" in errors[0]


def test_a_valid_plan_with_every_family_passes():
    doc = {
        "quasi_identifiers": ["age", "zip"],
        "sensitive": ["disease"],
        "hierarchies": {
            "age": {"builder": "interval", "width": 10, "top": 90},
            "zip": {"builder": "mask"},
        },
        "steps": [
            {"kind": "drop", "params": {"columns": ["name"]}},
            {"kind": "regex_mask", "params": {"columns": ["ssn"], "preset": "keep_last_digits"}},
            {"kind": "add_noise", "params": {"columns": ["income"], "scale": 0.1}},
            {
                "kind": "optimal_generalization",
                "params": {
                    "k": 5,
                    "suppression": 0.02,
                    "models": [{"model": "distinct_l", "sensitive": "disease", "l": 2}],
                },
            },
        ],
    }
    specs = validate_plan(plan_from_dict(doc), COLUMNS, types=TYPES, rows=1000, files=False)
    assert [s.kind for s in specs] == [s["kind"] for s in doc["steps"]]
    dp = {
        "steps": [
            {"kind": "drop", "params": {"columns": ["name"]}},
            {
                "kind": "dp_release",
                "params": {"kind": "histogram", "epsilon": 1, "columns": ["sex"], "delta": 1e-6},
            },
            {"kind": "dp_release", "params": {"kind": "count", "epsilon": 0.5}},
        ]
    }
    validate_plan(plan_from_dict(dp), COLUMNS, types=TYPES, rows=1000, files=False)


def test_each_privacy_model_declares_exactly_its_fields():
    from anonweb.core.models.registry import MODEL_KINDS
    from anonweb.core.models.schemas import MODEL_SCHEMAS

    assert set(MODEL_SCHEMAS) == set(MODEL_KINDS)
    for name, (_cls, fields) in MODEL_KINDS.items():
        assert set(MODEL_SCHEMAS[name]["properties"]) == set(fields), name


def _parameters(schema, path):
    """(path, schema) of every declared parameter, privacy-model variants and list items too."""
    for name, sub in (schema.get("properties") or {}).items():
        yield f"{path}.{name}", sub
        yield from _parameters(sub, f"{path}.{name}")
    if schema.get("x-discriminator"):
        for alt in schema["oneOf"]:
            yield from _parameters(alt, path)
    if isinstance(schema.get("items"), dict):
        yield from _parameters(schema["items"], f"{path}[]")


def test_every_parameter_has_a_label_in_words():
    """Forms show a parameter's label, never its name (``max_nodes``): each one declares it
    beside its schema."""
    from anonweb.core.release.plan import step_schemas

    exported = step_schemas()
    schemas = {f"step {k}": v["schema"] for k, v in exported["steps"].items()}
    schemas.update({f"builder {k}": v for k, v in exported["hierarchy_builders"].items()})
    unlabelled = [
        path
        for where, schema in schemas.items()
        for path, sub in _parameters(schema, where)
        if not path.endswith(".model") and not sub.get("title")
    ]
    assert unlabelled == []
    search = exported["steps"]["optimal_generalization"]["schema"]["properties"]
    assert search["max_nodes"]["title"] == "Most lattice nodes to check"
    dp = exported["steps"]["dp_release"]["schema"]["properties"]
    assert dp["epsilon"]["title"] == "Total ε for this statistic"
    local = exported["steps"]["ldp_randomized_response"]["schema"]["properties"]
    assert local["epsilon"]["title"] == "ε per column per record (local DP)"
    assert "count" not in dp["columns"]["x-when"]["kind"]  # a count takes no column
