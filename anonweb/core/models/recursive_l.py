"""Recursive (c,l)-diversity (Machanavajjhala et al. 2007): in every class r1 < c (r_l + ... +
r_m), r_i the class's value counts in descending order. The comparison is strict: a class with
r1 = c (r_l + ... + r_m) is not (c,l)-diverse.

The figure reported per class is, for the given c, the largest l the class satisfies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from anonweb.core.errors import ParameterError
from anonweb.core.models.base import PrivacyModel, require_column, require_int, require_number
from anonweb.core.models.counts import ClassData, SensitiveCounts

DEFAULT_C = 2.0


def recursive_l(sc: SensitiveCounts, c: float) -> NDArray[Any]:
    """Per class, the largest l with r1 < c (r_l + ... + r_m); 0 if not even l = 1."""
    if not c > 0:
        raise ParameterError(f"recursive diversity needs c > 0, got {c}")
    sizes = sc.sizes[sc.cls]
    cum = np.cumsum(sc.cnt)
    before = cum - sc.cnt  # counts of the triples before this one, over all classes
    starts = sc.starts
    within_before = before - before[starts][sc.cls]
    tail = sizes - within_before  # r_l + ... + r_m for l = rank of this triple + 1
    top = sc.cnt[starts][sc.cls]
    # tail shrinks as l grows, so the ranks that pass form a prefix: count them.
    ok = top < c * tail
    return np.bincount(sc.cls, weights=ok, minlength=sc.n_classes).astype(np.int64)


@dataclass(frozen=True)
class RecursiveCL(PrivacyModel):
    sensitive: str
    c: float
    l: int  # noqa: E741
    kind = "recursive_cl"
    monotonic = False
    fields = ("sensitive", "c", "l")

    def __post_init__(self) -> None:
        object.__setattr__(self, "sensitive", require_column(self.sensitive))
        c = require_number(self.c, "recursive (c,l)-diversity's c")
        if c <= 0:
            raise ParameterError(f"recursive (c,l)-diversity needs c > 0, got c={self.c}")
        object.__setattr__(self, "l", require_int(self.l, "recursive diversity's l", minimum=1))

    def describe(self) -> str:
        return f"recursive ({self.c},{self.l})-diversity on {self.sensitive}"

    def measure(self, data: ClassData) -> NDArray[Any]:
        return recursive_l(data.sensitive(self.sensitive), self.c)

    def passes(self, data: ClassData) -> NDArray[Any]:
        return self.measure(data) >= self.l
