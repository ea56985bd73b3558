"""Distinct l-diversity (Machanavajjhala et al. 2007): every class holds at least l distinct
sensitive values. Monotonic even with suppression: merging classes never loses a value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from anonweb.core.models.base import PrivacyModel, require_column, require_int
from anonweb.core.models.counts import ClassData, SensitiveCounts


def distinct_values(sc: SensitiveCounts) -> NDArray[Any]:
    """Number of distinct sensitive values (missing counted as one) in each class."""
    return sc.distinct


@dataclass(frozen=True)
class DistinctL(PrivacyModel):
    sensitive: str
    l: int  # noqa: E741  (the letter used in the literature)
    kind = "distinct_l"
    monotonic = True
    fields = ("sensitive", "l")

    def __post_init__(self) -> None:
        object.__setattr__(self, "sensitive", require_column(self.sensitive))
        object.__setattr__(self, "l", require_int(self.l, "distinct l-diversity's l", minimum=1))

    def describe(self) -> str:
        return f"distinct {self.l}-diversity on {self.sensitive}"

    def measure(self, data: ClassData) -> NDArray[Any]:
        dense = data.histogram(self.sensitive)
        if dense is not None:
            return np.asarray(np.count_nonzero(dense[1], axis=1))
        return distinct_values(data.sensitive(self.sensitive))

    def passes(self, data: ClassData) -> NDArray[Any]:
        return self.measure(data) >= self.l
