"""Individual risk of survey microdata with sampling weights, and household risk, as sdcMicro's
``measure_risk`` / ``indivRisk`` compute them (Benedetti and Franconi's estimator).

For a record in key ``k`` (its quasi-identifier combination), ``f_k`` is the number of sample
records in the key and ``F_k`` the sum of their survey weights (the estimated number of people in
the population with that key); ``p_k = f_k / F_k``. The risk is the expected value of 1/(the
population frequency) given the sample frequency, under a negative-binomial superpopulation:

- ``f_k = 1``: ``p/(1-p) * log(1/p)``
- ``f_k = 2``: ``p/(1-p) - (p/(1-p))^2 * log(1/p)``
- ``f_k > 2``: ``p / (f_k - (1 - p))`` (sdcMicro's ``method="approx"``, its default and what
  ``measure_risk`` reports) or the exact alternating series (``method="exact"``)
- ``f_k = F_k`` (every person of the key is in the sample): ``1/f_k``.

Without weights every record stands for itself (weights 1, so ``F_k = f_k``) and the risk is
``1/f_k``: the prosecutor risk of :mod:`anonweb.core.risk.reidentification`.

The global risk is the mean of the individual risks, the expected number of re-identifications
their sum (sdcMicro's ``global_risk`` and ``global_risk_ER``). The household risk of a record is
``1 - prod(1 - r_i)`` over the members of its household (every member gets it): an intruder who
re-identifies one member finds the whole household.

Where anonweb differs from sdcMicro, on purpose:

- A missing quasi-identifier value is a value of its own, as in every other anonweb measure.
  sdcMicro's ``freqCalc`` lets a missing value match any value of that key, which lowers the
  risk of records with gaps; anonweb does not assume an intruder treats a blank as a wildcard.
- Weights must be finite and at least 1: a weight below 1 would make ``F_k < f_k`` and the
  formulas negative (sdcMicro computes them anyway). A missing household id makes the record a
  household of its own (sdcMicro drops it from the household risk).
- ``method="exact"`` is sdcMicro's series; where it overflows (large ``f_k`` with small
  ``p_k``: ``p^(1-f)`` beyond floating point) the approximation is used for that key.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.errors import DataError, ParameterError
from anonweb.core.io.frame import require_columns
from anonweb.core.risk.classes import dense_codes, equivalence_classes
from anonweb.core.risk.reidentification import threshold_key

DEFAULT_THRESHOLDS = (0.2, 0.1, 0.05, 0.01)
Method = Literal["approx", "exact"]


def _frequency_risk(f: NDArray[Any], F: NDArray[Any], method: Method) -> NDArray[Any]:
    """Benedetti-Franconi risk per key from the sample frequency ``f`` and weight sum ``F``."""
    f = f.astype(float)
    full = np.isclose(f, F, rtol=1e-12, atol=0.0) | (f >= F)
    p = np.where(full, 0.5, f / np.where(full, 1.0, F))  # 0.5: a placeholder, overwritten
    odds = p / (1.0 - p)
    log_inv = np.log(1.0 / p)
    risk = np.where(f == 1, odds * log_inv, odds - odds**2 * log_inv)
    big = f > 2
    if big.any():
        approx = p / (f - (1.0 - p))
        risk = np.where(big, approx, risk)
        if method == "exact":
            exact = _exact_series(f[big], p[big])
            risk[big] = np.where(np.isfinite(exact), exact, approx[big])
    return np.where(full, 1.0 / f, risk)


def _exact_series(f: NDArray[Any], p: NDArray[Any]) -> NDArray[Any]:
    """sdcMicro's exact risk for ``f > 2``, vectorised over keys (the loop runs over the series'
    terms, at most max(f) - 2 of them, never over keys)."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        a = (p ** (1.0 - f) - 1.0) / (f - 1.0)
        bb = np.zeros(f.size)
        b = np.ones(f.size)
        for m in range(int(f.max()) - 2):
            live = m <= f - 3
            term = (
                (f - 1 - m) ** 2
                / ((m + 1) * (f - 2 - m))
                * (p ** (m + 2 - f) - 1)
                / (p ** (m + 1 - f) - 1)
            )
            b = np.where(live, b * term, b)
            bb = np.where(live, bb + (-1.0) ** (m + 1) * b, bb)
        out = (p / (1.0 - p)) ** f * (a * (1.0 + bb) + (-1.0) ** f * np.log(p))
    return np.asarray(out)


@dataclass(frozen=True)
class IndividualRisk:
    """Per-record individual risk and its summaries. ``to_dict()`` is JSON-safe."""

    risk: NDArray[Any] = field(repr=False, compare=False)  # per row, by position
    sample_frequency: NDArray[Any] = field(repr=False, compare=False)  # f_k per row
    weight_sum: NDArray[Any] = field(repr=False, compare=False)  # F_k per row
    weighted: bool
    method: str
    thresholds: tuple[float, ...] = DEFAULT_THRESHOLDS

    @property
    def global_risk(self) -> float:
        return float(self.risk.mean()) if self.risk.size else 0.0

    @property
    def expected_reidentifications(self) -> float:
        return float(self.risk.sum())

    def records_above(self) -> dict[str, int]:
        return {threshold_key(t): int(np.count_nonzero(self.risk > t)) for t in self.thresholds}

    def to_dict(self) -> dict[str, Any]:
        return {
            "global": self.global_risk,
            "expected_reidentifications": self.expected_reidentifications,
            "max": float(self.risk.max()) if self.risk.size else 0.0,
            "records_above": self.records_above(),
            "weights": "survey weights" if self.weighted else "none (weights 1: F_k = f_k)",
            "method": self.method,
        }


