"""Survey-microdata risk of a table in one call: sdcMicro's individual risk (with the survey
weights when there are any), household risk and SUDA2, as the command line, the risk page and
the release gate report them.

Each figure is defined once in :mod:`anonweb.core.risk.individual` and
:mod:`anonweb.core.risk.suda2`; this module only chooses which to compute and shapes the result
(JSON summary, per-record table, chart data).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from anonweb.core.errors import ParameterError
from anonweb.core.risk.individual import (
    DEFAULT_THRESHOLDS,
    HouseholdRisk,
    IndividualRisk,
    Method,
    household_risk,
    individual_risk,
)
from anonweb.core.risk.suda2 import Suda2Result, suda2

RECORD_COLUMNS = ("row", "individual_risk", "household_risk", "suda_score", "dis_suda_score")
# risk bands of the risk page's distribution chart: (label, low, high], the first from 0
RISK_BANDS = (
    ("up to 1%", 0.01),
    ("1-5%", 0.05),
    ("5-10%", 0.1),
    ("10-20%", 0.2),
    ("20-50%", 0.5),
    ("over 50%", 1.0),
)


def risk_bands(values: Any) -> list[dict[str, Any]]:
    """How many of ``values`` (risks in [0, 1]) fall in each band of :data:`RISK_BANDS`."""
    v = np.asarray(values, dtype=float)
    edges = np.array([b for _label, b in RISK_BANDS])
    idx = np.minimum(np.searchsorted(edges, v, side="left"), len(edges) - 1)
    counts = np.bincount(idx, minlength=len(edges))
    return [
        {"band": label, "count": int(c)} for (label, _b), c in zip(RISK_BANDS, counts, strict=True)
    ]


def _json_value(value: Any) -> Any:
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return None
    if isinstance(value, np.generic):
        return value.item()
    return value if isinstance(value, (str, int, float, bool)) else str(value)


@dataclass(frozen=True)
class SurveyRisk:
    """What :func:`survey_risk` measured; parts not asked for are ``None``."""

    individual: IndividualRisk
    household: HouseholdRisk | None
    suda: Suda2Result | None

    def to_dict(self) -> dict[str, Any]:
        """The ``assess --format json`` keys: ``individual_risk``, ``household_risk``, ``suda2``
        (the last two only when asked for)."""
        out: dict[str, Any] = {"individual_risk": self.individual.to_dict()}
        if self.household is not None:
            out["household_risk"] = self.household.to_dict()
        if self.suda is not None:
            out["suda2"] = self.suda.to_dict()
        return out

    def records(self) -> pd.DataFrame:
        """One line per record: its row number (1 = the first data row), individual risk,
        household risk and SUDA scores (blank where not computed)."""
        n = self.individual.risk.size
        blank = np.full(n, np.nan)
        return pd.DataFrame(
            {
                "row": np.arange(1, n + 1),
                "individual_risk": self.individual.risk,
                "household_risk": blank if self.household is None else self.household.risk,
                "suda_score": blank if self.suda is None else self.suda.score,
                "dis_suda_score": blank if self.suda is None else self.suda.dis_score,
            },
            columns=list(RECORD_COLUMNS),
        )

    def summary(
        self, df: pd.DataFrame, *, quasi_identifiers: Sequence[str], limit: int = 20
    ) -> dict[str, Any]:
        """What the risk page shows: :meth:`to_dict`, the chart data (records by SUDA score;
        households, or records without a household column, by risk band) and the ``limit``
        records at highest risk with their quasi-identifier values, under
        ``highest_risk_records``, a list of source values (privacy officers only; see
        :mod:`anonweb.core.raw_values`)."""
        out = self.to_dict()
        if self.suda is not None:
            out["suda_scores"] = self.suda.score_histogram()
        if self.household is not None:
            out["risk_bands"] = {
                "unit": "households",
                "bands": risk_bands(self.household.household_risk),
            }
        else:
            out["risk_bands"] = {"unit": "records", "bands": risk_bands(self.individual.risk)}
        rows = []
        for i in self.highest(limit):
            row: dict[str, Any] = {
                "row": i + 1,
                "individual_risk": float(self.individual.risk[i]),
                "values": {str(q): _json_value(df[q].iloc[i]) for q in quasi_identifiers},
            }
            if self.household is not None:
                row["household_risk"] = float(self.household.risk[i])
            if self.suda is not None:
                row["suda_score"] = float(self.suda.score[i])
            rows.append(row)
        out["highest_risk_records"] = rows
        return out

    def highest(self, limit: int = 20) -> list[int]:
        """Positions of the records at highest risk: household risk, then individual risk, then
        SUDA score, highest first (the risk page lists them for privacy officers)."""
        keys = [self.individual.risk]
        if self.household is not None:
            keys.insert(0, self.household.risk)
        if self.suda is not None:
            keys.append(self.suda.score)
        order = np.lexsort([-k for k in reversed(keys)])
        return [int(i) for i in order[:limit]]


def survey_risk(
    df: pd.DataFrame,
    *,
    quasi_identifiers: Sequence[str],
    weights: str | None = None,
    household: str | None = None,
    suda2_max_size: int | None = None,
    with_suda2: bool = False,
    thresholds: Sequence[float] = DEFAULT_THRESHOLDS,
    method: Method = "approx",
) -> SurveyRisk:
    """Individual risk of ``df`` (never modified); household risk when ``household`` names
    the household-id column; SUDA2 when ``with_suda2`` (MSUs up to ``suda2_max_size``).
    ``method`` is sdcMicro's for keys of more than two records: ``approx`` (its default) or
    ``exact`` (the series)."""
    if household is not None and household in quasi_identifiers:
        raise ParameterError(f"the household column {household!r} cannot be a quasi-identifier")
    if household is not None and household == weights:
        raise ParameterError(f"{household!r} cannot be both the weight and the household column")
    ind = individual_risk(
        df,
        quasi_identifiers=quasi_identifiers,
        weights=weights,
        thresholds=thresholds,
        method=method,
    )
    hh = None
    if household is not None:
        hh = household_risk(df, household=household, individual=ind, thresholds=thresholds)
    su = (
        suda2(df, quasi_identifiers=quasi_identifiers, max_size=suda2_max_size)
        if with_suda2
        else None
    )
    return SurveyRisk(individual=ind, household=hh, suda=su)
