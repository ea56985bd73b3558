"""δ-disclosure privacy (Brickell & Shmatikov 2008), as ARX checks it: in every class and for
every sensitive value s the class contains, |log2(p(s | class) / p(s))| < δ, p(s) the value's
share in the whole table. The comparison is strict.

Values a class lacks are left out of the model (with them, no class lacking a value could ever
satisfy it); :func:`delta_all_values` gives the stricter reading for the risk profile, infinite
when a class lacks a value of the table, since learning that a target does *not* have a value is
a disclosure too.

:class:`DeltaDisclosureCoverage` is a necessary condition of the model that only grows easier to
meet as classes merge: the search settles sublattices with it before it computes any ratio,
and with the records its specializations must suppress (:mod:`.share_bound`, the upper half of
the bound being a cap on each value's share).
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
from anonweb.core.models.counts import ClassData, SensitiveCounts, SensitiveDomain
from anonweb.core.models.share_bound import least_failing, row_max, row_min


def delta_per_class(sc: SensitiveCounts) -> NDArray[Any]:
    """Per class, max over the values it contains of |log2(p(s|class) / p(s))|."""
    out = np.zeros(sc.n_classes)
    for s, e, j0, _j1 in sc.slices():  # whole classes at a time, in place: less memory
        ratio = sc.domain.share[sc.val[s:e]]
        np.divide(sc.slice_share(s, e), ratio, out=ratio)
        np.log2(ratio, out=ratio)
        np.abs(ratio, out=ratio)
        np.maximum.at(out[j0:], sc.cls[s:e] - j0, ratio)
    return out


def delta_per_class_dense(domain: SensitiveDomain, hist: NDArray[Any]) -> NDArray[Any]:
    """:func:`delta_per_class` from a dense (classes x values) matrix of counts, as the search
    keeps them: the same ratios, the values a class lacks left out."""
    sizes = hist.sum(axis=1, keepdims=True)
    share = hist / np.maximum(sizes, 1)
    ratio = np.divide(share, domain.share, out=np.ones_like(share), where=hist > 0)
    return np.asarray(np.abs(np.log2(ratio)).max(axis=1, initial=0.0))


def delta_passes_dense(domain: SensitiveDomain, hist: NDArray[Any], delta: float) -> NDArray[Any]:
    """``delta_per_class_dense(domain, hist) < delta``, with a logarithm only for the classes
    whose extreme ratio lies within 1e-9 of 2**delta or 2**-delta (usually none): the others
    are decided by the ratios alone. A class's largest |log2 r| is that of its largest or its
    smallest ratio r, and log2 is accurate far inside 1e-9, so a ratio farther than that from
    a threshold is on the same side of it as its logarithm is of delta."""
    if not hist.shape[1]:
        return np.ones(len(hist), dtype=bool)
    sizes = hist @ np.ones(hist.shape[1])  # exact: sums of counts
    # the ratios of delta_per_class_dense, in one matrix written in place (a fresh matrix of
    # this size costs more to map than to compute)
    ratio = np.divide(hist, np.maximum(sizes, 1)[:, None])
    np.divide(ratio, domain.share, out=ratio)
    np.copyto(ratio, 1.0, where=~(hist > 0))
    high, low = row_max(ratio), row_min(ratio)
    top, bottom = 2.0**delta, 2.0**-delta
    near = (np.abs(high - top) <= NEAR * top) | (np.abs(low - bottom) <= NEAR * bottom)
    out: NDArray[Any] = (high < top) & (low > bottom)
    rows = np.flatnonzero(near)
    if len(rows):
        out[rows] = delta_per_class_dense(domain, hist[rows]) < delta
    return out


# how close to a threshold a ratio must come for delta_passes_dense to take its logarithm
NEAR = 1e-9


def delta_all_values(sc: SensitiveCounts) -> NDArray[Any]:
    """:func:`delta_per_class`, infinite for a class lacking some value of the table."""
    out = delta_per_class(sc)
    out[sc.distinct < len(sc.values)] = np.inf
    return out


@dataclass(frozen=True)
class DeltaDisclosure(PrivacyModel):
    sensitive: str
    delta: float
    kind = "delta_disclosure"
    monotonic = False
    worst = "max"
    schema = sch.obj(
        {
            "sensitive": sch.column("The sensitive column the model protects"),
            "delta": sch.number(
                "Bound on |log2 p(value | class) / p(value)|", exclusive_minimum=0, maximum=1000
            ),
        },
        required=["sensitive", "delta"],
        labels={"sensitive": "Sensitive column", "delta": "δ"},
        title="δ-disclosure privacy",
    )
    figures = (
        Figure(
            "delta_disclosure",
            "δ-disclosure",
            LOWER,
            digits=3,
            measure=lambda data, col: delta_per_class(data.sensitive(col)),
            own_cell=True,
        ),
    )
    cli_flags = (
        CliFlag(
            "--delta-disclosure",
            "SA=DELTA",
            lambda col, v: {
                "model": "delta_disclosure",
                "sensitive": col,
                "delta": cli_number(v, "--delta-disclosure"),
            },
        ),
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "sensitive", require_column(self.sensitive))
        if require_number(self.delta, "δ") <= 0:
            raise ParameterError(f"delta must be positive, got {self.delta}")

    def describe(self) -> str:
        return f"{self.delta}-disclosure privacy on {self.sensitive}"

    def measure(self, data: ClassData) -> NDArray[Any]:
        dense = data.histogram(self.sensitive)
        if dense is not None:
            return delta_per_class_dense(*dense)
        return delta_per_class(data.sensitive(self.sensitive))

    def passes(self, data: ClassData) -> NDArray[Any]:
        dense = data.histogram(self.sensitive)
        if dense is not None:
            return delta_passes_dense(*dense, self.delta)
        return self.measure(data) < self.delta

    def implied(self) -> tuple[PrivacyModel, ...]:
        return (DeltaDisclosureCoverage(self.sensitive, self.delta),)


# the coverage bound rejects a class only when 2**δ Q falls this far below 1: the class's largest
# ratio is then farther above 2**δ than the float error of any log2 computed, so
# δ-disclosure rejects it too
COVERAGE_MARGIN = 1e-9


@dataclass(frozen=True)
class DeltaDisclosureCoverage(PrivacyModel):
    """A necessary condition of :class:`DeltaDisclosure` that only grows easier to meet as
    classes merge, so the search can treat it as monotonic (even with suppression).

    Proof. Take a class of n records, c_s of them with value s, and p(s) the value's share in
    the whole table. δ-disclosure requires, for every value s the class contains,
    log2((c_s / n) / p(s)) < δ, so c_s / n < 2**δ p(s). Summed over those values, the left
    sides make 1: 1 < 2**δ Q, with Q = sum of p(s) over the values the class contains. A class
    with Q <= 2**-δ therefore fails δ-disclosure (only the upper half of the two-sided bound is
    used: the lower half does not survive a merge). Q depends only on which values a class
    contains, and p(s) on the whole table, suppressed records included, so it is the same at
    every node: a merge contains every value of its parts, and a merge of classes of which one
    meets the bound meets it too. The records in classes failing the bound therefore never
    grow as a node is generalized, with or without suppression.
    """

    sensitive: str
    delta: float
    kind = "delta_disclosure_coverage"
    monotonic = True
    worst = "min"
    fields = ("sensitive", "delta")

    def describe(self) -> str:
        return f"values that can make a {self.delta}-disclosure private class on {self.sensitive}"

    def measure(self, data: ClassData) -> NDArray[Any]:
        """Q: the table's share of the values each class contains."""
        domain, present = data.present(self.sensitive)
        # a product with the shares, not a matrix of them summed: several times faster
        return np.asarray(present @ domain.share)

    def passes(self, data: ClassData) -> NDArray[Any]:
        return np.asarray(self.measure(data) * 2.0**self.delta > 1.0 - COVERAGE_MARGIN)

    def least_suppressed(
        self, data: ClassData, settled: NDArray[Any], k: int = 1
    ) -> NDArray[Any] | None:
        """The records each class's specializations must suppress, from the upper half of the
        bound: a class that passes holds c_s < 2**δ p(s) n records of each value s it contains
        (and none of the others), a cap on its share (:func:`least_failing`).

        And from the lower half, when the classes kept hold k records or more: a part that
        passes and holds value s holds more than 2**-δ p(s) k records of it. A class holding
        no more than that of s cannot pass on any part holding s, so its cap on s is 0 (all
        its records of s fail). A merge in which s is capped at 0 has it capped at 0 in both
        parts too (each holds no more of s), so the caps of a merge are at least its parts'
        and its bound at most the sum of theirs."""
        dense = data.histogram(self.sensitive)
        if dense is None:
            return None
        domain, hist = dense
        caps = domain.share * 2.0**self.delta
        floor = domain.share * 2.0**-self.delta * k * (1.0 - COVERAGE_MARGIN)
        # counts are whole: below a floor of 1 only a value the class lacks, whose cap
        # changes nothing (it never counts among the values over their caps)
        zero = floor if k > 1 and (floor > 1.0).any() else None
        return least_failing(hist, caps, ~settled, zero)
