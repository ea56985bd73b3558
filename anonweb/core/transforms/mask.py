"""Masking steps: drop, suppress, keyed tokens, codebook substitution, regex masks, date shifts.

Step kinds and parameters:

* ``drop`` — ``{"columns": ["name"]}``.
* ``suppress`` — ``{"columns": [...], "values": [...]}`` replaces those values by ``*``;
  ``{"rare": 5}`` replaces values seen fewer than 5 times; neither: the whole column.
* ``tokenize`` — ``{"columns": ["ssn"], "key": "release-key", "length": 16}``: HMAC-SHA256 under the
  secret named ``key`` (its bytes are passed to ``apply_plan``), hex-truncated. The same value gives
  the same token within a release (same key) and an unrelated one under another key.
* ``substitute`` — ``{"columns": ["city"], "codebook": {"Paris": "C1"}, "unmatched": "keep"}``
  (``"suppress"`` turns values missing from the codebook into ``*``).
* ``regex_mask`` — ``{"columns": [...], "pattern": "...", "replacement": "..."}``, or a preset:
  ``{"preset": "keep_last_digits", "n": 4}`` (``123-45-6789`` -> ``***-**-6789``) or
  ``{"preset": "first_word"}`` (``Ada Lovelace`` -> ``Ada``). Patterns are RE2 syntax, run by
  Google's RE2 engine in time linear in the value's length: backreferences and lookaround are
  refused when the plan is submitted, so no pattern can stall a worker (catastrophic
  backtracking). Replacements refer to groups as ``\\1`` or ``\\g<name>``.
* ``date_shift`` — ``{"columns": ["admitted"], "person": "patient_id", "max_days": 30}``: each
  person's dates move by the same random number of days in ``[-max_days, max_days]``, so
  intervals within a person survive; offsets come from the plan's rng and are not reported.

Missing values stay missing in every step.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from anonweb.core import schema as sch
from anonweb.core.errors import ParameterError
from anonweb.core.release.steps import (
    EVERY_ENGINE,
    IN_MEMORY,
    ROW_ENGINES,
    ROW_WISE,
    UNBOUNDED,
    Plan,
    StepContext,
    StepOutcome,
    register_step,
)

MASK = "*"
SECRET_NAME = sch.string(
    "Name of a secret supplied with the plan (never the key itself)",
    min_length=1,
    max_length=64,
    pattern=r"^[A-Za-z0-9_.-]+$",
)
SECRET_NAME["x-pattern-hint"] = "a secret's name: letters, digits, '_', '.', '-'"


def _columns(params: Mapping[str, Any]) -> list[str]:
    cols = params.get("columns")
    if not isinstance(cols, list) or not cols or not all(isinstance(c, str) for c in cols):
        raise ParameterError("'columns' must be a non-empty list of column names")
    return cols


def _map_distinct(series: pd.Series, func: Callable[[Any], Any]) -> pd.Series:
    """Apply ``func`` once per distinct non-missing value (fast on repetitive columns)."""
    values = pd.unique(series.dropna())
    mapping = {v: func(v) for v in values}
    return series.map(mapping).where(series.notna(), series).astype(object)


@register_step(
    "drop",
    stability=ROW_WISE,
    schema=sch.obj(
        {"columns": sch.columns("Columns to remove from the release")},
        required=["columns"],
        labels={
            "columns": "Columns to drop",
        },
        title="Drop columns",
    ),
    removes=lambda p: list(p["columns"]),
    public_report=("dropped",),
    engines=EVERY_ENGINE,
)
def drop(df: pd.DataFrame, params: Mapping[str, Any], ctx: StepContext) -> StepOutcome:
    return StepOutcome(df.drop(columns=params["columns"]), {"dropped": list(params["columns"])})


def _check_suppress(params: Mapping[str, Any]) -> None:
    _columns(params)
    if "values" in params and not isinstance(params["values"], list):
        raise ParameterError("'values' must be a list")
    rare = params.get("rare")
    if rare is not None and (not isinstance(rare, int) or rare < 1):
        raise ParameterError(f"'rare' must be a positive integer, got {rare!r}")


def _suppress_stability(params: Mapping[str, Any], plan: Plan) -> int | None:
    # Listed values or whole columns are row by row; "rare" depends on how often a value occurs
    # in the other rows, so one person can push a value above or below the limit for everyone.
    return UNBOUNDED if params.get("rare") is not None else ROW_WISE


@register_step(
    "suppress",
    validate=_check_suppress,
    stability=_suppress_stability,
    schema=sch.obj(
        {
            "columns": sch.columns("Columns whose values are replaced by '*'"),
            "values": sch.array(
                sch.one_of(sch.string(max_length=None), sch.number(), sch.boolean()),
                "Only these values (default: every value)",
                min_items=1,
                max_items=100_000,
            ),
            "rare": sch.integer(
                "Only values seen fewer than this many times", minimum=1, maximum=sch.MAX_K
            ),
        },
        required=["columns"],
        at_most_one=["values", "rare"],
        labels={
            "columns": "Columns",
            "values": "Only these values",
            "rare": "Only values rarer than",
        },
        title="Suppress values",
    ),
    recodes=True,
    public_report=(),
    # "rare" counts each value over every row first
    engines=lambda params: IN_MEMORY if params.get("rare") is not None else ROW_ENGINES,
    counts=("suppressed_cells",),
)
def suppress(df: pd.DataFrame, params: Mapping[str, Any], ctx: StepContext) -> StepOutcome:
    out = df.copy()
    counts = {}
    for col in params["columns"]:
        s = df[col]
        if "values" in params:
            hit = s.astype(str).isin({str(v) for v in params["values"]}) & s.notna()
        elif params.get("rare") is not None:
            freq = s.map(s.value_counts(dropna=True))
            hit = s.notna() & (freq < params["rare"])
        else:
            hit = s.notna()
        out[col] = s.astype(object).where(~hit, MASK)
        counts[col] = int(hit.sum())
    return StepOutcome(out, {"suppressed_cells": counts})


def _check_tokenize(params: Mapping[str, Any]) -> None:
    _columns(params)
    if not isinstance(params.get("key"), str):
        raise ParameterError("'key' must name a secret supplied with the plan (not the key itself)")
    length = params.get("length", 16)
    if not isinstance(length, int) or not 8 <= length <= 64:
        raise ParameterError(f"'length' must be an integer between 8 and 64, got {length!r}")


@register_step(
    "tokenize",
    validate=_check_tokenize,
    stability=ROW_WISE,
    schema=sch.obj(
        {
            "columns": sch.columns("Columns replaced by keyed HMAC-SHA256 tokens"),
            "key": SECRET_NAME,
            "length": sch.integer(
                "Hex characters kept of each token", minimum=8, maximum=64, default=16
            ),
        },
        required=["columns", "key"],
        labels={
            "columns": "Columns",
            "key": "Name of the key",
            "length": "Token length (characters)",
        },
        title="Tokenize (keyed pseudonyms)",
    ),
    recodes=True,
    public_report=("columns", "key_name", "length"),
    engines=ROW_ENGINES,
)
def tokenize(df: pd.DataFrame, params: Mapping[str, Any], ctx: StepContext) -> StepOutcome:
    key = ctx.secret(params["key"])
    length = params.get("length", 16)

    def token(value: Any) -> str:
        return hmac.new(key, str(value).encode("utf-8"), hashlib.sha256).hexdigest()[:length]

    out = df.copy()
    for col in params["columns"]:
        out[col] = _map_distinct(df[col], token)
    # the report names the secret, never its bytes
    return StepOutcome(
        out, {"columns": list(params["columns"]), "key_name": params["key"], "length": length}
    )


def _check_substitute(params: Mapping[str, Any]) -> None:
    _columns(params)
    if not isinstance(params.get("codebook"), Mapping):
        raise ParameterError("'codebook' must map original values to replacements")
    if params.get("unmatched", "keep") not in ("keep", "suppress"):
        raise ParameterError("'unmatched' must be 'keep' or 'suppress'")


@register_step(
    "substitute",
    validate=_check_substitute,
    stability=ROW_WISE,
    schema=sch.obj(
        {
            "columns": sch.columns("Columns whose values are looked up in the codebook"),
            "codebook": sch.mapping(
                sch.one_of(sch.string(max_length=None), sch.number(), {"type": "null"}),
                "Original value -> replacement (kept secret: only its size is published)",
                min_properties=1,
                max_properties=1_000_000,
            ),
            "unmatched": sch.string(
                "Values missing from the codebook", enum=("keep", "suppress"), default="keep"
            ),
        },
        required=["columns", "codebook"],
        labels={
            "columns": "Columns",
            "codebook": "Codebook",
            "unmatched": "Values not in the codebook",
        },
        title="Substitute from a codebook",
    ),
    public_report=("codebook_entries",),
    engines=ROW_ENGINES,
    counts=("replaced_cells",),
)
def substitute(df: pd.DataFrame, params: Mapping[str, Any], ctx: StepContext) -> StepOutcome:
    book = {str(k): v for k, v in params["codebook"].items()}
    keep = params.get("unmatched", "keep") == "keep"
    out = df.copy()
    replaced = {}
    for col in params["columns"]:
        s = df[col]
        out[col] = _map_distinct(s, lambda v: book.get(str(v), v if keep else MASK))
        replaced[col] = int(s.astype(str).isin(book.keys()).sum())
    return StepOutcome(out, {"replaced_cells": replaced, "codebook_entries": len(book)})


PRESETS = ("keep_last_digits", "first_word")
MAX_PATTERN = 500
_GROUP_REF = re.compile(r"\\(\d+)|\\g<([^>]*)>")


def _re2_options() -> tuple[Any, Any]:
    import re2

    options = re2.Options()
    options.log_errors = False  # the error comes back as an exception; keep stderr clean
    options.max_mem = 8 << 20  # a pattern whose program needs more is refused
    return re2, options


def compile_pattern(pattern: str) -> Any:
    """The pattern compiled by RE2 (linear-time matching), or a :class:`ParameterError`."""
    re2, options = _re2_options()
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else exc
        raise ParameterError(
            f"the pattern is not accepted ({reason}); patterns use RE2 syntax, without "
            "backreferences or lookaround, so that masking takes time linear in each value"
        ) from None


def _check_regex(params: Mapping[str, Any]) -> None:
    _columns(params)
    preset = params.get("preset")
    if preset is not None:
        if preset not in PRESETS:
            raise ParameterError(f"unknown preset {preset!r} (one of {', '.join(PRESETS)})")
        return
    if not isinstance(params.get("pattern"), str) or not isinstance(params.get("replacement"), str):
        raise ParameterError("regex_mask needs 'pattern' and 'replacement' (or a 'preset')")
    compiled = compile_pattern(params["pattern"])
    for number, name in _GROUP_REF.findall(params["replacement"]):
        if name and name not in compiled.groupindex and not name.isdigit():
            raise ParameterError(f"the replacement refers to a group {name!r} the pattern lacks")
        index = int(number or (name if name.isdigit() else 0))
        if index > compiled.groups:
            raise ParameterError(
                f"the replacement refers to group {index}, but the pattern has "
                f"{compiled.groups} group(s)"
            )


def _keep_last_digits(text: str, n: int, char: str) -> str:
    digits = sum(c.isdigit() for c in text)
    seen, out = 0, []
    for c in text:
        if c.isdigit():
            seen += 1
            out.append(c if seen > digits - n else char)
        else:
            out.append(c)
    return "".join(out)


@register_step(
    "regex_mask",
    validate=_check_regex,
    stability=ROW_WISE,
    schema=sch.obj(
        {
            "columns": sch.columns("Columns to mask"),
            "preset": sch.string("A ready-made mask", enum=PRESETS),
            "n": sch.integer(
                "keep_last_digits: digits kept at the end", minimum=0, maximum=64, default=4
            ),
            "char": sch.string(
                "keep_last_digits: the masking character", min_length=1, max_length=4, default="*"
            ),
            "pattern": sch.string(
                "A regular expression (RE2 syntax)", min_length=1, max_length=MAX_PATTERN
            ),
            "replacement": sch.string("What each match becomes", max_length=MAX_PATTERN),
        },
        required=["columns"],
        exactly_one=[["preset"], ["pattern", "replacement"]],
        labels={
            "columns": "Columns",
            "preset": "Ready-made mask",
            "n": "Digits kept at the end",
            "char": "Masking character",
            "pattern": "Pattern (regular expression)",
            "replacement": "Replace each match with",
        },
        title="Mask with a pattern",
    ),
    recodes=True,
    public_report=("columns", "preset"),
    engines=ROW_ENGINES,
)
def regex_mask(df: pd.DataFrame, params: Mapping[str, Any], ctx: StepContext) -> StepOutcome:
    preset = params.get("preset")
    if preset == "keep_last_digits":
        n, char = int(params.get("n", 4)), params.get("char", MASK)
        func = lambda v: _keep_last_digits(str(v), n, char)  # noqa: E731
    elif preset == "first_word":
        func = lambda v: (str(v).split() or [""])[0]  # noqa: E731
    else:
        rx, repl = compile_pattern(params["pattern"]), params["replacement"]
        func = lambda v: rx.sub(repl, str(v))  # noqa: E731
    out = df.copy()
    for col in params["columns"]:
        out[col] = _map_distinct(df[col], func)
    return StepOutcome(out, {"columns": list(params["columns"]), "preset": preset})


def _check_shift(params: Mapping[str, Any]) -> None:
    _columns(params)
    if not isinstance(params.get("person"), str):
        raise ParameterError("'person' must name the column identifying a person")
    days = params.get("max_days")
    if not isinstance(days, int) or days < 1:
        raise ParameterError(f"'max_days' must be a positive integer, got {days!r}")


# Each person's offset is an independent draw: the rows of one person move, nobody else's.
@register_step(
    "date_shift",
    validate=_check_shift,
    stability=ROW_WISE,
    schema=sch.obj(
        {
            "columns": sch.columns("Date columns to shift"),
            "person": sch.column("The column identifying a person (same shift per person)"),
            "max_days": sch.integer(
                "Largest shift, in days, either way", minimum=1, maximum=36_500
            ),
            "format": sch.string("strftime format of the dates (default: ISO)", max_length=50),
        },
        required=["columns", "person", "max_days"],
        labels={
            "columns": "Date columns",
            "person": "Person column",
            "max_days": "Largest shift (days)",
            "format": "Date format",
        },
        title="Shift dates per person",
    ),
    public_report=("columns", "max_days"),
)
def date_shift(df: pd.DataFrame, params: Mapping[str, Any], ctx: StepContext) -> StepOutcome:
    days = params["max_days"]
    person = df[params["person"]]
    codes, uniques = pd.factorize(person, use_na_sentinel=False)
    offsets = ctx.rng.integers(-days, days + 1, size=len(uniques))
    delta = pd.to_timedelta(offsets[codes], unit="D")
    out = df.copy()
    for col in params["columns"]:
        parsed = pd.to_datetime(df[col], format=params.get("format"), errors="coerce")
        bad = parsed.isna() & df[col].notna()
        if bad.any():
            raise ParameterError(f"column {col!r}: {int(bad.sum())} value(s) are not dates")
        shifted = parsed + delta
        fmt = params.get("format") or "%Y-%m-%d"
        out[col] = shifted.dt.strftime(fmt).where(parsed.notna(), df[col])
    return StepOutcome(
        out, {"columns": list(params["columns"]), "persons": len(uniques), "max_days": days}
    )
