"""Builders for generalization hierarchies, and resolving the hierarchy specs of a plan."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pandas as pd

from anonweb.core.errors import HierarchyError
from anonweb.core.hierarchy import Hierarchy, read_hierarchy


def resolve_hierarchies(specs: Mapping[str, Any], df: pd.DataFrame) -> dict[str, Hierarchy]:
    """Turn a plan's ``hierarchies`` object into :class:`Hierarchy` objects by column."""
    out: dict[str, Hierarchy] = {}
    for column, spec in specs.items():
        if isinstance(spec, Hierarchy):
            out[column] = spec
        elif isinstance(spec, str):
            out[column] = read_hierarchy(spec, attribute=column)
        elif isinstance(spec, Mapping) and "path" in spec:
            out[column] = read_hierarchy(spec["path"], sep=spec.get("sep"), attribute=column)
        elif isinstance(spec, Mapping) and "rows" in spec:
            out[column] = Hierarchy(rows=tuple(tuple(r) for r in spec["rows"]), attribute=column)
        else:
            raise HierarchyError(f"hierarchy for {column!r}: expected a path, rows or a builder")
    return out
