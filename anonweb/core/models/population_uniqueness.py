"""A ceiling on the estimated share of the population that is unique on the quasi-identifiers,
as ARX's ``PopulationUniqueness`` criterion enforces it.

The estimate comes from the sizes of the kept classes and the population size, by the models
the risk page shows (:mod:`anonweb.core.risk.population`): Pitman, Zayatz, SNB, or Dankar et
al.'s rule choosing among them by the sampling fraction (the default, as in ARX). A property of
the kept table as a whole: after the per-class models, the smallest classes are suppressed
while the limit allows until it holds (:mod:`.table_wide`, ARX's rule).

As ARX does, an estimate of zero passes only when the table has no sample uniques (a model that
did not converge reports nothing, and a table with uniques is not taken to have none), and a
table with every record suppressed passes. ARX declares the criterion not monotonic with
generalization (a merge changes the shape the models are fitted to); so does this one, and the
search checks every node.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from anonweb.core import schema as sch
from anonweb.core.errors import ParameterError
from anonweb.core.models.base import (
    CliFlag,
    CliOption,
    PrivacyModel,
    cli_number,
    require_int,
    require_number,
)
from anonweb.core.models.counts import ClassData
from anonweb.core.risk.population import (
    dankar_uniques,
    pitman_uniques,
    snb_uniques,
    zayatz_uniques,
)

ESTIMATORS = ("dankar", "pitman", "zayatz", "snb")
TOLERANCE = 1e-12


def estimated_uniqueness(sizes: NDArray[Any], population_size: int, estimator: str) -> float:
    """The estimated share of the population unique on the classes ``sizes`` (of a sample of
    ``population_size``): infinite when the model gives no estimate for a table with uniques
    (no ceiling admits it), 0 without sample uniques or without records."""
    sizes = np.asarray(sizes, dtype=np.int64)
    n = int(sizes.sum())
    if n == 0 or not np.any(sizes == 1):
        return 0.0
    if estimator == "dankar":
        uniques = dankar_uniques(sizes, population_size)
    elif population_size == n:  # the sample is the population
        uniques = float(np.count_nonzero(sizes == 1))
    elif estimator == "pitman":
        uniques = pitman_uniques(sizes, population_size)
    elif estimator == "zayatz":
        uniques = zayatz_uniques(sizes, population_size)
    else:
        uniques = snb_uniques(sizes, population_size)
    if math.isnan(uniques) or uniques <= 0:
        return math.inf
    return uniques / population_size


@dataclass(frozen=True)
class PopulationUniqueness(PrivacyModel):
    """Ceiling on the estimated population uniqueness of the kept table (ARX's criterion)."""

    max: float
    population_size: int
    estimator: str = "dankar"
    sensitive: None = field(default=None, init=False, repr=False, compare=False)
    kind = "population_uniqueness"
    monotonic = False
    per_class = False
    worst = "max"
    schema = sch.obj(
        {
            "max": sch.number(
                "Ceiling on the estimated share of the population that is unique",
                exclusive_minimum=0,
                maximum=1,
            ),
            "population_size": sch.integer(
                "Size of the population the table was drawn from", minimum=1, maximum=10**12
            ),
            "estimator": sch.string(
                "Model estimating population uniques (Dankar et al.'s rule picks one by the "
                "sampling fraction)",
                enum=ESTIMATORS,
                default="dankar",
            ),
        },
        required=["max", "population_size"],
        labels={
            "max": "Highest population uniqueness",
            "population_size": "Population size",
            "estimator": "Estimator",
        },
        title="Population uniqueness",
    )
    cli_flags = (
        CliFlag(
            "--population-uniqueness",
            "R: ceiling on the estimated population uniqueness (with --population-size)",
            lambda _col, v: {
                "model": "population_uniqueness",
                "max": cli_number(v, "--population-uniqueness"),
            },
            per_column=False,
            value_type=str,
            options=(
                CliOption("--population-size", "N: size of the population", "population_size", int),
            ),
        ),
    )

    def __post_init__(self) -> None:
        value = require_number(self.max, "the population-uniqueness ceiling")
        if not 0 < value <= 1:
            raise ParameterError(
                f"the population-uniqueness ceiling must be in (0, 1], got {self.max}"
            )
        require_int(self.population_size, "the population size", minimum=1)
        if self.estimator not in ESTIMATORS:
            raise ParameterError(
                f"unknown estimator {self.estimator!r} (one of {', '.join(ESTIMATORS)})"
            )

    def describe(self) -> str:
        return (
            f"population uniqueness <= {self.max} ({self.estimator}, population "
            f"{self.population_size:,})"
        )

    @property
    def sizes_only(self) -> bool:
        return True

    def _value(self, sizes: NDArray[Any]) -> float:
        if int(np.asarray(sizes).sum()) > self.population_size:
            raise ParameterError(
                f"the population ({self.population_size:,}) cannot be smaller than the table "
                f"({int(np.asarray(sizes).sum()):,} rows)"
            )
        return estimated_uniqueness(sizes, self.population_size, self.estimator)

    def measure(self, data: ClassData) -> NDArray[Any]:
        """Not a per-class figure: every class shows the table's estimate."""
        return np.full(len(data), self._value(data.sizes))

    def passes(self, data: ClassData) -> NDArray[Any]:
        return np.full(len(data), self.satisfied(data))

    def satisfied_in_groups(
        self, data: ClassData, groups: NDArray[Any], n_groups: int
    ) -> NDArray[Any]:
        order = np.argsort(groups, kind="stable")
        bounds = np.searchsorted(groups[order], np.arange(n_groups + 1))
        sizes = data.sizes[order]
        out = np.empty(n_groups, dtype=bool)
        for g in range(n_groups):
            value = self._value(sizes[bounds[g] : bounds[g + 1]])
            out[g] = value <= self.max + TOLERANCE
        return out

    def table_value(self, data: ClassData) -> float | None:
        if len(data) == 0:
            return None
        value = self._value(data.sizes)
        return value if math.isfinite(value) else None
