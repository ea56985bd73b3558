"""Declared parameter schemas: what a plan step or a hierarchy builder accepts, checked before
any data is read.

A schema is a plain JSON Schema document (a subset of draft 2020-12), so it can be exported as
it is (to build forms, to document an API) and read by any JSON Schema tool. Three extension
keywords carry what JSON Schema cannot say about a table:

* ``"x-column": "reads" | "writes"`` — the string (or each item of the array) names a column of
  the table; ``writes`` marks the columns the step changes (used to follow what happened to an
  identifier), ``reads`` those it only reads;
* ``"x-column-type": "numeric"`` — the column must hold numbers;
* ``"x-keys": "reads" | "writes"`` — the keys of the object are column names;
* ``"x-discriminator": "model"`` — a ``oneOf`` of object variants chosen by that property.

:func:`check` validates a value and returns every problem as a sentence a privacy officer can
read (``'k' must be a whole number, not true``); :func:`columns_named` lists the columns a value
names, by role. Numbers must be finite, integers must be whole numbers that are not booleans,
and objects refuse properties they do not declare (with a suggestion for a near miss).
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Schema = dict[str, Any]

# Bounds shared by many steps: large enough for any real table, small enough to refuse typos
# such as k = 1e9 before a worker spends hours on them.
MAX_K = 1_000_000
MAX_TEXT = 500


# -- building schemas ------------------------------------------------------------------------


def _doc(schema: Schema, description: str, default: Any = None, title: str = "") -> Schema:
    if title:
        schema["title"] = title
    if description:
        schema["description"] = description
    if default is not None:
        schema["default"] = default
    return schema


def integer(
    description: str = "",
    *,
    minimum: int | None = None,
    maximum: int | None = None,
    default: int | None = None,
    title: str = "",
) -> Schema:
    s: Schema = {"type": "integer"}
    if minimum is not None:
        s["minimum"] = minimum
    if maximum is not None:
        s["maximum"] = maximum
    return _doc(s, description, default, title)


def number(
    description: str = "",
    *,
    minimum: float | None = None,
    maximum: float | None = None,
    exclusive_minimum: float | None = None,
    exclusive_maximum: float | None = None,
    default: float | None = None,
    title: str = "",
) -> Schema:
    s: Schema = {"type": "number"}
    for key, value in (
        ("minimum", minimum),
        ("maximum", maximum),
        ("exclusiveMinimum", exclusive_minimum),
        ("exclusiveMaximum", exclusive_maximum),
    ):
        if value is not None:
            s[key] = value
    return _doc(s, description, default, title)


def string(
    description: str = "",
    *,
    enum: Sequence[str] | None = None,
    min_length: int | None = None,
    max_length: int | None = MAX_TEXT,
    pattern: str | None = None,
    default: str | None = None,
    title: str = "",
) -> Schema:
    s: Schema = {"type": "string"}
    if enum is not None:
        s["enum"] = list(enum)
    if min_length is not None:
        s["minLength"] = min_length
    if max_length is not None and enum is None:
        s["maxLength"] = max_length
    if pattern is not None:
        s["pattern"] = pattern
    return _doc(s, description, default, title)


def boolean(description: str = "", *, default: bool | None = None, title: str = "") -> Schema:
    return _doc({"type": "boolean"}, description, default, title)


def column(
    description: str = "", *, role: str = "reads", numeric: bool = False, title: str = ""
) -> Schema:
    s: Schema = {"type": "string", "minLength": 1, "x-column": role}
    if numeric:
        s["x-column-type"] = "numeric"
    return _doc(s, description, None, title)


def columns(
    description: str = "",
    *,
    role: str = "writes",
    numeric: bool = False,
    min_items: int = 1,
    title: str = "",
) -> Schema:
    s: Schema = {
        "type": "array",
        "items": column(role=role, numeric=numeric),
        "minItems": min_items,
        "uniqueItems": True,
    }
    return _doc(s, description, None, title)


def array(
    items: Schema,
    description: str = "",
    *,
    min_items: int | None = None,
    max_items: int | None = None,
    unique: bool = False,
    default: Any = None,
    title: str = "",
) -> Schema:
    s: Schema = {"type": "array", "items": items}
    if min_items is not None:
        s["minItems"] = min_items
    if max_items is not None:
        s["maxItems"] = max_items
    if unique:
        s["uniqueItems"] = True
    return _doc(s, description, default, title)


def mapping(
    values: Schema,
    description: str = "",
    *,
    keys: str | None = None,
    min_properties: int | None = None,
    max_properties: int | None = None,
    title: str = "",
) -> Schema:
    """An object whose keys are free (column names when ``keys`` is a column role)."""
    s: Schema = {"type": "object", "additionalProperties": values}
    if keys is not None:
        s["x-keys"] = keys
    if min_properties is not None:
        s["minProperties"] = min_properties
    if max_properties is not None:
        s["maxProperties"] = max_properties
    return _doc(s, description, None, title)


def one_of(*alternatives: Schema, description: str = "", title: str = "") -> Schema:
    """A value of any one of several shapes (``"bounds": [0, 1]`` or ``"0,1"``)."""
    return _doc({"anyOf": list(alternatives)}, description, None, title)


def obj(
    properties: Mapping[str, Schema],
    *,
    required: Iterable[str] = (),
    exactly_one: Sequence[Sequence[str]] = (),
    at_most_one: Sequence[str] = (),
    description: str = "",
    title: str = "",
    labels: Mapping[str, str] | None = None,
    **extra: Any,
) -> Schema:
    """An object with declared properties and nothing else.

    ``exactly_one`` lists alternative groups of properties of which exactly one group must be
    given (``[["scale"], ["sd"]]``); ``at_most_one`` names properties that exclude each other.
    ``labels`` gives each property the short name a form shows for it (its ``title``; the
    ``description`` is the help text beside it).
    """
    props = dict(properties)
    for name, label in (labels or {}).items():
        if name not in props:
            raise ValueError(f"a label for the undeclared property {name!r}")
        props[name] = {**props[name], "title": label}
    s: Schema = {
        "type": "object",
        "properties": props,
        "additionalProperties": False,
    }
    req = list(required)
    if req:
        s["required"] = req
    if exactly_one:
        s["oneOf"] = [{"required": list(group)} for group in exactly_one]
    if at_most_one:
        s["not"] = {"anyOf": _pairs(at_most_one)}
    s.update(extra)
    return _doc(s, description, None, title)


def _pairs(names: Sequence[str]) -> list[Schema]:
    return [{"required": [a, b]} for i, a in enumerate(names) for b in names[i + 1 :] if a != b]


def variants(discriminator: str, options: Mapping[str, Schema], description: str = "") -> Schema:
    """Objects of several kinds told apart by one property (``{"model": "distinct_l", ...}``)."""
    alts = []
    for name, schema in options.items():
        s = dict(schema)
        props = {discriminator: {"const": name}, **s.get("properties", {})}
        s["properties"] = props
        s["required"] = [discriminator, *[r for r in s.get("required", []) if r != discriminator]]
        alts.append(s)
    return _doc(
        {"type": "object", "x-discriminator": discriminator, "oneOf": alts},
        description,
    )


# -- checking values -------------------------------------------------------------------------


@dataclass
class Context:
    """What is known about the table when a plan is checked (all optional)."""

    columns: Sequence[str] | None = None
    types: Mapping[str, str] | None = None  # column -> "numeric" | "text"
    removed: Mapping[str, str] | None = None  # column -> what removed it
    errors: list[str] = field(default_factory=list)
    retyped: Mapping[str, str] | None = None  # column -> what turned it into text labels


def check(
    schema: Schema,
    value: Any,
    *,
    name: str = "",
    columns: Sequence[str] | None = None,
    types: Mapping[str, str] | None = None,
    removed: Mapping[str, str] | None = None,
    retyped: Mapping[str, str] | None = None,
) -> list[str]:
    """Every problem of ``value`` against ``schema``, as readable sentences (empty when fine).

    With ``columns``, every column the value names must be one of them (``removed`` says why a
    known column is no longer there); with ``types``, numeric columns must be numeric
    (``retyped`` says which step turned a column into text labels)."""
    ctx = Context(columns=columns, types=types, removed=removed, retyped=retyped)
    _check(schema, value, name, ctx)
    return ctx.errors


def _label(path: str) -> str:
    return f"{path!r}" if path else "the value"


def _json(value: Any) -> str:
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else repr(value[:37] + "...")
    if isinstance(value, float) and value.is_integer() and abs(value) >= 1e6:
        return f"{value:g}"
    if isinstance(value, int) and abs(value) >= 10_000:
        return f"{value:,}"
    if isinstance(value, (list, dict)):
        return "a list" if isinstance(value, list) else "an object"
    return repr(value)


_TYPE_WORDS = {
    "integer": "a whole number",
    "number": "a number",
    "string": "text",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}


def _is_type(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "array":
        return isinstance(value, list | tuple)
    if kind == "object":
        return isinstance(value, Mapping)
    if kind == "null":
        return value is None
    raise ValueError(f"unknown schema type {kind!r}")


def _num(x: float) -> str:
    """1000000 as 1,000,000 and 0.5 as 0.5 (never 1e+06)."""
    if float(x).is_integer() and abs(x) < 1e16:
        return f"{int(x):,}"
    return f"{x:g}"


def _range_words(schema: Schema) -> str:
    lo, hi = schema.get("minimum"), schema.get("maximum")
    xlo, xhi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    parts = []
    if lo is not None and hi is not None:
        return f" between {_num(lo)} and {_num(hi)}"
    if lo is not None:
        parts.append(f"at least {_num(lo)}")
    if xlo is not None:
        parts.append(f"above {_num(xlo)}")
    if hi is not None:
        parts.append(f"at most {_num(hi)}")
    if xhi is not None:
        parts.append(f"below {_num(xhi)}")
    return (" " + " and ".join(parts)) if parts else ""


def describe(schema: Schema) -> str:
    """A short phrase for what the schema accepts (``a whole number between 1 and 100``)."""
    if "const" in schema:
        return _json(schema["const"])
    if "enum" in schema:
        return "one of " + ", ".join(_json(v) for v in schema["enum"])
    if "anyOf" in schema:
        return " or ".join(describe(s) for s in schema["anyOf"])
    kinds = schema.get("type")
    if kinds is None:
        return "a value"
    kinds = [kinds] if isinstance(kinds, str) else list(kinds)
    words = " or ".join(_TYPE_WORDS[k] for k in kinds)
    if "x-column" in schema:
        words = "a column name"
    if kinds == ["array"] and "items" in schema and "x-column" in schema["items"]:
        words = "a list of column names"
    if any(k in ("integer", "number") for k in kinds):
        words += _range_words(schema)
    return words


def _check(schema: Schema, value: Any, path: str, ctx: Context) -> None:
    before = len(ctx.errors)
    if "anyOf" in schema:
        for alt in schema["anyOf"]:
            trial = Context(ctx.columns, ctx.types, ctx.removed, retyped=ctx.retyped)
            _check(alt, value, path, trial)
            if not trial.errors:
                return
        ctx.errors.append(f"{_label(path)} must be {describe(schema)}, not {_json(value)}")
        return
    if "const" in schema and value != schema["const"]:
        ctx.errors.append(f"{_label(path)} must be {_json(schema['const'])}, not {_json(value)}")
        return
    kinds = schema.get("type")
    if kinds is not None:
        kinds = [kinds] if isinstance(kinds, str) else list(kinds)
        if not any(_is_type(value, k) for k in kinds):
            ctx.errors.append(f"{_label(path)} must be {describe(schema)}, not {_json(value)}")
            return
    if "enum" in schema and value not in schema["enum"]:
        close = difflib.get_close_matches(str(value), [str(v) for v in schema["enum"]], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        ctx.errors.append(f"{_label(path)} must be {describe(schema)}, not {_json(value)}{hint}")
        return
    if isinstance(value, int | float) and not isinstance(value, bool):
        _check_number(schema, value, path, ctx)
    elif isinstance(value, str):
        _check_string(schema, value, path, ctx)
    elif isinstance(value, list | tuple):
        _check_array(schema, value, path, ctx)
    elif isinstance(value, Mapping):
        _check_object(schema, value, path, ctx)
    if len(ctx.errors) == before and "x-column" in schema and isinstance(value, str):
        _check_column(schema, value, path, ctx)


def _check_number(schema: Schema, value: float, path: str, ctx: Context) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        ctx.errors.append(f"{_label(path)} must be a finite number, not {value!r}")
        return
    lo, hi = schema.get("minimum"), schema.get("maximum")
    xlo, xhi = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if (
        (lo is not None and value < lo)
        or (hi is not None and value > hi)
        or (xlo is not None and value <= xlo)
        or (xhi is not None and value >= xhi)
    ):
        ctx.errors.append(f"{_label(path)} must be {describe(schema)}, not {_json(value)}")


def _check_string(schema: Schema, value: str, path: str, ctx: Context) -> None:
    if "minLength" in schema and len(value) < schema["minLength"]:
        ctx.errors.append(
            f"{_label(path)} must not be empty"
            if schema["minLength"] == 1
            else f"{_label(path)} must have at least {schema['minLength']} characters"
        )
    if "maxLength" in schema and len(value) > schema["maxLength"]:
        ctx.errors.append(f"{_label(path)} must have at most {schema['maxLength']} characters")
    if "pattern" in schema and not re.search(schema["pattern"], value):
        ctx.errors.append(
            f"{_label(path)} {_json(value)} is not allowed here"
            + (f" ({schema['x-pattern-hint']})" if "x-pattern-hint" in schema else "")
        )


def _check_array(schema: Schema, value: Sequence[Any], path: str, ctx: Context) -> None:
    n = len(value)
    if "minItems" in schema and n < schema["minItems"]:
        ctx.errors.append(
            f"{_label(path)} must not be empty"
            if schema["minItems"] == 1
            else f"{_label(path)} needs at least {schema['minItems']} items, not {n}"
        )
    if "maxItems" in schema and n > schema["maxItems"]:
        ctx.errors.append(f"{_label(path)} may hold at most {schema['maxItems']} items, not {n}")
    if schema.get("uniqueItems"):
        seen, dupes = set(), []
        for item in value:
            key = repr(item)
            if key in seen:
                dupes.append(_json(item))
            seen.add(key)
        if dupes:
            ctx.errors.append(f"{_label(path)} lists {', '.join(dupes[:5])} more than once")
    items = schema.get("items")
    if items is not None:
        for i, item in enumerate(value):
            _check(items, item, f"{path}[{i}]", ctx)


def _check_object(schema: Schema, value: Mapping[str, Any], path: str, ctx: Context) -> None:
    if "x-discriminator" in schema:
        _check_variant(schema, value, path, ctx)
        return
    props: Mapping[str, Schema] = schema.get("properties", {})
    n = len(value)
    if "minProperties" in schema and n < schema["minProperties"]:
        ctx.errors.append(f"{_label(path)} must not be empty")
    if "maxProperties" in schema and n > schema["maxProperties"]:
        ctx.errors.append(f"{_label(path)} may hold at most {schema['maxProperties']} entries")
    for key in schema.get("required", []):
        if key not in value:
            ctx.errors.append(f"{_label(_join(path, key))} is required")
    groups = [g["required"] for g in schema.get("oneOf", []) if "required" in g]
    if groups and sum(all(k in value for k in g) for g in groups) != 1:
        options = " or ".join(
            repr(g[0]) if len(g) == 1 else "both " + " and ".join(map(repr, g)) for g in groups
        )
        where = f" in {path!r}" if path else ""
        ctx.errors.append(f"give either {options}{where} (exactly one of these)")
    exclusive = schema.get("not", {}).get("anyOf", [])
    for pair in exclusive:
        if all(k in value for k in pair.get("required", [])):
            a, b = pair["required"]
            ctx.errors.append(f"give either {a!r} or {b!r}, not both")
    extra = schema.get("additionalProperties", True)
    keys_role = schema.get("x-keys")
    for key, item in value.items():
        sub = _join(path, str(key))
        if key in props:
            _check(props[key], item, sub, ctx)
        elif extra is False:
            known = sorted(props)
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            listed = f"; known: {', '.join(known)}" if known else ""
            where = f" in {path!r}" if path else ""
            ctx.errors.append(f"unknown parameter {str(key)!r}{where}{hint}{listed}")
        elif isinstance(extra, Mapping):
            _check(dict(extra), item, sub, ctx)
        if keys_role and key not in props:
            _check_column({"x-column": keys_role}, str(key), sub, ctx)


def _check_variant(schema: Schema, value: Mapping[str, Any], path: str, ctx: Context) -> None:
    key = schema["x-discriminator"]
    options = {alt["properties"][key]["const"]: alt for alt in schema["oneOf"]}
    chosen = value.get(key)
    if chosen not in options:
        known = ", ".join(options)
        ctx.errors.append(f"{_label(path)}: unknown {key} {_json(chosen)} (one of {known})")
        return
    _check(options[chosen], value, path, ctx)


def _check_column(schema: Schema, name: str, path: str, ctx: Context) -> None:
    if ctx.columns is None:
        _check_numeric(schema, name, path, ctx)
        return
    if name not in ctx.columns and ctx.removed and name in ctx.removed:
        ctx.errors.append(f"{_label(path)}: column {name!r} was removed by {ctx.removed[name]}")
        return
    if name not in ctx.columns:
        close = difflib.get_close_matches(name, [str(c) for c in ctx.columns], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        ctx.errors.append(f"{_label(path)}: unknown column {name!r}{hint}")
        return
    _check_numeric(schema, name, path, ctx)


def _check_numeric(schema: Schema, name: str, path: str, ctx: Context) -> None:
    if schema.get("x-column-type") != "numeric" or ctx.types is None:
        return
    kind = ctx.types.get(name)
    if kind is None or kind == "numeric":
        return
    if ctx.retyped and name in ctx.retyped:
        ctx.errors.append(
            f"{_label(path)}: column {name!r} holds text labels after {ctx.retyped[name]}, "
            "not numbers: put this step before that one, or leave the column out of it"
        )
    else:
        ctx.errors.append(f"{_label(path)}: column {name!r} is not numeric")


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


# -- reading what a value names --------------------------------------------------------------


def columns_named(schema: Schema, value: Any) -> dict[str, list[str]]:
    """The columns ``value`` names, by role: ``{"reads": [...], "writes": [...]}``.

    Only well-formed parts are read (call :func:`check` first for the problems)."""
    out: dict[str, list[str]] = {"reads": [], "writes": []}
    _collect(schema, value, out)
    return {role: list(dict.fromkeys(names)) for role, names in out.items()}


def _collect(schema: Schema, value: Any, out: dict[str, list[str]]) -> None:
    if "anyOf" in schema:
        for alt in schema["anyOf"]:
            if not check(alt, value):
                _collect(alt, value, out)
                return
        return
    if "x-column" in schema and isinstance(value, str):
        out.setdefault(schema["x-column"], []).append(value)
        return
    if isinstance(value, list | tuple) and isinstance(schema.get("items"), Mapping):
        for item in value:
            _collect(schema["items"], item, out)
    elif isinstance(value, Mapping):
        if "x-discriminator" in schema:
            key = schema["x-discriminator"]
            for alt in schema["oneOf"]:
                if alt["properties"][key].get("const") == value.get(key):
                    _collect(alt, value, out)
            return
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties")
        for key, item in value.items():
            if key in props:
                _collect(props[key], item, out)
            elif isinstance(extra, Mapping):
                _collect(dict(extra), item, out)
            if schema.get("x-keys") and key not in props:
                out.setdefault(schema["x-keys"], []).append(str(key))


def depth(value: Any, *, limit: int) -> int:
    """Nesting depth of lists and objects, counted without recursion; stops past ``limit``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, Mapping):
            children: Iterable[Any] = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        deepest = max(deepest, level)
        if deepest > limit:
            return deepest
        stack.extend((child, level + 1) for child in children)
    return deepest
