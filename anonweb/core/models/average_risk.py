"""A ceiling on the average prosecutor re-identification risk: classes / records kept.

A property of the kept table as a whole, not of each class: after the per-class models, the
smallest classes are suppressed while the limit allows until it holds (:mod:`.table_wide`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from anonweb.core import schema as sch
from anonweb.core.errors import ParameterError
from anonweb.core.models.base import CliFlag, PrivacyModel, require_number
from anonweb.core.models.counts import ClassData

TOLERANCE = 1e-12


def average_risk(sizes: NDArray[Any]) -> float:
    """Mean over records of 1 / (size of the record's class) = classes / records."""
    records = int(sizes.sum())
    return len(sizes) / records if records else 0.0


@dataclass(frozen=True)
class AverageRisk(PrivacyModel):
    """Ceiling on the average prosecutor re-identification risk (classes / records kept)."""

    threshold: float
    sensitive: None = field(default=None, init=False, repr=False, compare=False)
    kind = "average_risk"
    monotonic = False
    per_class = False
    worst = "max"
    field_aliases = {"max": "threshold"}
    schema = sch.obj(
        {
            "threshold": sch.number(
                "Ceiling on the average re-identification risk", exclusive_minimum=0, maximum=1
            )
        },
        required=["threshold"],
        labels={"threshold": "Highest average risk"},
        title="Average re-identification risk",
    )
    cli_flags = (
        CliFlag(
            "--average-risk",
            "ceiling on the average risk",
            lambda _col, v: {"model": "average_risk", "threshold": v},
            per_column=False,
            value_type=float,
        ),
    )

    def __post_init__(self) -> None:
        value = require_number(self.threshold, "the average-risk ceiling")
        if not 0 < value <= 1:
            raise ParameterError(
                f"the average-risk ceiling must be in (0, 1], got {self.threshold}"
            )

    def describe(self) -> str:
        return f"average re-identification risk <= {self.threshold}"

    @property
    def sizes_only(self) -> bool:
        return True

    def measure(self, data: ClassData) -> NDArray[Any]:
        """Each class's prosecutor risk, 1 / size."""
        return 1.0 / np.maximum(data.sizes, 1)

    def passes(self, data: ClassData) -> NDArray[Any]:
        """Not a per-class model: every class shares the table's answer."""
        return np.full(len(data), self.satisfied(data))

    def satisfied_in_groups(
        self, data: ClassData, groups: NDArray[Any], n_groups: int
    ) -> NDArray[Any]:
        # classes / records of each table; a table with nothing kept discloses nothing
        classes = np.bincount(groups, minlength=n_groups)
        records = np.bincount(groups, weights=data.sizes, minlength=n_groups)
        risk = np.where(records > 0, classes / np.maximum(records, 1), 0.0)
        return np.asarray(risk <= self.threshold + TOLERANCE)

    def satisfiable_in_groups(
        self, data: ClassData, groups: NDArray[Any], n_groups: int, max_out: int
    ) -> NDArray[Any]:
        # Whatever classes are suppressed, those kept hold all but ``max_out`` records or
        # more, so they are at least the fewest classes that hold that many (the largest
        # ones), and the records kept are at most all: classes / records kept is at least
        # fewest / records. Merged classes hold as many records in no more classes, so a
        # table that fails this fails at every finer node too
        sizes = np.asarray(data.sizes)
        records = np.bincount(groups, weights=sizes, minlength=n_groups)
        order = np.lexsort((-sizes, groups))  # each table's classes, largest first
        by_group, by_size = groups[order], sizes[order]
        held = np.cumsum(by_size) - by_size  # records of the larger classes before each
        starts = np.cumsum(records) - records
        needed = held - starts[by_group] < records[by_group] - max_out
        fewest = np.bincount(by_group, weights=needed, minlength=n_groups)
        risk = np.where(records > 0, fewest / np.maximum(records, 1), 0.0)
        return np.asarray(risk <= self.threshold + TOLERANCE)

    def table_value(self, data: ClassData) -> float | None:
        return average_risk(data.sizes) if len(data) else None
