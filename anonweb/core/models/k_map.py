"""k-map (Sweeney): each class matches at least k people of the population, here with the
population's class sizes estimated from the sample, as ARX's ``KMap`` does when it is given a
population model and an estimator instead of the population itself.

ARX's estimators (El Emam & Dankar, "Protecting privacy using k-anonymity", JAMIA 2008): with
the sampling fraction f = n / N (n the table's rows, N the population), a class of the sample
is taken to hold at least k people of the population when its sample size reaches a derived
k' computed once from λ = f·k:

* ``poisson`` (D3, Pannekoek 1999): k' = c + 1 for the first c where the Poisson(λ) CDF
  reaches 1 − α (ARX's loop, reproduced with its off-by-one as ARX returns it);
* ``zero_truncated_poisson`` (D4): k' = the first c past which the zero-truncated Poisson(λ)
  cumulative probability reaches 1 − α;

and k' is capped at n and at k. A class passes when its size is at least k'. So the model is
k-anonymity with k', monotonic as k-anonymity is.

The table's n is the table the search or the check is given (the rows the classes hold when
no table size was bound, e.g. a released table checked at the gate). k-map against a
population *table* (ARX's research subset, with the population's class counts rolled up per
node) is not offered: the spec is refused by its schema (no population table parameter).
"""

from __future__ import annotations

import dataclasses
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

ESTIMATORS = ("poisson", "zero_truncated_poisson")


def _poisson_pmf(c: int, lam: float) -> float:
    if lam == 0:
        return 1.0 if c == 0 else 0.0
    return math.exp(c * math.log(lam) - lam - math.lgamma(c + 1))


def derived_k(k: int, rows: int, population_size: int, estimator: str, significance: float) -> int:
    """ARX's k' for a table of ``rows`` drawn from ``population_size`` (see the module)."""
    lam = rows / population_size * k
    threshold = 1.0 - significance
    if estimator == "poisson":
        counter, value = 0, 0.0
        while value < threshold:
            value += _poisson_pmf(counter, lam)  # the CDF at counter
            counter += 1
        found = counter + 1
    else:
        v2 = 1.0 - _poisson_pmf(0, lam)
        counter, value = 1, 0.0
        while value < threshold:
            value += _poisson_pmf(counter, lam) / v2
            counter += 1
        found = counter
    return max(1, min(k, found, rows))


@dataclass(frozen=True)
class KMap(PrivacyModel):
    """k-map with the population's class sizes estimated (ARX's KMap with an estimator)."""

    k: int
    population_size: int
    estimator: str = "poisson"
    significance: float = 0.01
    # the rows of the table the sampling fraction is taken from (bound by the search)
    rows: int | None = field(default=None, repr=False, compare=False)
    sensitive: None = field(default=None, init=False, repr=False, compare=False)
    kind = "k_map"
    monotonic = True
    schema = sch.obj(
        {
            "k": sch.integer("Smallest number of people of the population per class", minimum=1),
            "population_size": sch.integer(
                "Size of the population the table was drawn from", minimum=1, maximum=10**12
            ),
            "estimator": sch.string(
                "How the population's class sizes are estimated (ARX's D3 or D4)",
                enum=ESTIMATORS,
                default="poisson",
            ),
            "significance": sch.number(
                "Significance level of the estimate", exclusive_minimum=0, exclusive_maximum=1
            ),
        },
        required=["k", "population_size"],
        labels={
            "k": "k (people per class in the population)",
            "population_size": "Population size",
            "estimator": "Estimator",
            "significance": "Significance level",
        },
        title="k-map (estimated population)",
    )
    cli_flags = (
        CliFlag(
            "--k-map",
            "K: each class matches at least K people of the population (with --population-size)",
            lambda _col, v: {"model": "k_map", "k": cli_number(v, "--k-map", int)},
            per_column=False,
            value_type=str,
            options=(
                CliOption("--population-size", "N: size of the population", "population_size", int),
            ),
        ),
    )

    def __post_init__(self) -> None:
        require_int(self.k, "k", minimum=1)
        require_int(self.population_size, "the population size", minimum=1)
        if self.estimator not in ESTIMATORS:
            raise ParameterError(
                f"unknown estimator {self.estimator!r} (one of {', '.join(ESTIMATORS)})"
            )
        alpha = require_number(self.significance, "the significance level")
        if not 0 < alpha < 1:
            raise ParameterError(f"the significance level must be in (0, 1), got {alpha}")

    def for_table(self, rows: int) -> PrivacyModel:
        return dataclasses.replace(self, rows=int(rows))

    def derived(self, rows: int) -> int:
        if rows > self.population_size:
            raise ParameterError(
                f"the population ({self.population_size:,}) cannot be smaller than the table "
                f"({rows:,} rows)"
            )
        return derived_k(self.k, rows, self.population_size, self.estimator, self.significance)

    def describe(self) -> str:
        return f"{self.k}-map (population {self.population_size:,}, {self.estimator})"

    def measure(self, data: ClassData) -> NDArray[Any]:
        """A class's size, compared with the derived k'."""
        return data.sizes

    def passes(self, data: ClassData) -> NDArray[Any]:
        rows = self.rows if self.rows is not None else int(data.sizes.sum())
        if rows == 0:
            return np.ones(len(data), dtype=bool)
        return np.asarray(data.sizes >= self.derived(rows))
