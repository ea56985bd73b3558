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
    household_risk,
    individual_risk,
)
from anonweb.core.risk.suda2 import Suda2Result, suda2

RECORD_COLUMNS = ("row", "individual_risk", "household_risk", "suda_score", "dis_suda_score")


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
) -> SurveyRisk:
    """Individual risk of ``df`` (never modified); household risk when ``household`` names
    the household-id column; SUDA2 when ``with_suda2`` (MSUs up to ``suda2_max_size``)."""
    if household is not None and household in quasi_identifiers:
        raise ParameterError(f"the household column {household!r} cannot be a quasi-identifier")
    if household is not None and household == weights:
        raise ParameterError(f"{household!r} cannot be both the weight and the household column")
    ind = individual_risk(
        df, quasi_identifiers=quasi_identifiers, weights=weights, thresholds=thresholds
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
