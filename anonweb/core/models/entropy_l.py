"""Entropy l-diversity (Machanavajjhala et al. 2007): in every class the entropy of the
sensitive values (natural log) is at least log(l).

The figure reported per class is exp(entropy), kept as a float (pycanon floors it to an integer,
which reports 2 for a class whose entropy l is 2.9). Not monotonic with suppression: a class
that fails may be merged into one that passes, and the merged class may fail while the
suppressed one no longer counts.
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
    require_number,
)
from anonweb.core.models.counts import ClassData, SensitiveCounts

# exactly l equally frequent values are l-diverse, though log sums land a hair below log(l)
TOLERANCE = 1e-12


def entropy(sc: SensitiveCounts) -> NDArray[Any]:
    """Natural-log entropy of the sensitive attribute within each class."""
    out = np.zeros(sc.n_classes)
    for s, e, j0, j1 in sc.slices():  # whole classes at a time: the same sums, less memory
        p = sc.slice_share(s, e)
        terms = np.log(p)
        terms *= p
        out[j0:j1] = np.bincount(sc.cls[s:e] - j0, weights=terms, minlength=j1 - j0)
    return -out


def entropy_l(sc: SensitiveCounts) -> NDArray[Any]:
    """exp(entropy) of each class: the largest l for which it is entropy l-diverse."""
    return np.asarray(np.exp(entropy(sc)))


@dataclass(frozen=True)
class EntropyL(PrivacyModel):
    sensitive: str
    l: float  # noqa: E741
    kind = "entropy_l"
    monotonic = False
    schema = sch.obj(
        {
            "sensitive": sch.column("The sensitive column the model protects"),
            "l": sch.number(
                "exp(entropy) of each class's sensitive values", minimum=1, maximum=10_000
            ),
        },
        required=["sensitive", "l"],
        labels={"sensitive": "Sensitive column", "l": "Entropy l"},
        title="Entropy l-diversity",
    )
    figures = (
        Figure(
            "l_entropy",
            "entropy l",
            HIGHER,
            digits=3,
            measure=lambda data, col: entropy_l(data.sensitive(col)),
        ),
    )
    cli_flags = (
        CliFlag(
            "--l-entropy",
            "SA=L",
            lambda col, v: {
                "model": "entropy_l",
                "sensitive": col,
                "l": cli_number(v, "--l-entropy"),
            },
        ),
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "sensitive", require_column(self.sensitive))
        value = require_number(self.l, "entropy l-diversity's l")
        if value < 1:
            raise ParameterError(f"entropy l-diversity needs l >= 1, got {self.l}")
        object.__setattr__(self, "l", self.l if isinstance(self.l, int) else value)

    def describe(self) -> str:
        return f"entropy {self.l}-diversity on {self.sensitive}"

    def measure(self, data: ClassData) -> NDArray[Any]:
        return entropy_l(data.sensitive(self.sensitive))

    def passes(self, data: ClassData) -> NDArray[Any]:
        return np.asarray(entropy(data.sensitive(self.sensitive)) >= np.log(self.l) - TOLERANCE)
