"""δ-presence (Nergiz, Atzori & Clifton 2007): an attacker who knows a person is in the
population learns little about whether the person is in the released table.

The table is a subset of a population table (ARX's research subset). For each class, δ is the
share of the population's class that is in the table (sample count / population count, counted
at the same generalization node); a class passes when δmin <= δ <= δmax, as ARX's
``DPresence`` decides (``count / pcount``). Classes of the population with nobody in the
table have δ = 0 and hold no record of the table, so suppressing them costs nothing: only the
table's classes are checked.

Not monotonic: merging classes averages their δ, so a generalization of an accepted node can
fail δmin or δmax (ARX declares ``DPresence`` not monotonic with suppression, and so does this
model: the search checks every node it cannot rule out by its bound).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from anonweb.core import schema as sch
from anonweb.core.errors import ParameterError
from anonweb.core.models.base import CliFlag, PrivacyModel, require_number
from anonweb.core.models.counts import ClassData


def _spec(text: str) -> dict[str, Any]:
    low, sep, high = text.partition(":")
    if not sep:
        raise ParameterError(f"--delta-presence: expected MIN:MAX (e.g. 0:0.5), got {text!r}")
    values = []
    for part in (low, high):
        try:
            values.append(float(part))
        except ValueError:
            raise ParameterError(f"--delta-presence: {part!r} is not a number") from None
    return {"model": "delta_presence", "min": values[0], "max": values[1]}


@dataclass(frozen=True)
class DeltaPresence(PrivacyModel):
    """(δmin, δmax)-presence against a population table."""

    min: float
    max: float
    population: Any = field(default=None, repr=False, compare=False)
    sensitive: None = field(default=None, init=False, repr=False, compare=False)
    kind = "delta_presence"
    monotonic = False
    worst = "max"
    schema = sch.obj(
        {
            "min": sch.number(
                "Smallest share of a population class that may be in the table",
                minimum=0,
                maximum=1,
            ),
            "max": sch.number(
                "Largest share of a population class that may be in the table",
                minimum=0,
                maximum=1,
            ),
        },
        required=["min", "max"],
        labels={"min": "δ min", "max": "δ max"},
        title="δ-presence (population table)",
    )
    cli_flags = (
        CliFlag(
            "--delta-presence",
            "MIN:MAX: each class of the population has between MIN and MAX of its people in "
            "the table (with --population-table)",
            lambda _col, v: _spec(v),
            per_column=False,
            value_type=str,
        ),
    )
    policy_threshold = False

    def __post_init__(self) -> None:
        low = require_number(self.min, "δ min")
        high = require_number(self.max, "δ max")
        if not 0 <= low <= high <= 1:
            raise ParameterError(f"δ-presence needs 0 <= δ min <= δ max <= 1, got {low}:{high}")

    def with_population(self, population: Any) -> PrivacyModel:
        if population is None:
            raise ParameterError(
                "δ-presence needs a population table (--population-table, or a population "
                "dataset of the team)"
            )
        return dataclasses.replace(self, population=population)

    def describe(self) -> str:
        where = "" if self.population is None else f" ({self.population.mention()})"
        return f"({self.min:g}, {self.max:g})-presence{where}"

    def measure(self, data: ClassData) -> NDArray[Any]:
        """δ of each class: its size over its population's."""
        if self.population is None:
            raise ParameterError("δ-presence is checked against a population table")
        pop = data.population_sizes(self.population)
        return np.divide(data.sizes, pop, out=np.full(len(pop), np.inf), where=pop > 0)

    def passes(self, data: ClassData) -> NDArray[Any]:
        delta = self.measure(data)
        return np.asarray((delta >= self.min) & (delta <= self.max))
