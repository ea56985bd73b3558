"""Linkage-attack simulation: how many candidates does an attacker's knowledge leave?

Two forms of the attack ("How many people can we re-identify?"):

* ``known``: the attacker knows some columns of a target. Each record of the table is matched
  by every record sharing its values on those columns; its candidates are its class over them.
* ``aux``: the attacker holds an auxiliary table (a voter roll, a leaked extract) and joins it to
  the released table on their shared columns. Each auxiliary record is matched by the released
  records with the same values; exactly one candidate singles a person out.

Missing values match missing values (a blank field is information too). When the two tables
disagree on a column's type (39 vs "39"), the values are compared as text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.errors import ParameterError
from anonweb.core.io.frame import require_columns
from anonweb.core.risk.classes import column_codes, combine_codes, equivalence_classes


@dataclass(frozen=True)
class LinkageHistogram:
    """Records (or auxiliary records) by number of matching candidates.

    ``histogram`` is ``((candidates, records), ...)`` ascending; candidates 0 appears only for
    auxiliary records that match nobody in the table.
    """

    columns: tuple[str, ...]
    mode: str  # "known" or "aux"
    targets: int  # records attacked
    histogram: tuple[tuple[int, int], ...]

    @property
    def singled_out(self) -> int:
        return sum(r for c, r in self.histogram if c == 1)

    @property
    def unmatched(self) -> int:
        return sum(r for c, r in self.histogram if c == 0)

    def to_dict(self) -> dict[Any, Any]:
        return {
            "columns": list(self.columns),
            "mode": self.mode,
            "targets": self.targets,
            "singled_out": self.singled_out,
            "singled_out_share": self.singled_out / self.targets if self.targets else 0.0,
            "unmatched": self.unmatched,
            "histogram": [{"candidates": c, "records": r} for c, r in self.histogram],
        }


def _histogram(candidates: NDArray[Any]) -> tuple[tuple[int, int], ...]:
    counts = np.bincount(candidates)
    present = np.flatnonzero(counts)
    return tuple((int(c), int(counts[c])) for c in present)


def linkage_histogram(
    df: pd.DataFrame,
    *,
    known: Sequence[str] | None = None,
    aux: pd.DataFrame | None = None,
    on: Sequence[str] | None = None,
) -> LinkageHistogram:
    """Simulate a linkage attack with ``known`` columns, or by joining ``aux`` on ``on``.

    With ``aux`` and no ``on``, the join uses every column the two tables share.
    """
    if (known is None) == (aux is None):
        raise ParameterError("give either the columns the attacker knows or an auxiliary table")
    if aux is None:
        ec = equivalence_classes(df, quasi_identifiers=list(known or ()))
        cands = ec.record_sizes()
        return LinkageHistogram(ec.quasi_identifiers, "known", ec.rows, _histogram(cands))
    cols = [c for c in df.columns if c in set(aux.columns)] if on is None else list(on)
    if not cols:
        raise ParameterError("the auxiliary table shares no column with the table")
    require_columns(df, cols, role="join column")
    require_columns(aux, cols, role="join column in the auxiliary table")
    cands = aux_candidates(df, aux, cols)
    return LinkageHistogram(tuple(cols), "aux", len(aux), _histogram(cands))


def aux_candidates(df: pd.DataFrame, aux: pd.DataFrame, cols: Sequence[str]) -> NDArray[Any]:
    """For each auxiliary record, the number of records of ``df`` with the same values."""
    both = pd.concat([df[list(cols)], aux[list(cols)]], ignore_index=True, copy=False)
    codes_in = []
    for c in cols:
        col = both[c]
        if df[c].dtype != aux[c].dtype:
            col = col.where(col.isna(), col.astype(str))
        codes_in.append(column_codes(col))
    codes = combine_codes(codes_in, len(both))
    released, attacker = codes[: len(df)], codes[len(df) :]
    per_key = np.bincount(released, minlength=int(codes.max()) + 1)
    return np.asarray(per_key[attacker])
