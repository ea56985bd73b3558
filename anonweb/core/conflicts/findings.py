"""What the conflict checks report: findings that name records, and how they were found.

Records are source row positions inside the core; :meth:`Finding.to_dict` turns them into the
caller's record identifiers (an id column on the command line, row numbers on the web). Inferred
values and intervals are source values: they are for the privacy officer only, and ``to_dict``
leaves them out unless asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from anonweb.core.risk.classes import json_value

TYPES = ("exact_inference", "differencing", "intersection", "linkage")


@dataclass(frozen=True)
class Finding:
    """Records an attacker learns something about by combining releases.

    ``releases`` are the labels of the releases combined; ``columns`` the columns concerned;
    ``values`` (row -> inferred value) and ``intervals`` (row -> (low, high)) are source values;
    ``facts`` holds JSON-safe counts and parameters (``k_joined``, ``link``, ...), never a value.
    """

    type: str
    records: tuple[int, ...]
    explanation: str
    releases: tuple[str, ...] = ()
    columns: tuple[str, ...] = ()
    values: dict[int, float] = field(default_factory=dict)
    intervals: dict[int, tuple[float, float]] = field(default_factory=dict)
    facts: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.type not in TYPES:
            raise ValueError(f"unknown finding type {self.type!r}")

    def to_dict(self, ids: Sequence[Any] | None = None, *, values: bool = True) -> dict[str, Any]:
        """JSON form. ``ids[row]`` names a record (default: the row number from 1); with
        ``values=False`` the inferred values and intervals are left out."""

        def name(row: int) -> object:
            return json_value(ids[row]) if ids is not None else int(row) + 1

        out: dict[str, Any] = {
            "type": self.type,
            "records": [name(r) for r in self.records],
            "explanation": self.explanation,
            "releases": list(self.releases),
            "columns": list(self.columns),
            **{k: v for k, v in self.facts.items()},
        }
        if values:
            out["values"] = {str(name(r)): _number(v) for r, v in self.values.items()}
            if self.intervals:
                out["intervals"] = {
                    str(name(r)): [_number(lo), _number(hi)]
                    for r, (lo, hi) in self.intervals.items()
                }
        return out


def _number(v: float) -> float:
    # Rounding noise of the solver (1e-10 on 43.0) is not information: 12 significant digits.
    return float(f"{float(v):.12g}")


def rows_of(mask: NDArray[Any]) -> tuple[int, ...]:
    return tuple(int(r) for r in np.flatnonzero(mask))
