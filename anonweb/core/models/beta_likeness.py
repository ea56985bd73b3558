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
each node, after :class:`BetaLikenessCaps`, a necessary condition that stays monotonic with
suppression, has settled the sublattices it can.
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
from anonweb.core.models.share_bound import least_failing

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

    def implied(self) -> tuple[PrivacyModel, ...]:
        return (BetaLikenessCaps(self.sensitive, self.beta),)


def likeness_caps(share: NDArray[Any], beta: float) -> NDArray[Any]:
    """The largest share q(s) a class satisfying enhanced β-likeness may hold of each value:
    p(s) (1 + min(β, -ln p(s))), widened by the check's tolerance."""
    safe = np.where(share > 0, share, 1.0)
    return np.asarray(share * (1.0 + np.minimum(beta, -np.log(safe)) + TOLERANCE))


# the coverage condition rejects a class only when its caps fall this far below 1
COVERAGE_MARGIN = 1e-9


@dataclass(frozen=True)
class BetaLikenessCaps(PrivacyModel):
    """A necessary condition of :class:`BetaLikeness` that only grows easier to meet as
    classes merge, so the search can treat it as monotonic (even with suppression).

    A class satisfying the model holds q(s) <= cap(s) = p(s) (1 + min(β, -ln p(s))) of each
    value s it contains. The shares of those values make 1, so the caps of the values a class
    contains must add up to at least 1; a merge contains every value of its parts, so a merge
    of classes one of which meets this meets it too. Beyond which classes fail, the caps bound
    the records any specialization of a node must suppress (:mod:`.share_bound`), a bound
    whose sum over a node never grows as the node is generalized.
    """

    sensitive: str
    beta: float
    kind = "beta_likeness_caps"
    monotonic = True
    worst = "min"
    fields = ("sensitive", "beta")

    def describe(self) -> str:
        return f"values that can make an enhanced {self.beta}-like class on {self.sensitive}"

    def measure(self, data: ClassData) -> NDArray[Any]:
        """The caps of the values each class contains, added up."""
        domain, present = data.present(self.sensitive)
        return np.asarray((present * likeness_caps(domain.share, self.beta)).sum(axis=1))

    def passes(self, data: ClassData) -> NDArray[Any]:
        return np.asarray(self.measure(data) > 1.0 - COVERAGE_MARGIN)

    def least_suppressed(
        self, data: ClassData, settled: NDArray[Any], k: int = 1
    ) -> NDArray[Any] | None:
        dense = data.histogram(self.sensitive)
        if dense is None:
            return None
        domain, hist = dense
        return least_failing(hist, likeness_caps(domain.share, self.beta), ~settled)
