"""k-anonymity (Sweeney 2002): every class holds at least k records.

Also the table's k-anonymity figures (smallest class, classes, uniques, class-size histogram)
that the risk profile reports.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core import schema as sch
from anonweb.core.models.base import ModelCheck, PrivacyModel, require_int
from anonweb.core.models.counts import ClassData
from anonweb.core.risk.classes import EquivalenceClasses, equivalence_classes


@dataclass(frozen=True)
class KAnonymity(PrivacyModel):
    """Every class (kept after suppression) has at least ``k`` records."""

    k: int
    sensitive: None = field(default=None, init=False, repr=False, compare=False)
    kind = "k_anonymity"
    monotonic = True
    schema = sch.obj(
        {"k": sch.integer("Smallest class size", minimum=1, maximum=sch.MAX_K)},
        required=["k"],
        labels={"k": "Smallest class size (k)"},
        title="k-anonymity",
    )
    policy_code = "risk_k"

    def __post_init__(self) -> None:
        object.__setattr__(self, "k", require_int(self.k, "k", minimum=1))

    def describe(self) -> str:
        return f"{self.k}-anonymity"

    def measure(self, data: ClassData) -> NDArray[Any]:
        # a class's size; after local suppression, the blank-aware count (a blank matches
        # every value, as sdcMicro counts NA): a blanked record hides among more records
        return data.indistinguishable

    def passes(self, data: ClassData) -> NDArray[Any]:
        return np.asarray(data.indistinguishable >= self.k)

    def policy_message(self, check: ModelCheck, *, quasi_identifiers: Sequence[str]) -> str:
        k = None if check.value is None else int(check.value)
        return (
            f"After the plan, k is {k} on {', '.join(quasi_identifiers)}: "
            f"{check.failing_records} record(s) in {check.failing_classes} class(es) "
            f"smaller than the policy's k = {self.k}."
        )

    def policy_facts(self, check: ModelCheck) -> dict[str, Any]:
        k = None if check.value is None else int(check.value)
        return {"k": k, "policy_k": self.k, "classes": check.failing_classes}


@dataclass(frozen=True)
class KAnonymityResult:
    """k (smallest class), number of classes, uniques and the class-size distribution."""

    rows: int
    classes: int
    k: int
    uniques: int
    class_sizes: tuple[tuple[int, int], ...]  # (size, number of classes), ascending

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "classes": self.classes,
            "k": self.k,
            "uniques": self.uniques,
            "class_sizes": [
                {"size": s, "classes": c, "records": s * c} for s, c in self.class_sizes
            ],
        }


def k_anonymity_of(ec: EquivalenceClasses) -> KAnonymityResult:
    dist = tuple((d["size"], d["classes"]) for d in ec.size_distribution())
    return KAnonymityResult(ec.rows, ec.count, ec.k, ec.uniques, dist)


def k_anonymity(df: pd.DataFrame, *, quasi_identifiers: Sequence[str]) -> KAnonymityResult:
    """k-anonymity of ``df`` over the quasi-identifiers (missing values form their own class)."""
    return k_anonymity_of(equivalence_classes(df, quasi_identifiers=quasi_identifiers))