@dataclass(frozen=True)
class HouseholdRisk:
    """Per-record household risk (equal for every member) and per-household figures."""

    risk: NDArray[Any] = field(repr=False, compare=False)  # per row, by position
    household_codes: NDArray[Any] = field(repr=False, compare=False)  # household of each row
    household_risk: NDArray[Any] = field(repr=False, compare=False)  # per household
    thresholds: tuple[float, ...] = DEFAULT_THRESHOLDS

    @property
    def households(self) -> int:
        return int(self.household_risk.size)

    def to_dict(self) -> dict[str, Any]:
        hr = self.household_risk
        return {
            "max": float(hr.max()) if hr.size else 0.0,
            "mean": float(self.risk.mean()) if self.risk.size else 0.0,
            "expected_reidentifications": float(self.risk.sum()),
            "households": self.households,
            "households_above": {
                threshold_key(t): int(np.count_nonzero(hr > t)) for t in self.thresholds
            },
        }


def _weights(df: pd.DataFrame, column: str) -> NDArray[Any]:
    require_columns(df, [column], role="weight")
    w = pd.to_numeric(df[column], errors="coerce").to_numpy(dtype=float, na_value=np.nan)
    bad = ~np.isfinite(w)
    if bad.any():
        raise DataError(
            f"weight column {column!r} has {int(bad.sum())} missing or non-numeric values "
            "(each record needs its survey weight)"
        )
    if (w < 1).any():
        raise DataError(
            f"weight column {column!r} has {int((w < 1).sum())} values below 1: a survey weight "
            "is the number of people a record stands for, at least the record itself"
        )
    return np.asarray(w, dtype=float)


def _thresholds(thresholds: Sequence[float]) -> tuple[float, ...]:
    out = tuple(float(t) for t in thresholds)
    if any(not (0.0 <= t <= 1.0) for t in out):
        raise ParameterError(f"risk thresholds must lie between 0 and 1, got {list(out)}")
    return out


def individual_risk(
    df: pd.DataFrame,
    *,
    quasi_identifiers: Sequence[str],
    weights: str | None = None,
    method: Method = "approx",
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
) -> IndividualRisk:
    """sdcMicro's individual risk of each record of ``df`` (not modified).

    ``weights`` names the survey-weight column; without it every weight is 1 (``F_k = f_k``)
    and each record's risk is ``1/f_k``."""
    if method not in ("approx", "exact"):
        raise ParameterError(f"individual risk method must be 'approx' or 'exact', got {method!r}")
    if weights is not None and weights in quasi_identifiers:
        raise ParameterError(f"the weight column {weights!r} cannot also be a quasi-identifier")
    ec = equivalence_classes(df, quasi_identifiers=quasi_identifiers)
    ths = _thresholds(thresholds)
    sizes = ec.sizes.astype(float)
    if weights is None:
        weight_sums = sizes
    else:
        weight_sums = np.bincount(ec.codes, weights=_weights(df, weights), minlength=sizes.size)
    per_class = _frequency_risk(sizes, weight_sums, method)
    return IndividualRisk(
        risk=per_class[ec.codes],
        sample_frequency=ec.sizes[ec.codes],
        weight_sum=weight_sums[ec.codes],
        weighted=weights is not None,
        method=method,
        thresholds=ths,
    )


def household_risk(
    df: pd.DataFrame,
    *,
    household: str,
    individual: IndividualRisk | NDArray[Any],
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
) -> HouseholdRisk:
    """``1 - prod(1 - r_i)`` over each household's members, given to every member.

    ``individual`` is the per-record risk (an :class:`IndividualRisk` or an array by position).
    A record with no household id is a household of its own."""
    require_columns(df, [household], role="household id")
    r = np.asarray(individual.risk if isinstance(individual, IndividualRisk) else individual)
    if r.shape != (len(df),):
        raise ParameterError(f"{r.size} individual risks for a table of {len(df)} rows")
    ths = _thresholds(thresholds)
    ids = df[household]
    missing = ids.isna().to_numpy()
    codes, m = dense_codes(ids.where(~missing, None))
    if missing.any():  # each blank household id: a household of one
        codes = codes.copy()
        codes[missing] = m + np.arange(int(missing.sum()))
        codes, m = dense_codes(codes)
    # sum of log(1 - r): a product of many factors near 1 stays exact; r = 1 gives -inf -> 1
    with np.errstate(divide="ignore"):
        logs = np.log1p(-np.clip(r, 0.0, 1.0))
    per_household = -np.expm1(np.bincount(codes, weights=logs, minlength=m))
    return HouseholdRisk(
        risk=per_household[codes],
        household_codes=codes,
        household_risk=per_household,
        thresholds=ths,
    )


def class_risk(
    sample_frequency: NDArray[Any], weight_sum: NDArray[Any], method: Method = "approx"
) -> NDArray[Any]:
    """The individual risk of the records of each key, from its sample frequency ``f_k`` and
    the sum of its records' weights ``F_k`` (the estimator above): what a privacy model reads
    from a table's classes."""
    if method not in ("approx", "exact"):
        raise ParameterError(f"individual risk method must be 'approx' or 'exact', got {method!r}")
    return _frequency_risk(np.asarray(sample_frequency), np.asarray(weight_sum, float), method)
