"""Ceilings on sdcMicro's risk of survey microdata, as team-policy thresholds of the release gate:
the global risk (the mean individual risk, expected re-identifications per record) and the
household risk (``1 - prod(1 - r_i)`` over a household's members).

Both read the classes' sample frequencies and the sums of their records' survey weights
(``f_k``, ``F_k``: :func:`anonweb.core.risk.individual.class_risk`, the one definition of the
Benedetti-Franconi estimator), and the household risk the household id of each record
(:func:`anonweb.core.risk.individual.household_risk`). They are properties of the kept table as
a whole and read each record's weight and household, so they are judged where the records are
at hand (the gate, the assessment), not by the search's roll-ups, which refuse them with a
reason. Without a weight column every record stands for itself (``F_k = f_k``, the risk is
``1/f_k``, sdcMicro's figure for unweighted data).
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core import schema as sch
from anonweb.core.errors import ParameterError
from anonweb.core.models.base import PrivacyModel, require_column, require_number
from anonweb.core.models.counts import ClassData
from anonweb.core.risk.individual import class_risk, household_risk

TOLERANCE = 1e-12


def _ceiling(value: object, what: str) -> float:
    number = require_number(value, what)
    if not 0 < number <= 1:
        raise ParameterError(f"{what} must be in (0, 1], got {value!r}")
    return number


def _weights_schema() -> sch.Schema:
    return sch.column(
        "The survey-weight column (blank: every record stands for itself)", numeric=True
    )


class _TableWide(PrivacyModel):
    """What the two ceilings share: a table-wide figure compared with ``max``."""

    max: float
    weights: str | None
    sensitive: None
    monotonic = False
    per_class = False
    worst = "max"

    def _record_risk(self, data: ClassData) -> NDArray[Any]:
        """The individual risk of each class's records."""
        return class_risk(data.sizes, data.weight_sums(self.weights, self.describe()))

    @abstractmethod
    def figure(self, data: ClassData) -> float:
        """The table's figure compared with ``max``."""

    def passes(self, data: ClassData) -> NDArray[Any]:
        """Not a per-class model: every class shares the table's answer."""
        return np.full(len(data), self.satisfied(data))

    def satisfied(self, data: ClassData) -> bool:
        return len(data) == 0 or self.figure(data) <= self.max + TOLERANCE

    def satisfied_in_groups(
        self, data: ClassData, groups: NDArray[Any], n_groups: int
    ) -> NDArray[Any]:
        if n_groups != 1:
            data.record_values(self.weights or "", self.describe())  # refused: no records
        return np.asarray([self.satisfied(data)])

    def table_value(self, data: ClassData) -> float | None:
        return self.figure(data) if len(data) else None


@dataclass(frozen=True)
class GlobalRisk(_TableWide):
    """Ceiling on sdcMicro's global risk: the mean individual risk of the records kept."""

    max: float
    weights: str | None = None
    sensitive: None = field(default=None, init=False, repr=False, compare=False)
    kind = "global_risk"
    policy_code = "risk_global"
    schema = sch.obj(
        {
            "max": sch.number(
                "Highest global risk: expected re-identifications per record",
                exclusive_minimum=0,
                maximum=1,
            ),
            "weights": _weights_schema(),
        },
        required=["max"],
        labels={"max": "Highest global risk", "weights": "Survey-weight column"},
        title="Global re-identification risk (sdcMicro)",
    )

    def __post_init__(self) -> None:
        _ceiling(self.max, "the global-risk ceiling")
        if self.weights is not None:
            require_column(self.weights, "the weight column")

    def describe(self) -> str:
        weighted = f", weights {self.weights!r}" if self.weights else ""
        return f"global risk <= {self.max:g}{weighted}"

    def measure(self, data: ClassData) -> NDArray[Any]:
        """Each class's individual risk (its records')."""
        return self._record_risk(data)

    @property
    def sizes_only(self) -> bool:
        return self.weights is None  # every record then stands for itself: 1 / its class's size

    def figure(self, data: ClassData) -> float:
        risk = self._record_risk(data)
        records = int(data.sizes.sum())
        return float((risk * data.sizes).sum() / records) if records else 0.0


@dataclass(frozen=True)
class HouseholdRiskCeiling(_TableWide):
    """Ceiling on sdcMicro's household risk: the highest over the households kept."""

    max: float
    household: str
    weights: str | None = None
    sensitive: None = field(default=None, init=False, repr=False, compare=False)
    kind = "household_risk"
    policy_code = "risk_household"
    schema = sch.obj(
        {
            "max": sch.number(
                "Highest household risk: chance that some member of a household is re-identified",
                exclusive_minimum=0,
                maximum=1,
            ),
            "household": sch.column("The household-id column"),
            "weights": _weights_schema(),
        },
        required=["max", "household"],
        labels={
            "max": "Highest household risk",
            "household": "Household-id column",
            "weights": "Survey-weight column",
        },
        title="Household re-identification risk (sdcMicro)",
    )

    def __post_init__(self) -> None:
        _ceiling(self.max, "the household-risk ceiling")
        require_column(self.household, "the household column")
        if self.weights is not None:
            require_column(self.weights, "the weight column")

    def describe(self) -> str:
        weighted = f", weights {self.weights!r}" if self.weights else ""
        return f"household risk <= {self.max:g} (households {self.household!r}{weighted})"

    def _households(self, data: ClassData) -> NDArray[Any]:
        """The household risk of each record kept."""
        ids = data.record_values(self.household, self.describe())
        per_record = self._record_risk(data)[data.record_class]
        frame = pd.DataFrame({self.household: ids})
        return household_risk(frame, household=self.household, individual=per_record).risk

    def measure(self, data: ClassData) -> NDArray[Any]:
        """Each class's highest household risk among its records."""
        out = np.zeros(len(data))
        households = self._households(data)  # refused first where there are no records
        np.maximum.at(out, np.asarray(data.record_class), households)
        return out

    def figure(self, data: ClassData) -> float:
        risk = self._households(data)
        return float(risk.max()) if risk.size else 0.0
