"""Re-identification risk: prosecutor, journalist and marketer models (El Emam's terms, as in ARX).

* Prosecutor: the attacker knows the target is in the table. A record's risk is 1 / its class
  size; the maximum is 1/k and the mean over *records* is classes/rows. (pycanon's "average
  risk" averages 1/size over classes instead, which over-weights small classes.)
* Journalist: the attacker does not know whether the target is in the table, so the matching
  class in the *population* counts: risk 1/F_j. Exact with a population table; estimated from
  the population size alone as E[1/F_j | f_j] (Benedetti & Franconi's individual risk, see
  :func:`anonweb.core.risk.population.individual_risk`); without either, the prosecutor figure,
  which is an upper bound.
* Marketer: the expected share of records re-identified when every record is attacked:
  mean of f_j/F_j over records, which is classes/rows without a population table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.errors import DataError, ParameterError
from anonweb.core.io.frame import require_columns
from anonweb.core.risk.classes import (
    EquivalenceClasses,
    column_codes,
    combine_codes,
    equivalence_classes,
    size_counts,
)

DEFAULT_THRESHOLDS = (0.2, 0.1, 0.05, 0.01)


def check_thresholds(thresholds: Sequence[float]) -> tuple[float, ...]:
    out = []
    for t in thresholds:
        try:
            value = float(t)
        except (TypeError, ValueError):
            raise ParameterError(f"risk threshold {t!r} is not a number") from None
        if not 0.0 <= value <= 1.0:
            raise ParameterError(f"risk threshold {value} is outside 0..1")
        out.append(value)
    return tuple(out)


def threshold_key(t: float) -> str:
    """``0.2`` -> ``"0.2"``: a stable string key for JSON."""
    return repr(float(t))


@dataclass(frozen=True)
class ReidentificationRisk:
    """Summary re-identification risks plus the per-class data behind them."""

    rows: int
    classes: int
    prosecutor_max: float
    prosecutor_mean: float
    records_at_risk: tuple[tuple[float, int], ...]  # (threshold, records whose risk exceeds it)
    marketer: float
    journalist_max: float
    journalist_mean: float
    journalist_source: (
        str  # "population table", "population size (estimate)", "sample (upper bound)"
    )
    class_sizes: NDArray[Any] = field(repr=False, compare=False)

    def risk_distribution(self) -> list[dict[Any, Any]]:
        """Records per distinct risk value (1/size), highest risk first, ready for a chart."""
        counts = np.bincount(self.class_sizes)
        sizes = np.flatnonzero(counts)
        return [{"risk": 1.0 / int(s), "records": int(s * counts[s])} for s in sizes]

    def to_dict(self) -> dict[Any, Any]:
        return {
            "prosecutor_risk": {"max": self.prosecutor_max, "mean": self.prosecutor_mean},
            "records_at_risk": {
                threshold_key(t): {"count": c, "share": c / self.rows if self.rows else 0.0}
                for t, c in self.records_at_risk
            },
            "marketer_risk": self.marketer,
            "journalist_risk": {
                "max": self.journalist_max,
                "mean": self.journalist_mean,
                "source": self.journalist_source,
            },
            "risk_distribution": self.risk_distribution(),
        }


def records_above(
    sizes: NDArray[Any], thresholds: Sequence[float]
) -> tuple[tuple[float, int], ...]:
    """For each threshold, the number of records whose prosecutor risk 1/size exceeds it."""
    present, counts = size_counts(sizes)
    records = present * counts
    risk = 1.0 / present
    return tuple((t, int(records[risk > t].sum())) for t in thresholds)


def population_class_sizes(
    df: pd.DataFrame, ec: EquivalenceClasses, population: pd.DataFrame, *, strict: bool = False
) -> NDArray[Any]:
    """Size in ``population`` of each sample class (matched on the QI values, missing = missing).

    A class absent from the population table, or smaller there than in the sample, gets its
    sample size: the sample is part of the population, so the table must be incomplete. With
    ``strict`` such a table is refused instead (k-map and δ-presence count the population's
    people, which an incomplete table would misstate).
    """
    qis = list(ec.quasi_identifiers)
    require_columns(population, qis, role="quasi-identifier in the population table")
    sample = df.iloc[ec.first_row][qis]
    both = pd.concat([sample, population[qis]], ignore_index=True, copy=False)
    cols = []
    for q in qis:
        col = both[q]
        if sample[q].dtype != population[q].dtype:
            # 39 and "39" must match: compare as text when the two tables disagree on type.
            col = col.where(col.isna(), col.astype(str))
        cols.append(column_codes(col))
    codes = combine_codes(cols, len(both))
    sample_codes, pop_codes = codes[: len(sample)], codes[len(sample) :]
    pop_sizes = np.bincount(pop_codes, minlength=codes.max() + 1)
    over = pop_sizes[sample_codes] < ec.sizes
    if strict and over.any():
        raise DataError(
            f"the table is not part of the population: {int(over.sum())} combination(s) of "
            f"{', '.join(qis)} occur more often in the table than in the population"
        )
    return np.maximum(pop_sizes[sample_codes], ec.sizes)


def risk_of(
    ec: EquivalenceClasses,
    *,
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
    population_sizes: NDArray[Any] | None = None,
    population_size: int | None = None,
) -> ReidentificationRisk:
    """Risks from already computed classes.

    ``population_sizes`` (F_j per class, from a population table) gives exact journalist and
    marketer risk; otherwise ``population_size`` gives estimates; otherwise the sample's figures.
    """
    thresholds = check_thresholds(thresholds)
    sizes = ec.sizes
    rows = ec.rows
    marketer = ec.count / rows
    if population_sizes is not None:
        j_max = float(1.0 / population_sizes.min())
        marketer = float((sizes / population_sizes).sum() / rows)
        j_mean, source = marketer, "population table"
    elif population_size is not None and population_size > rows:
        j_max, marketer = _estimated_journalist(sizes, rows / population_size)
        j_mean, source = marketer, "population size (estimate, Benedetti & Franconi 1998)"
    else:
        j_max, j_mean, source = 1.0 / ec.k, marketer, "sample (upper bound)"
    return ReidentificationRisk(
        rows=rows,
        classes=ec.count,
        prosecutor_max=1.0 / ec.k,
        prosecutor_mean=ec.count / rows,
        records_at_risk=records_above(sizes, thresholds),
        marketer=marketer,
        journalist_max=j_max,
        journalist_mean=j_mean,
        journalist_source=source,
        class_sizes=sizes,
    )


def _estimated_journalist(sizes: NDArray[Any], fraction: float) -> tuple[float, float]:
    """Largest and mean (over records) estimated journalist risk E[1/F | f]."""
    from anonweb.core.risk.population import individual_risk

    present, counts = size_counts(sizes)
    risk = individual_risk(present, fraction)
    records = present * counts
    return float(risk.max()), float((risk * records).sum() / records.sum())


def reidentification_risk(
    df: pd.DataFrame,
    *,
    quasi_identifiers: Sequence[str],
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
    population: pd.DataFrame | None = None,
    population_size: int | None = None,
) -> ReidentificationRisk:
    """Prosecutor, journalist and marketer risk of ``df`` over the quasi-identifiers."""
    ec = equivalence_classes(df, quasi_identifiers=quasi_identifiers)
    pop = None if population is None else population_class_sizes(df, ec, population)
    return risk_of(ec, thresholds=thresholds, population_sizes=pop, population_size=population_size)


def record_risk(df: pd.DataFrame, *, quasi_identifiers: Sequence[str]) -> pd.Series:
    """Prosecutor risk of every record (1 / its class size), indexed like ``df``."""
    ec = equivalence_classes(df, quasi_identifiers=quasi_identifiers)
    return pd.Series(1.0 / ec.record_sizes(), index=df.index, name="prosecutor_risk")
