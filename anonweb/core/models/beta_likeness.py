"""Enhanced β-likeness (Cao & Karras, "Publishing microdata with a robust privacy guarantee",
VLDB 2012), as ARX checks it (``org.deidentifier.arx.criteria.EnhancedBLikeness``).

With p(s) the share of sensitive value s in the whole table (suppressed records included, as
for t-closeness and δ-disclosure) and q(s) its share in a class, the relative gain of s in the
class is (q(s) - p(s)) / p(s). A class satisfies enhanced β-likeness when, for every value s it
contains,

    (q(s) - p(s)) / p(s) <= min(β, -ln p(s)).

Only values more frequent in the class than in the table can fail (the others have a negative
gain); the ``-ln p(s)`` cap makes the bound tighter for frequent values, so that a class cannot
raise an attacker's belief in a common value to near certainty (a value held by half the table
may gain at most ln 2 ≈ 0.69 even when β = 1). Basic β-likeness is the same without the cap.

The figure of a class is the smallest β it satisfies: its largest gain, or infinite when some
value's gain passes its ``-ln p(s)`` cap (no β helps then); the table's figure is the largest.
A merge of classes averages their shares, so generalization never raises the largest gain, but
suppression can (ARX declares the model monotonic with generalization only): the search checks
each node.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from anonweb.core import schema as sch
from anonweb.core.errors import ParameterError
from anonweb.core.models.base import (
    LOWER,
    CliFlag,
    Figure,
    PrivacyModel,
    cli_number,
    require_column,
    require_number,
)
from anonweb.core.models.counts import ClassData, SensitiveDomain

# a gain this close above its bound passes: the shares are ratios of counts, not exact
TOLERANCE = 1e-12


def likeness_per_class_dense(domain: SensitiveDomain, hist: NDArray[Any]) -> NDArray[Any]:
    """Each class's smallest enhanced β from a dense (classes x values) matrix of counts."""
    p = domain.share
    sizes = np.maximum(hist.sum(axis=1, keepdims=True), 1)
    present = hist > 0
    safe_p = np.where(p > 0, p, 1.0)
    gain = np.where(present, (hist / sizes - p) / safe_p, -np.inf)
    cap = -np.log(safe_p)
    worst = gain.max(axis=1, initial=-np.inf)
    capped = (gain > cap + TOLERANCE).any(axis=1)
    return np.asarray(np.where(capped, np.inf, np.maximum(worst, 0.0)))


def likeness_per_class(data: ClassData, sensitive: str) -> NDArray[Any]:
    """:func:`likeness_per_class_dense` from the classes, however they were formed."""
    dense = data.histogram(sensitive)
    if dense is not None:
        return likeness_per_class_dense(*dense)
    sc = data.sensitive(sensitive)
    out = np.zeros(sc.n_classes)
    for s, e, j0, _j1 in sc.slices():  # whole classes at a time, in place: less memory
        p = sc.domain.share[sc.val[s:e]]
        gain = np.subtract(sc.slice_share(s, e), p)
        gain /= p
        cap = np.log(p, out=p)
        np.negative(cap, out=cap)
        cap += TOLERANCE
        gain[gain > cap] = np.inf
        np.maximum.at(out[j0:], sc.cls[s:e] - j0, gain)
    return out


@dataclass(frozen=True)
class BetaLikeness(PrivacyModel):
    """Enhanced β-likeness of a sensitive column (see the module's docstring)."""

    sensitive: str
    beta: float
    kind = "beta_likeness"
    monotonic = False
    worst = "max"
    schema = sch.obj(
        {
            "sensitive": sch.column("The sensitive column the model protects"),
            "beta": sch.number(
                "Largest relative gain (q - p) / p of a value in a class over its share p in "
                "the table (capped at -ln p)",
                exclusive_minimum=0,
                maximum=1e6,
            ),
        },
        required=["sensitive", "beta"],
        labels={"sensitive": "Sensitive column", "beta": "Largest relative gain (β)"},
        title="Enhanced β-likeness",
    )
    figures = (
        Figure("beta_likeness", "β (likeness)", LOWER, digits=3, measure=likeness_per_class),
    )
    cli_flags = (
        CliFlag(
            "--beta-likeness",
            "SA=B",
            lambda col, v: {
                "model": "beta_likeness",
                "sensitive": col,
                "beta": cli_number(v, "--beta-likeness"),
            },
        ),
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "sensitive", require_column(self.sensitive))
        beta = require_number(self.beta, "β")
        if beta <= 0:
            raise ParameterError(f"β-likeness needs β > 0, got {self.beta}")

    def describe(self) -> str:
        return f"enhanced {self.beta}-likeness on {self.sensitive}"

    def measure(self, data: ClassData) -> NDArray[Any]:
        return likeness_per_class(data, self.sensitive)

    def passes(self, data: ClassData) -> NDArray[Any]:
        return np.asarray(self.measure(data) <= self.beta + TOLERANCE)
