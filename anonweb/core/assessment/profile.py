"""The disclosure-risk profile of a table: the one entry point the rest of the app calls.

``assess_risk`` groups the rows once over the quasi-identifiers and derives everything from that
grouping: k and the class-size distribution, prosecutor/journalist/marketer risk, records at risk
above thresholds, population uniqueness (when the population size is known), and for each
sensitive attribute l-diversity (distinct, entropy, recursive), δ-disclosure and t-closeness,
and the figure of every other model in the registry (:func:`model_figures`), under its key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.engine.histogram import Histogram
from anonweb.core.errors import ParameterError
from anonweb.core.io.frame import require_columns
from anonweb.core.io.hierarchy import Hierarchy
from anonweb.core.models.base import Figure
from anonweb.core.models.closeness import TClosenessResult, t_closeness_of
from anonweb.core.models.counts import (
    ClassData,
    SensitiveCounts,
    SensitiveDomain,
    sensitive_counts,
    whole_sums,
)
from anonweb.core.models.diversity import DEFAULT_C, LDiversity, l_diversity_of
from anonweb.core.models.k_anonymity import KAnonymityResult, k_anonymity_of
from anonweb.core.models.registry import sensitive_figures
from anonweb.core.risk.classes import (
    EquivalenceClasses,
    class_dtype,
    equivalence_classes,
)
from anonweb.core.risk.population import PopulationUniqueness, population_uniqueness
from anonweb.core.risk.reidentification import (
    DEFAULT_THRESHOLDS,
    ReidentificationRisk,
    population_class_sizes,
    risk_of,
)


@dataclass(frozen=True)
class SensitiveProfile:
    """Homogeneity of one sensitive attribute: l-diversity, δ-disclosure and t-closeness."""

    diversity: LDiversity
    closeness: TClosenessResult
    disclosing: tuple[
        dict[Any, Any], ...
    ] = ()  # the largest classes that share one value, QI values shown
    # the registry's other figures (see :func:`model_figures`): key -> (figure, per class)
    figures: Mapping[str, tuple[Figure, NDArray[Any]]] = field(default_factory=dict, compare=False)

    def figure(self, key: str) -> float | None:
        """The table's figure of a registry figure measured here (None: infinite or no class)."""
        declared, per_class = self.figures[key]
        return declared.table_value(per_class)

    def per_class(self) -> dict[str, list[Any]]:
        extra = {key: _json_floats(v) for key, (_f, v) in self.figures.items()}
        return {**self.diversity.per_class(), **self.closeness.per_class(), **extra}

    def to_dict(self) -> dict[Any, Any]:
        return {
            **self.diversity.to_dict(),
            **self.closeness.to_dict(),
            "disclosing_classes": list(self.disclosing),
            **{key: self.figure(key) for key in self.figures},
        }


# the figures the builders above report under their own keys, with their own context (the
# recursive c, the t distance): the registry's declarations of them are not measured twice
BUILT_IN = frozenset({"l_distinct", "l_entropy", "l_recursive", "t_closeness", "delta_disclosure"})


def model_figures(sc: SensitiveCounts) -> dict[str, tuple[Figure, NDArray[Any]]]:
    """Every registry model's figure of one sensitive column, per class, besides the built-in
    ones: what the risk profile and the what-if add for each model of the registry."""
    data = ClassData(sc.sizes, {sc.attribute: sc})
    return {
        f.key: (f, f.measure(data, sc.attribute))
        for _cls, f in sensitive_figures()
        if f.measure is not None and f.key not in BUILT_IN
    }


def _json_floats(values: NDArray[Any]) -> list[float | None]:
    return [float(v) if np.isfinite(v) else None for v in values]


@dataclass(frozen=True)
class RiskProfile:
    """Everything ``assess_risk`` measured. ``to_dict()`` is JSON-safe."""

    quasi_identifiers: tuple[str, ...]
    anonymity: KAnonymityResult
    risk: ReidentificationRisk
    population: PopulationUniqueness | None
    sensitive: Mapping[str, SensitiveProfile]
    classes: EquivalenceClasses = field(repr=False, compare=False)
    suppressed: int = 0  # records taken out of the evaluation (see ``assess_risk``)

    @property
    def k(self) -> int:
        return self.anonymity.k

    def to_dict(self, *, per_class: bool = False) -> dict[Any, Any]:
        """Summary figures; ``per_class=True`` adds per-class lists (one entry per class)."""
        out: dict[str, Any] = {"quasi_identifiers": list(self.quasi_identifiers)}
        out.update(self.anonymity.to_dict())
        out["suppressed"] = self.suppressed
        out.update(self.risk.to_dict())
        out["population"] = None if self.population is None else self.population.to_dict()
        # JSON object keys are text: a column named 3 is reported as "3".
        out["sensitive"] = {str(name): sp.to_dict() for name, sp in self.sensitive.items()}
        if per_class:
            out["per_class"] = {"size": self.classes.sizes.tolist()}
            for name, sp in self.sensitive.items():
                out["sensitive"][str(name)]["per_class"] = sp.per_class()
        return out


