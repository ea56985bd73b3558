"""k-map (Sweeney): each class matches at least k people of the population.

With a population table (:mod:`.population_table`; ``--population-table`` on the command line,
another dataset of the team in the web app) the population's class sizes are counted: a class
of the sample passes when the population holds at least k people with its generalized values
at the same node (ARX's ``KMap`` with a research subset: ``pcount >= k``). Generalizing merges
population classes as it merges the sample's, so the model is monotonic.

Without one, the population's class sizes are estimated from the sample, as ARX's ``KMap`` does
when it is given a population model and an estimator instead of the population itself.

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
no table size was bound, e.g. a released table checked at the gate). A spec with neither a
population size nor a population table bound is refused when it is bound
(:meth:`KMap.with_population`).
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
    population_size: int | None = None
    estimator: str = "poisson"
    significance: float = 0.01
    # the rows of the table the sampling fraction is taken from (bound by the search)
    rows: int | None = field(default=None, repr=False, compare=False)
    sensitive: None = field(default=None, init=False, repr=False, compare=False)
    # the population table counted instead of estimated (not a JSON parameter: bound by
    # the caller that read the table, see with_population)
    population: Any = field(default=None, repr=False, compare=False)
    kind = "k_map"
    monotonic = True
    schema = sch.obj(
        {
            "k": sch.integer("Smallest number of people of the population per class", minimum=1),
            "population_size": sch.integer(
                "Size of the population the table was drawn from (for the estimate; not needed "
                "with a population table)",
                minimum=1,
                maximum=10**12,
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
        required=["k"],
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
            "K: each class matches at least K people of the population (with "
            "--population-table, counted; or with --population-size, estimated as ARX does)",
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
        if self.population_size is not None:
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

    def with_population(self, population: Any) -> PrivacyModel:
        if population is not None:
            return dataclasses.replace(self, population=population)
        if self.population_size is None:
            raise ParameterError(
                f"{self.k}-map needs a population table (--population-table, or a population "
                "dataset) or a population size (--population-size)"
            )
        return self

    def to_dict(self) -> dict[str, Any]:
        spec = super().to_dict()
        if self.population_size is None:
            del spec["population_size"]  # counted in a population table
        return spec

    def derived(self, rows: int) -> int:
        if self.population_size is None:
            raise ParameterError(f"{self.k}-map needs a population table or a population size")
        if rows > self.population_size:
            raise ParameterError(
                f"the population ({self.population_size:,}) cannot be smaller than the table "
                f"({rows:,} rows)"
            )
        return derived_k(self.k, rows, self.population_size, self.estimator, self.significance)

    def describe(self) -> str:
        if self.population is not None:
            return f"{self.k}-map ({self.population.mention()})"
        size = "?" if self.population_size is None else f"{self.population_size:,}"
        return f"{self.k}-map (population {size}, {self.estimator})"

    def measure(self, data: ClassData) -> NDArray[Any]:
        """A class's size in the population table; without one, its size in the table,
        compared with the derived k'."""
        if self.population is not None:
            return data.population_sizes(self.population)
        return data.sizes

    def passes(self, data: ClassData) -> NDArray[Any]:
        if self.population is not None:
            return np.asarray(data.population_sizes(self.population) >= self.k)
        rows = self.rows if self.rows is not None else int(data.sizes.sum())
        if rows == 0:
            return np.ones(len(data), dtype=bool)
        return np.asarray(data.sizes >= self.derived(rows))
