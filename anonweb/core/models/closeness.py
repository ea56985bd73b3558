"""t-closeness of a sensitive attribute in a table: the largest class distance.

The distances are those of the t-closeness model (:mod:`.t_closeness`), one definition.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from numpy.typing import NDArray

from anonweb.core.io.hierarchy import Hierarchy
from anonweb.core.models.counts import SensitiveCounts, counts_for, value_ranks
from anonweb.core.models.t_closeness import (
    DISTANCES,
    distance_per_class,
    equal_distance,
    hierarchical_distance,
    hierarchy_nodes,
    ordered_distance,
    pick_distance,
)

__all__ = [
    "DISTANCES",
    "TClosenessResult",
    "equal_distance",
    "hierarchical_distance",
    "hierarchy_nodes",
    "ordered_distance",
    "pick_distance",
    "t_closeness",
    "t_closeness_of",
    "value_ranks",
]


@dataclass(frozen=True)
class TClosenessResult:
    """t (largest class distance) for one sensitive attribute and the distance used."""

    attribute: str
    t: float
    distance: str
    per_class_t: NDArray[Any] = field(repr=False, compare=False)

    def satisfies(self, t: float) -> bool:
        return self.t <= t

    def per_class(self) -> dict[str, list[Any]]:
        return {"t": self.per_class_t.tolist()}

    def to_dict(self) -> dict[str, Any]:
        return {"t_closeness": self.t, "t_distance": self.distance}


def t_closeness_of(
    sc: SensitiveCounts, series: pd.Series, *, distance: str | None, hierarchy: Hierarchy | None
) -> TClosenessResult:
    kind = pick_distance(series, hierarchy, distance)
    per = distance_per_class(sc, kind, hierarchy)
    return TClosenessResult(sc.attribute, float(per.max()), kind, per)


def t_closeness(
    df: pd.DataFrame,
    *,
    quasi_identifiers: Sequence[str],
    sensitive: str,
    distance: str | None = None,
    hierarchy: Hierarchy | None = None,
) -> TClosenessResult:
    """t-closeness of ``sensitive``; ``distance`` defaults as :func:`pick_distance` says."""
    sc = counts_for(df, quasi_identifiers=quasi_identifiers, sensitive=sensitive)
    return t_closeness_of(sc, df[sensitive], distance=distance, hierarchy=hierarchy)