def _check_inputs(
    df: pd.DataFrame,
    qis: Sequence[str],
    sensitive: str | Sequence[str],
    hierarchies: Mapping[str, Any] | None,
    t_distance: str | Mapping[str, str] | None,
) -> tuple[list[str], dict[Any, Any]]:
    sens = [sensitive] if isinstance(sensitive, str) else list(sensitive)
    require_columns(df, sens, role="sensitive attribute")
    both = sorted(set(sens) & set(qis))
    if both:
        raise ParameterError(
            f"columns cannot be both quasi-identifier and sensitive: {', '.join(both)}"
        )
    hierarchies = dict(hierarchies or {})
    if isinstance(t_distance, Mapping):
        unknown = sorted(set(t_distance) - set(sens))
        if unknown:
            raise ParameterError(
                f"t_distance names columns that are not sensitive: {', '.join(unknown)}"
            )
    return sens, hierarchies


def assess_risk(
    df: pd.DataFrame,
    *,
    quasi_identifiers: Sequence[str],
    sensitive: Sequence[str] = (),
    hierarchies: Mapping[str, Hierarchy] | None = None,
    population_size: int | None = None,
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
    t_distance: str | Mapping[str, str] | None = None,
    population: pd.DataFrame | None = None,
    recursive_c: float = DEFAULT_C,
    disclosing_limit: int = 20,
    exclude: NDArray[Any] | None = None,
) -> RiskProfile:
    """Measure the disclosure risk of ``df`` (never modified).

    ``hierarchies`` maps a sensitive column to its value hierarchy (used for hierarchical
    t-closeness). ``t_distance`` forces a distance for all sensitive columns or per column;
    by default it is hierarchical with a hierarchy, ordered for numeric columns, else equal.
    ``population`` (a table of the population, same QI columns) gives exact journalist and
    marketer risk; ``population_size`` gives population-uniqueness estimates (Pitman, Zayatz,
    SNB and Dankar et al.'s choice among them). ``disclosing_limit`` caps the list of classes
    that disclose their sensitive value outright (largest first; all are counted).
    ``exclude`` marks suppressed records (see
    :func:`~anonweb.core.risk.classes.suppressed_records`): they form no class, so k and the
    risks are those of the other records, as the search measures them; they still count in each
    sensitive attribute's overall distribution. ``suppressed`` in the result says how many.
    """
    full, keep, suppressed = df, None, 0
    if exclude is not None:
        drop = np.asarray(exclude, dtype=bool)
        if drop.shape != (len(df),):
            raise ParameterError(f"{drop.size} exclusion flags for a table of {len(df)} rows")
        suppressed = int(drop.sum())
        if suppressed:
            keep = ~drop
            df = df.iloc[np.flatnonzero(keep)]
    ec = equivalence_classes(df, quasi_identifiers=quasi_identifiers)
    qis = list(ec.quasi_identifiers)
    sens, hierarchies = _check_inputs(df, qis, sensitive, hierarchies, t_distance)
    pop_sizes = None if population is None else population_class_sizes(df, ec, population)
    if population_size is None and population is not None:
        population_size = len(population)
    uniq = None if population_size is None else population_uniqueness(ec.sizes, population_size)
    profiles = {}
    for name in sens:  # a handful of sensitive columns, each vectorized over all classes
        sc = sensitive_counts(ec, full[name], keep=keep)
        dist = t_distance.get(name) if isinstance(t_distance, Mapping) else t_distance
        div = l_diversity_of(sc, recursive_c=recursive_c)
        profiles[name] = SensitiveProfile(
            div,
            t_closeness_of(sc, full[name], distance=dist, hierarchy=hierarchies.get(name)),
            tuple(div.homogeneous(df, limit=disclosing_limit)),
            model_figures(sc),
        )
        sc.let_go()
    return RiskProfile(
        quasi_identifiers=tuple(qis),
        anonymity=k_anonymity_of(ec),
        risk=risk_of(
            ec, thresholds=thresholds, population_sizes=pop_sizes, population_size=population_size
        ),
        population=uniq,
        sensitive=profiles,
        classes=ec,
        suppressed=suppressed,
    )


