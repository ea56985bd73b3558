"""What every privacy model offers: one object per model, the checks everyone calls.

A model answers for each class at once (NumPy over all classes, never a loop): its figure
(:meth:`PrivacyModel.measure`: the class size, the number of distinct values, the distance, ...)
and whether the class satisfies it (:meth:`PrivacyModel.passes`). The threshold comparison is
written once, in the model, so the search, the assessment, the release report and the conflict
check cannot disagree on a boundary case.

A model whose ``per_class`` is false (average risk) is a property of the kept table as a whole:
:meth:`PrivacyModel.satisfied` decides it; the search evaluates it after suppression.

``monotonic`` says whether the model stays satisfied when a node is generalized further *with
suppression*, which lets the search settle whole sublattices without checking them; a model
declared monotonic that is not makes the search return a worse node than the optimum.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from anonweb.core.errors import ParameterError
from anonweb.core.models.counts import ClassData


@dataclass(frozen=True)
class ModelCheck:
    """A model checked on a table: satisfied or not, the table's figure and what fails."""

    model: dict[str, Any]
    description: str
    satisfied: bool
    value: float | None  # the table's figure: smallest k or l, largest t or δ, average risk
    failing_classes: int
    failing_records: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": dict(self.model),
            "description": self.description,
            "satisfied": self.satisfied,
            "value": self.value,
            "failing_classes": self.failing_classes,
            "failing_records": self.failing_records,
        }


class PrivacyModel(ABC):
    """Base of the privacy models; subclasses are frozen dataclasses of their parameters."""

    kind: ClassVar[str]
    monotonic: ClassVar[bool]
    per_class: ClassVar[bool] = True
    # which end of the per-class figures is the table's figure: "min" (k, l) or "max" (t, δ)
    worst: ClassVar[str] = "min"
    fields: ClassVar[tuple[str, ...]]

    # the sensitive column the model protects (None for k-anonymity and average risk)
    sensitive: str | None

    @abstractmethod
    def describe(self) -> str:
        """A short phrase for reports: ``distinct 2-diversity on disease``."""

    @abstractmethod
    def measure(self, data: ClassData) -> NDArray[Any]:
        """The model's figure for each class."""

    @abstractmethod
    def passes(self, data: ClassData) -> NDArray[Any]:
        """For each class, whether it satisfies the model (all True for a table-wide model)."""

    def implied(self) -> tuple[PrivacyModel, ...]:
        """Monotonic models that every class satisfying this one satisfies too (necessary
        conditions): a search can settle whole sublattices with them before it checks this
        model itself. None by default."""
        return ()

    def satisfied(self, data: ClassData) -> bool:
        """Whether the classes, as a table, satisfy the model."""
        return bool(self.satisfied_in_groups(data, np.zeros(len(data), dtype=np.int64), 1)[0])

    def satisfied_in_groups(
        self, data: ClassData, groups: NDArray[Any], n_groups: int
    ) -> NDArray[Any]:
        """:meth:`satisfied` for several tables at once (the nodes of a search batch), the
        classes assigned to tables by ``groups``."""
        failing = np.bincount(groups, weights=~self.passes(data), minlength=n_groups)
        return np.asarray(failing == 0)

    def table_value(self, data: ClassData) -> float | None:
        """The table's figure (the worst class's, or the table-wide one); None without classes."""
        if len(data) == 0:
            return None
        figures = self.measure(data)
        value = figures.min() if self.worst == "min" else figures.max()
        return float(value)

    def check(self, data: ClassData) -> ModelCheck:
        """The model on a whole table: what the release report and the policy show."""
        ok = self.passes(data) if self.per_class else np.ones(len(data), dtype=bool)
        return ModelCheck(
            model=self.to_dict(),
            description=self.describe(),
            satisfied=self.satisfied(data),
            value=self.table_value(data),
            failing_classes=int((~ok).sum()),
            failing_records=int(data.sizes[~ok].sum()),
        )

    def to_dict(self) -> dict[str, Any]:
        """The JSON form :func:`anonweb.core.models.model_from_dict` reads back."""
        return {"model": self.kind, **{f: getattr(self, f) for f in self.fields}}


def require_int(value: object, what: str, *, minimum: int) -> int:
    """``value`` as an int >= ``minimum``; booleans and floats are refused, not rounded."""
    if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < minimum:
        wanted = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ParameterError(f"{what} must be {wanted}, got {value!r}")
    return int(value)


def require_number(value: object, what: str) -> float:
    """``value`` as a finite float; booleans and text are refused."""
    if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
        raise ParameterError(f"{what} must be a number, got {value!r}")
    number = float(value)
    if not np.isfinite(number):
        raise ParameterError(f"{what} must be a finite number, got {value!r}")
    return number


def require_column(value: object, what: str = "the sensitive column") -> str:
    if not isinstance(value, str) or not value:
        raise ParameterError(f"{what} must be a column name, got {value!r}")
    return value
