"""Distinct l-diversity (Machanavajjhala et al. 2007): every class holds at least l distinct
sensitive values. Monotonic even with suppression: merging classes never loses a value."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from anonweb.core import schema as sch
from anonweb.core.models.base import (
    HIGHER,
    CliFlag,
    Figure,
    ModelCheck,
    PrivacyModel,
    cli_number,
    require_column,
    require_int,
)
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
    schema = sch.obj(
        {
            "sensitive": sch.column("The sensitive column the model protects"),
            "l": sch.integer("Distinct sensitive values per class", minimum=1, maximum=10_000),
        },
        required=["sensitive", "l"],
        labels={"sensitive": "Sensitive column", "l": "Different values per class (l)"},
        title="Distinct l-diversity",
    )
    figures = (
        Figure(
            "l_distinct",
            "distinct l",
            HIGHER,
            measure=lambda data, col: distinct_values(data.sensitive(col)),
        ),
    )
    cli_flags = (
        CliFlag(
            "--l-distinct",
            "SA=L",
            lambda col, v: {
                "model": "distinct_l",
                "sensitive": col,
                "l": cli_number(v, "--l-distinct", int),
            },
        ),
    )
    policy_code = "risk_l"

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

    def policy_message(self, check: ModelCheck, *, quasi_identifiers: Sequence[str]) -> str:
        what = (
            "every member shares the same value, which is disclosed"
            if self.l == 2
            else f"fewer than {self.l} distinct values"
        )
        return (
            f"After the plan, {check.failing_records} record(s) in "
            f"{check.failing_classes} class(es) on {', '.join(quasi_identifiers)} have "
            f"{self.sensitive} where {what} (policy: l = {self.l})."
        )

    def policy_facts(self, check: ModelCheck) -> dict[str, Any]:
        return {"l": None if check.value is None else int(check.value), "policy_l": self.l}
