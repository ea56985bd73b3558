"""δ-disclosure privacy (Brickell & Shmatikov 2008), as ARX checks it: in every class and for
every sensitive value s the class contains, |log2(p(s | class) / p(s))| < δ, p(s) the value's
share in the whole table. The comparison is strict.

Values a class lacks are left out of the model (with them, no class lacking a value could ever
satisfy it); :func:`delta_all_values` gives the stricter reading for the risk profile, infinite
when a class lacks a value of the table, since learning that a target does *not* have a value is
a disclosure too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from anonweb.core.errors import ParameterError
from anonweb.core.models.base import PrivacyModel, require_column, require_number
from anonweb.core.models.counts import ClassData, SensitiveCounts


def delta_per_class(sc: SensitiveCounts) -> NDArray[Any]:
    """Per class, max over the values it contains of |log2(p(s|class) / p(s))|."""
    ratio = np.abs(np.log2(sc.share / sc.domain.share[sc.val]))
    out = np.zeros(sc.n_classes)
    np.maximum.at(out, sc.cls, ratio)
    return out


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
    fields = ("sensitive", "delta")

    def __post_init__(self) -> None:
        object.__setattr__(self, "sensitive", require_column(self.sensitive))
        if require_number(self.delta, "δ") <= 0:
            raise ParameterError(f"delta must be positive, got {self.delta}")

    def describe(self) -> str:
        return f"{self.delta}-disclosure privacy on {self.sensitive}"

    def measure(self, data: ClassData) -> NDArray[Any]:
        return delta_per_class(data.sensitive(self.sensitive))

    def passes(self, data: ClassData) -> NDArray[Any]:
        return self.measure(data) < self.delta
