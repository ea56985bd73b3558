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

from anonweb.core import schema as sch
from anonweb.core.errors import ParameterError
from anonweb.core.models.base import (
    HIGHER,
    CliFlag,
    Figure,
    PrivacyModel,
    cli_number,
    require_column,
    require_int,
    require_number,
)
from anonweb.core.models.counts import ClassData, SensitiveCounts

DEFAULT_C = 2.0


def recursive_l(sc: SensitiveCounts, c: float) -> NDArray[Any]:
    """Per class, the largest l with r1 < c (r_l + ... + r_m); 0 if not even l = 1."""
    if not c > 0:
        raise ParameterError(f"recursive diversity needs c > 0, got {c}")
    # whole classes at a time: a histogram of 10^8 records has tens of millions of triples
    starts = sc.starts
    out = np.zeros(sc.n_classes, dtype=np.int64)
    for s, e, j0, j1 in sc.slices():
        cnt, local = sc.cnt[s:e], sc.cls[s:e] - j0
        before = np.cumsum(cnt, dtype=np.int64)
        before -= cnt  # counts of the triples before this one in the slice
        before -= before[starts[j0:j1] - s].take(local)  # ... within its class
        tail = sc.sizes[j0:j1].take(local)
        tail -= before  # r_l + ... + r_m for l = rank of this triple + 1
        del before
        bound = np.multiply(tail, c)
        del tail
        # tail shrinks as l grows, so the ranks that pass form a prefix: count them.
        ok = sc.cnt[starts[j0:j1]].take(local) < bound
        out[j0:j1] = np.bincount(local[ok], minlength=j1 - j0)
    return out


def _recursive_spec(column: str | None, value: str) -> dict[str, Any]:
    """``--l-recursive SA=C,L``."""
    c, _, l_ = value.partition(",")
    return {
        "model": "recursive_cl",
        "sensitive": column,
        "c": cli_number(c, "--l-recursive"),
        "l": cli_number(l_, "--l-recursive", int),
    }


@dataclass(frozen=True)
class RecursiveCL(PrivacyModel):
    sensitive: str
    c: float
    l: int  # noqa: E741
    kind = "recursive_cl"
    monotonic = False
    schema = sch.obj(
        {
            "sensitive": sch.column("The sensitive column the model protects"),
            "c": sch.number(
                "The most frequent value is rarer than c times the l-th and later ones",
                exclusive_minimum=0,
                maximum=1e6,
            ),
            "l": sch.integer("l", minimum=1, maximum=10_000),
        },
        required=["sensitive", "c", "l"],
        labels={"sensitive": "Sensitive column", "c": "c", "l": "l"},
        title="Recursive (c,l)-diversity",
    )
    # measured by the profile at its own c (recursive_c), shown with it
    figures = (Figure("l_recursive", "recursive l", HIGHER, own_cell=True),)
    cli_flags = (CliFlag("--l-recursive", "SA=C,L", lambda col, v: _recursive_spec(col, v)),)

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
