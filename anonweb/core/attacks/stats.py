"""Interval estimates for attack success rates.

* a rate: Wilson's score interval (it stays inside [0, 1] and keeps its level near 0 and 1,
  where the attack rates of a good release sit, unlike the normal approximation);
* the excess of a rate over its control: Newcombe's hybrid score interval for the difference of
  two independent proportions (method 10 of Newcombe 1998), built from the two Wilson intervals;
* an AUC: Hanley and McNeil's (1982) standard error, clipped to [0, 1].

Success counts may be fractional: an attack that picks uniformly among m candidates succeeds
with probability 1/m, and the rate reported is the expected one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

Z95 = 1.959963984540054


def wilson(successes: float, trials: int, *, z: float = Z95) -> tuple[float, float]:
    """Wilson's score interval for ``successes`` out of ``trials``."""
    if trials <= 0:
        return (0.0, 1.0)
    p = min(max(successes / trials, 0.0), 1.0)
    z2 = z * z
    denom = 1 + z2 / trials
    centre = (p + z2 / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def newcombe(x1: float, n1: int, x2: float, n2: int, *, z: float = Z95) -> tuple[float, float]:
    """Newcombe's interval for ``x1/n1 - x2/n2``."""
    p1, p2 = x1 / n1, x2 / n2
    l1, u1 = wilson(x1, n1, z=z)
    l2, u2 = wilson(x2, n2, z=z)
    d = p1 - p2
    return (
        max(-1.0, d - math.sqrt((p1 - l1) ** 2 + (u2 - p2) ** 2)),
        min(1.0, d + math.sqrt((u1 - p1) ** 2 + (p2 - l2) ** 2)),
    )


@dataclass(frozen=True)
class AttackRate:
    """An attack's success on people in the release against the same attack on a control.

    Without a control, ``control_rate`` and ``excess`` are None and ``ci`` is the rate's own
    interval; with one, ``ci`` is the excess's.
    """

    successes: float
    targets: int
    control_successes: float | None = None
    control_targets: int = 0

    @property
    def rate(self) -> float:
        return self.successes / self.targets if self.targets else 0.0

    @property
    def control_rate(self) -> float | None:
        if self.control_successes is None or not self.control_targets:
            return None
        return self.control_successes / self.control_targets

    @property
    def excess(self) -> float | None:
        control = self.control_rate
        return None if control is None else self.rate - control

    @property
    def ci(self) -> tuple[float, float]:
        if self.control_successes is None or not self.control_targets or not self.targets:
            return wilson(self.successes, self.targets)
        return newcombe(self.successes, self.targets, self.control_successes, self.control_targets)

    def to_dict(self) -> dict[str, Any]:
        control = self.control_rate
        excess = self.excess
        lo, hi = self.ci
        return {
            "rate": round(self.rate, 6),
            "control_rate": None if control is None else round(control, 6),
            "excess": None if excess is None else round(excess, 6),
            "ci": [round(lo, 6), round(hi, 6)],
            "targets": self.targets,
            "control_targets": self.control_targets,
        }


def auc_interval(auc: float, n_pos: int, n_neg: int, *, z: float = Z95) -> tuple[float, float]:
    """Hanley and McNeil's 95% interval of an AUC from ``n_pos`` and ``n_neg`` scores."""
    if n_pos <= 0 or n_neg <= 0:
        return (0.0, 1.0)
    q1 = auc / (2 - auc)
    q2 = 2 * auc * auc / (1 + auc)
    var = (auc * (1 - auc) + (n_pos - 1) * (q1 - auc * auc) + (n_neg - 1) * (q2 - auc * auc)) / (
        n_pos * n_neg
    )
    half = z * math.sqrt(max(var, 0.0))
    return (max(0.0, auc - half), min(1.0, auc + half))
