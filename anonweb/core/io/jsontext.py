"""JSON text read with a bounded nesting depth.

Python's ``json`` module recurses once per ``[`` or ``{``: a body of a thousand brackets raises
``RecursionError`` deep inside the parser (and a larger one can exhaust the stack). The depth is
therefore measured on the text first, without recursion and in a few vectorised passes, and a
document nested past the limit is refused before ``json.loads`` sees it."""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from anonweb.core.errors import ParameterError

# Deeper than any plan, hierarchy or request anonweb reads (a plan is at most 32 levels).
MAX_JSON_DEPTH = 64

# A JSON string: brackets inside it are text, not nesting.
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)


def json_depth(text: str | bytes) -> int:
    """How deeply the arrays and objects of a JSON text nest (0 for a scalar).

    Brackets inside strings do not count. On text that is not JSON the figure is an upper bound
    (an unclosed string's brackets count), which is enough to refuse it early."""
    raw = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    bare = _STRING.sub(b'""', raw)
    codes = np.frombuffer(bare, dtype=np.uint8)
    steps = np.isin(codes, (ord("["), ord("{"))).astype(np.int32) - np.isin(
        codes, (ord("]"), ord("}"))
    ).astype(np.int32)
    if steps.size == 0:
        return 0
    return max(0, int(np.cumsum(steps).max()))


class _NotJsonNumber(ValueError):
    """NaN or Infinity in a JSON text: JSON has no such number."""


def _no_constant(name: str) -> Any:
    # Python reads NaN and Infinity, which JSON does not have (and no response could echo).
    raise _NotJsonNumber(name)


def json_loads(
    text: str | bytes, *, what: str = "the text", max_depth: int = MAX_JSON_DEPTH
) -> Any:
    """``json.loads`` for untrusted text: a nesting deeper than ``max_depth`` and malformed JSON
    raise :class:`ParameterError` with a sentence naming ``what`` was read."""
    if json_depth(text) > max_depth:
        raise ParameterError(f"{what} is nested more than {max_depth} levels deep")
    try:
        return json.loads(text, parse_constant=_no_constant)
    except _NotJsonNumber as exc:
        raise ParameterError(f"{what} is not valid JSON ({exc} is not a JSON number)") from None
    except json.JSONDecodeError as exc:
        raise ParameterError(
            f"{what} is not valid JSON ({exc.msg}, line {exc.lineno} column {exc.colno})"
        ) from None
    except UnicodeDecodeError:
        raise ParameterError(f"{what} is not UTF-8 text") from None
    except RecursionError:  # not reached within the limit; kept so nothing escapes as a 500
        raise ParameterError(f"{what} is nested too deeply") from None