def assess_histogram(
    hist: Histogram,
    *,
    hierarchies: Mapping[str, Hierarchy] | None = None,
    population_size: int | None = None,
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
    t_distance: str | Mapping[str, str] | None = None,
    population: pd.DataFrame | None = None,
    recursive_c: float = DEFAULT_C,
    disclosing_limit: int = 20,
) -> RiskProfile:
    """:func:`assess_risk` of the table a :class:`Histogram` counts, from its cells alone.

    Whatever engine read the rows, the classes are the histogram's level-0 QI combinations and
    each sensitive column's counts are its cells', so the profile is the same to the last bit.
    Classes reading ``*`` in every quasi-identifier are suppressed records, as
    :func:`~anonweb.core.risk.classes.suppressed_records` says for a table: they form no class
    and still count in each sensitive column's overall distribution.
    """
    qis = list(hist.quasi_identifiers)
    sens = list(hist.sensitive)
    hierarchies = dict(hierarchies or {})
    if isinstance(t_distance, Mapping):
        unknown = sorted(set(t_distance) - set(sens))
        if unknown:
            raise ParameterError(
                f"t_distance names columns that are not sensitive: {', '.join(unknown)}"
            )
    star = hist.suppressed_classes(qis)
    sizes = hist.class_sizes
    suppressed = int(sizes[star].sum())
    everything = not suppressed  # nothing suppressed: no renumbering, no copies
    kept = None if everything else np.flatnonzero(~star)
    del star

    # one code per kept class: describing a class reads its row, built when asked for (a
    # table of every class would hold a value object per class and QI)
    def frame(rows: NDArray[Any]) -> pd.DataFrame:
        return hist.class_frame(rows if kept is None else kept[rows]).set_axis(rows)

    n_kept = sizes.size if kept is None else kept.size
    ec = EquivalenceClasses(
        tuple(qis),
        np.arange(n_kept, dtype=class_dtype(n_kept)),
        sizes if kept is None else sizes[kept],
    )
    pop_sizes = (
        None
        if population is None
        else population_class_sizes(hist.class_frame(kept), ec, population)
    )
    if population_size is None and population is not None:
        population_size = len(population)
    uniq = None if population_size is None else population_uniqueness(ec.sizes, population_size)
    if kept is None:
        cell_class = hist.class_of_cell
    else:
        renumber = np.full(sizes.size, -1, dtype=class_dtype(kept.size))
        renumber[kept] = np.arange(kept.size)
        cell_class = renumber[hist.class_of_cell]
        del renumber
        in_class = cell_class >= 0
        cell_class = cell_class[in_class]
    # whole counts (exact sums), not floats: a histogram of 10^8 records has tens of
    # millions of cells, and each array over them is hundreds of megabytes
    weights = hist.counts if everything else hist.counts[in_class]
    profiles = {}
    for name in sens:  # one column at a time: its per-triple arrays are let go before the next
        values, codes = hist.labels[name], hist.sensitive_codes(name)
        domain = SensitiveDomain(
            str(name),
            values,
            whole_sums(codes, hist.counts, len(values)),
        )
        sc = SensitiveCounts.from_codes(
            domain,
            cell_class,
            codes if everything else codes[in_class],
            ec.count,
            classes=ec,
            weights=weights,
            sizes=ec.sizes,  # the records per class: what the weights sum to in each
        )
        dist = t_distance.get(name) if isinstance(t_distance, Mapping) else t_distance
        div = l_diversity_of(sc, recursive_c=recursive_c)
        column = pd.Series(values, name=name, dtype=values.dtype)
        profiles[name] = SensitiveProfile(
            div,
            t_closeness_of(sc, column, distance=dist, hierarchy=hierarchies.get(name)),
            tuple(div.homogeneous(frame, limit=disclosing_limit)),
            model_figures(sc),
        )
        sc.let_go()
    return RiskProfile(
        quasi_identifiers=tuple(qis),
        anonymity=k_anonymity_of(ec),
        risk=risk_of(
            ec, thresholds=thresholds, population_sizes=pop_sizes, population_size=population_size
        ),
        population=uniq,
        sensitive=profiles,
        classes=ec,
        suppressed=suppressed,
    )
