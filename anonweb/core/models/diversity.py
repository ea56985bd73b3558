"""Homogeneity of a sensitive attribute in a table: the l-diversity models and δ-disclosure.

The figures come from the model modules (one definition each): :mod:`.distinct_l`,
:mod:`.entropy_l`, :mod:`.recursive_l`, :mod:`.delta_disclosure`. For each, the table's figure is
the worst class's: the smallest l, the largest δ.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.errors import ParameterError
from anonweb.core.models.counts import SensitiveCounts, counts_for, sensitive_counts
from anonweb.core.models.delta_disclosure import delta_all_values, delta_per_class
from anonweb.core.models.distinct_l import distinct_values
from anonweb.core.models.entropy_l import entropy, entropy_l
from anonweb.core.models.recursive_l import DEFAULT_C, recursive_l
from anonweb.core.risk.classes import json_value

__all__ = [
    "DEFAULT_C",
    "LDiversity",
    "SensitiveCounts",
    "counts_for",
    "delta_per_class",
    "entropy",
    "l_diversity",
    "l_diversity_of",
    "recursive_l",
    "sensitive_counts",
]


@dataclass(frozen=True)
class LDiversity:
    """l-diversity of one sensitive attribute (table figures; per-class data in ``per_class``).

    ``delta_disclosure`` is the δ-disclosure model's figure (log2, over the values a class
    holds); ``delta_disclosure_all_values`` counts the values a class lacks too (infinite, None
    in JSON, when some class lacks a value of the table).
    """

    attribute: str
    l_distinct: int
    l_entropy: float
    recursive_c: float
    l_recursive: int
    delta_disclosure: float
    delta_disclosure_all_values: float
    homogeneous_classes: int
    homogeneous_records: int
    counts: SensitiveCounts = field(repr=False, compare=False)

    def satisfies_recursive(self, *, c: float, l: int) -> bool:  # noqa: E741 (the paper's name)
        """Whether every class satisfies recursive (c, l)-diversity."""
        if l < 1:
            raise ParameterError(f"recursive diversity needs l >= 1, got {l}")
        return bool((recursive_l(self.counts, c) >= l).all())

    def per_class(self) -> dict[str, list[Any]]:
        """Per-class lists (aligned with the class order), ready for charts."""
        sc = self.counts
        starts = sc.starts
        return {
            "size": sc.sizes.tolist(),
            "l_distinct": distinct_values(sc).tolist(),
            "l_entropy": entropy_l(sc).tolist(),
            "l_recursive": recursive_l(sc, self.recursive_c).tolist(),
            "delta": delta_per_class(sc).tolist(),
            "top_value": [json_value(sc.values[v]) for v in sc.val[starts]],
            "top_share": (sc.cnt[starts] / sc.sizes).tolist(),
        }

    def homogeneous(
        self,
        df: pd.DataFrame | Callable[[NDArray[Any]], pd.DataFrame],
        *,
        limit: int | None = None,
    ) -> list[dict[str, Any]]:
        """Classes whose members all share one sensitive value: QI values, size and the value
        (``df``: the table, or a function giving its rows at given positions)."""
        sc = self.counts
        if sc.classes is None:
            raise ParameterError("these counts were not grouped from a table")
        which = np.flatnonzero(sc.distinct == 1)
        which = which[np.argsort(-sc.sizes[which], kind="stable")][:limit]
        qis = sc.classes.describe(df, which)
        starts = sc.starts[which]
        return [
            {"quasi_identifiers": q, "size": int(sc.sizes[j]), "value": json_value(sc.values[v])}
            for q, j, v in zip(qis, which, sc.val[starts], strict=True)
        ]

    def to_dict(self) -> dict[str, Any]:
        return {
            "l_distinct": self.l_distinct,
            "l_entropy": self.l_entropy,
            "recursive_c": self.recursive_c,
            "l_recursive": self.l_recursive,
            "delta_disclosure": self.delta_disclosure,
            "delta_disclosure_all_values": (
                None
                if np.isinf(self.delta_disclosure_all_values)
                else self.delta_disclosure_all_values
            ),
            "homogeneous_classes": self.homogeneous_classes,
            "homogeneous_records": self.homogeneous_records,
            "distinct_values": len(self.counts.values),
        }


def l_diversity_of(sc: SensitiveCounts, *, recursive_c: float = DEFAULT_C) -> LDiversity:
    distinct = distinct_values(sc)
    homogeneous = distinct == 1
    return LDiversity(
        attribute=sc.attribute,
        l_distinct=int(distinct.min()),
        l_entropy=float(np.exp(entropy(sc).min())),
        recursive_c=float(recursive_c),
        l_recursive=int(recursive_l(sc, recursive_c).min()),
        delta_disclosure=float(delta_per_class(sc).max()),
        delta_disclosure_all_values=float(delta_all_values(sc).max()),
        homogeneous_classes=int(homogeneous.sum()),
        homogeneous_records=int(sc.sizes[homogeneous].sum()),
        counts=sc,
    )


def l_diversity(
    df: pd.DataFrame,
    *,
    quasi_identifiers: Sequence[str],
    sensitive: str,
    recursive_c: float = DEFAULT_C,
) -> LDiversity:
    """Distinct, entropy and recursive (c,l)-diversity and δ-disclosure of ``sensitive``."""
    sc = counts_for(df, quasi_identifiers=quasi_identifiers, sensitive=sensitive)
    return l_diversity_of(sc, recursive_c=recursive_c)
