"""JSON from outside is measured before it is parsed: nesting past the limit is refused with a
sentence, never a RecursionError, and NaN or Infinity (not JSON) are refused too."""

from __future__ import annotations

import json
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from anonweb.core.errors import ParameterError
from anonweb.core.io.jsontext import MAX_JSON_DEPTH, json_depth, json_loads
from anonweb.core.schema import depth

_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab,:'),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=20,
)


@given(_VALUES)
def test_the_depth_measured_on_the_text_is_the_structure_s(value):
    """Brackets inside strings (escaped quotes included) do not count."""
    assert json_depth(json.dumps(value)) == depth(value, limit=10**6)


@pytest.mark.parametrize("levels", [1_000, 200_000])
def test_deep_nesting_is_refused_quickly_with_a_sentence(levels):
    started = time.perf_counter()
    with pytest.raises(ParameterError, match="the plan is nested more than 64 levels deep"):
        json_loads("[" * levels + "]" * levels, what="the plan")
    assert time.perf_counter() - started < 1


def test_nesting_up_to_the_limit_is_read():
    text = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert json_depth(text) == MAX_JSON_DEPTH
    assert json.dumps(json_loads(text)) == text.replace("][", "], [")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{not json", "the body is not valid JSON (Expecting property name"),
        ('{"a": NaN}', "the body is not valid JSON (NaN is not a JSON number)"),
        ("[-Infinity]", "the body is not valid JSON (-Infinity is not a JSON number)"),
        (b'["\xc3"]', "the body is not UTF-8 text"),
    ],
)
def test_text_that_is_not_json_is_refused_with_a_sentence(text, message):
    with pytest.raises(ParameterError) as refused:
        json_loads(text, what="the body")
    assert str(refused.value).startswith(message)
