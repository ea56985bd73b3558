"""What a purge removes from the database besides the files: every raw value of the source.

After a purge nothing can run on a dataset, so what stays is what people read about it later:
names of columns, parameters that are numbers (k, ε, thresholds), digests, and counts of what
was removed. These functions are applied by :func:`anonweb.jobs.retention.dataset_purge` to

* job results (a profile's disclosing classes list full quasi-identifier rows and the value
  they disclose): each list of classes becomes its count;
* hierarchies (an uploaded table lists every distinct value of its column): the spec becomes
  its kind and the number of values;
* stored plans (of jobs and releases: a codebook, suppressed values, a randomized response
  matrix, inline hierarchies name source values): every parameter that is not a column name,
  a number or a fixed word becomes the count of its entries.
"""

from __future__ import annotations

import re
from typing import Any

from anonweb.core.raw_values import public_result
from anonweb.core.release.plan import step_schemas

PURGED = "purged"
# Parameters whose text is a setting, never a value of the data.
SETTING_KEYS = frozenset(
    {
        "kind",
        "key",
        "preset",
        "format",
        "char",
        "builder",
        "mechanism",
        "method",
        "distance",
        "model",
        "objective",
        "metric",
        "type",
        "role",
        "uploaded",
        "strategy",
        "output",
    }
)
_DIGEST = re.compile(r"^[0-9a-f]{64}$")
# A job result keeps what non-officers may read of it (one definition: the core's).
scrub_result = public_result


def scrub_hierarchy_spec(spec: dict) -> dict:
    """A hierarchy's kind and size, without its values."""
    if "rows" in spec:
        return {PURGED: True, "builder": "uploaded", "values": len(spec.get("rows") or [])}
    return {PURGED: True, "builder": str(spec.get("builder", "?"))}


def _size(value: Any) -> int:
    return len(value) if isinstance(value, (list, dict, str)) else 1


# Parameters whose keys are source values: dropped whole.
_VALUE_MAPS = frozenset({"codebook", "matrix"})


def _parameter_names() -> frozenset[str]:
    """Every parameter name a step, hierarchy builder or privacy model declares."""

    names: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, item in node.items():
                if key == "properties" and isinstance(item, dict):
                    names.update(item)
                walk(item)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(step_schemas())
    plan_fields = {"version", "quasi_identifiers", "sensitive", "hierarchies", "steps", "params"}
    return frozenset(names) | SETTING_KEYS | plan_fields


def _scrub(value: Any, *, keep: frozenset[str], columns: frozenset[str], key: str | None) -> Any:
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if key in _VALUE_MAPS:
        return {PURGED: _size(value)}
    if isinstance(value, str):
        if value in columns or key in SETTING_KEYS or _DIGEST.match(value):
            return value
        return {PURGED: 1}
    if isinstance(value, list):
        items = [_scrub(v, keep=keep, columns=columns, key=key) for v in value]
        if any(isinstance(i, dict) and set(i) == {PURGED} for i in items):
            return {PURGED: len(value)}
        return items
    if isinstance(value, dict):
        if not all(isinstance(k, str) and (k in columns or k in keep) for k in value):
            return {PURGED: len(value)}
        return {k: _scrub(v, keep=keep, columns=columns, key=k) for k, v in value.items()}
    return {PURGED: _size(value)}


def scrub_plan(plan: Any, *, columns: list[str]) -> Any:
    """A plan (``{"steps": [{"kind", "params"}, ...]}``) without source values: column names,
    numbers, settings and digests stay; anything else becomes ``{"purged": <entries>}``."""
    if not isinstance(plan, dict):
        return plan
    return _scrub(plan, keep=_parameter_names(), columns=frozenset(columns), key=None)
