"""A plan's request for attack evaluation: ``"attacks": {"holdout": 0.15, "known": [...],
"sensitive": [...], "targets": 2000}``.

``holdout`` is the share of the source's records kept out of the release, at random, before
the plan runs: they are the control, people of the same population who are not in the release.
0 holds out nobody (the excess then cannot be measured). ``known`` defaults to the plan's
quasi-identifiers, ``sensitive`` to its sensitive columns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from anonweb.core.attacks.run import DEFAULT_TARGETS
from anonweb.core.errors import ParameterError

MAX_HOLDOUT = 0.5
MAX_TARGETS = 100_000
FIELDS = {"holdout", "known", "sensitive", "targets"}


@dataclass(frozen=True)
class AttackOptions:
    holdout: float = 0.0
    known: tuple[str, ...] = ()
    sensitive: tuple[str, ...] = ()
    targets: int = DEFAULT_TARGETS

    def to_dict(self) -> dict[str, Any]:
        return {
            "holdout": self.holdout,
            "known": list(self.known),
            "sensitive": list(self.sensitive),
            "targets": self.targets,
        }


def attack_options(data: Any) -> AttackOptions:
    """Parse the plan's ``attacks`` object; every problem is one plain sentence."""
    if not isinstance(data, Mapping):
        raise ParameterError("plan 'attacks' must be an object (holdout, known, targets)")
    unknown = sorted(set(data) - FIELDS)
    if unknown:
        raise ParameterError(
            f"plan 'attacks': unknown field(s) {', '.join(unknown)} "
            f"(allowed: {', '.join(sorted(FIELDS))})"
        )
    holdout = data.get("holdout", 0.0)
    if isinstance(holdout, bool) or not isinstance(holdout, int | float):
        raise ParameterError("plan 'attacks': holdout is a share of the records, e.g. 0.15")
    if not 0 <= holdout <= MAX_HOLDOUT:
        raise ParameterError(
            f"plan 'attacks': holdout must be between 0 and {MAX_HOLDOUT}, got {holdout}"
        )
    targets = data.get("targets", DEFAULT_TARGETS)
    if isinstance(targets, bool) or not isinstance(targets, int) or not 1 <= targets <= MAX_TARGETS:
        raise ParameterError(
            f"plan 'attacks': targets must be a whole number from 1 to {MAX_TARGETS:,}"
        )
    lists = {}
    for name in ("known", "sensitive"):
        value = data.get(name, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ParameterError(f"plan 'attacks': {name} must be a list of column names")
        lists[name] = tuple(value)
    return AttackOptions(float(holdout), lists["known"], lists["sensitive"], targets)
