"""How an attacker compares a person's true values with released rows.

A released value *covers* a true value when it is that value, a generalization of it or a
suppression:

* the same value (numbers compared as numbers: ``39``, ``"39"`` and ``39.0`` agree);
* ``*`` (suppressed) covers every value; a blank covers a blank;
* an interval label of the hierarchy builders or Mondrian (``[20, 30[``, ``<20``, ``>=80``,
  ``20-29``) covers the numbers inside it; a mask (``021**``) covers the values it masks; a
  month, year or decade (``2020-05``, ``2020``, ``2010s``) covers the dates inside it;
* with the release's hierarchies, any level of a value's row covers that value.

Numeric columns released as numbers (perturbed, microaggregated, synthetic) are compared by
distance instead: ``|x - y|`` over the column's range in the source (Gower's distance, at most
1), and *agree* when within ``tolerance`` times that range.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

SUPPRESSED = "*"
_NUM = r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?"
_HALF_OPEN = re.compile(rf"^\[\s*({_NUM})\s*,\s*({_NUM})\s*\[$")
_CLOSED = re.compile(rf"^\[\s*({_NUM})\s*,\s*({_NUM})\s*\]$")
_RANGE = re.compile(rf"^({_NUM})-({_NUM})$")
_BELOW = re.compile(rf"^<\s*({_NUM})$")
_AT_LEAST = re.compile(rf"^>=\s*({_NUM})$")
_MONTH_OR_YEAR = re.compile(r"^\d{4}(?:-\d{2})?$")
_DECADE = re.compile(r"^(\d{3})0s$")

Hierarchies = Mapping[str, pd.DataFrame]
TABLE_CELLS = 20_000_000  # distinct true values x distinct released labels kept as a table


def is_numeric(values: pd.Series) -> bool:
    return bool(pd.api.types.is_numeric_dtype(values) and not pd.api.types.is_bool_dtype(values))


def encode(values: pd.Series) -> tuple[NDArray[Any], list[str | None]]:
    """Codes into the distinct values written as text (integral numbers without ``.0``); a
    blank is the label None."""
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    if is_numeric(values):
        labels: list[str | None] = [
            str(int(u)) if float(u).is_integer() else f"{float(u):g}" for u in uniques
        ]
    else:
        labels = [str(u) for u in uniques]
    codes = np.where(codes < 0, len(labels), codes)
    return codes.astype(np.int64), [*labels, None]


def _numbers(labels: list[str | None]) -> NDArray[Any]:
    text = pd.Series(labels, dtype=object)
    num = np.asarray(pd.to_numeric(text, errors="coerce"), float)
    # a code with a leading zero (ZIP 02139) is text, as the upload reads it: no interval
    # holds it
    code = text.fillna("").str.match(r"^-?0\d").to_numpy(dtype=bool)
    return np.where(code, np.nan, num)


def _covered_by(
    label: str, true: pd.Series, true_num: NDArray[Any], levels: pd.DataFrame | None
) -> NDArray[Any] | None:
    """Which true values ``label`` generalizes, or None when it is a plain value."""
    if label == SUPPRESSED:
        return np.ones(len(true), dtype=bool)
    text = true.fillna("")
    hit: NDArray[Any] | None = None
    m = _HALF_OPEN.match(label) or _CLOSED.match(label) or _RANGE.match(label)
    if _MONTH_OR_YEAR.match(label):  # before ranges: 2020-05 is a month, not 2020 to 5
        hit = text.str.startswith(label + "-").to_numpy(dtype=bool)
    elif m:
        lo, hi = float(m.group(1)), float(m.group(2))
        upper = true_num < hi if label.endswith("[") else true_num <= hi
        hit = (true_num >= lo) & upper
    elif m := _BELOW.match(label):
        hit = true_num < float(m.group(1))
    elif m := _AT_LEAST.match(label):
        hit = true_num >= float(m.group(1))
    elif m := _DECADE.match(label):
        hit = text.str.match(rf"^{m.group(1)}\d(?:-|$)").to_numpy(dtype=bool)
    elif SUPPRESSED in label:
        pattern = "".join("." if ch == SUPPRESSED else re.escape(ch) for ch in label)
        hit = text.str.fullmatch(pattern).to_numpy(dtype=bool)
    if levels is not None and len(levels.columns) > 1:
        inner = levels.iloc[:, 1:].astype(str).eq(label).any(axis=1).to_numpy()
        if inner.any():
            below = set(levels.iloc[:, 0].astype(str)[inner])
            extra = text.isin(below).to_numpy(dtype=bool)
            hit = extra if hit is None else hit | extra
    if hit is None:
        return None
    present: NDArray[Any] = true.notna().to_numpy(dtype=bool)
    out: NDArray[Any] = np.asarray(hit, dtype=bool) & present
    return out


class Column:
    """One column of the release's combinations (``released``) against people's true values
    (``true``), for the attacks' pairwise comparisons: ``distance(c, p)`` and ``agree(c, p)``
    take broadcastable arrays of combination and person indices."""

    def __init__(
        self,
        name: str,
        released: pd.Series,
        true: pd.Series,
        *,
        source_range: float,
        tolerance: float,
        levels: pd.DataFrame | None = None,
    ) -> None:
        self.name = name
        self.numeric = is_numeric(released) and is_numeric(true)
        self.scale = source_range if source_range > 0 else 1.0
        self.tolerance = tolerance * self.scale
        self.table: NDArray[Any] | None = None
        if self.numeric:
            self.r_val = released.to_numpy(dtype=float, na_value=np.nan)
            self.p_val = true.to_numpy(dtype=float, na_value=np.nan)
            self.r_star = np.zeros(len(released), dtype=bool)
            if not (np.isnan(self.r_val).any() or np.isnan(self.p_val).any()):
                self.r_scaled = (self.r_val / self.scale).astype(np.float32)
                self.p_scaled = (self.p_val / self.scale).astype(np.float32)
            return
        r_codes, r_labels = encode(released)
        p_codes, p_labels = encode(true)
        vocab = {label: i for i, label in enumerate(p_labels)}
        t_series = pd.Series(p_labels, dtype=object)
        t_num = _numbers(p_labels)
        plain = np.full(len(r_labels), -2, dtype=np.int64)
        gen_rows: list[NDArray[Any]] = []
        gen_index = np.full(len(r_labels), -1, dtype=np.int64)
        for i, label in enumerate(r_labels):
            covered = None if label is None else _covered_by(label, t_series, t_num, levels)
            if covered is None:
                plain[i] = vocab.get(label, -2)
            else:
                own = vocab.get(label)
                if own is not None:
                    covered = covered.copy()
                    covered[own] = True
                gen_index[i] = len(gen_rows)
                gen_rows.append(covered)
        gen_rows.append(np.zeros(len(p_labels), dtype=bool))  # index -1: generalizes nothing
        self.r_plain = plain[r_codes]
        self.r_gen = gen_index[r_codes]
        self.p_code = p_codes
        self.gen = np.vstack(gen_rows)
        self.r_star = np.asarray([r_labels[c] == SUPPRESSED for c in r_codes], dtype=bool)
        self.r_codes = r_codes
        if len(p_labels) * len(r_labels) <= TABLE_CELLS:
            # distance between each distinct true value and each distinct released label: a
            # block of people against the release is then one lookup
            people = np.arange(len(p_labels))[:, None]
            hit = (plain[None, :] == people) | self.gen[gen_index[None, :], people]
            self.table = np.asarray(~hit, dtype=np.float32)

    def distance_block(self, p: NDArray[Any]) -> NDArray[Any]:
        """Distances of people ``p`` (1-D) to every combination, as float32."""
        if self.table is not None:
            block: NDArray[Any] = np.take(self.table[self.p_code[p]], self.r_codes, axis=1)
            return block
        if self.numeric and hasattr(self, "r_scaled"):
            d: NDArray[Any] = np.abs(self.p_scaled[p][:, None] - self.r_scaled[None, :])
            np.minimum(d, np.float32(1.0), out=d)
            return d
        return self.distance(np.arange(len(self.r_star))[None, :], p[:, None])

    def covers(self, c: NDArray[Any], p: NDArray[Any]) -> NDArray[Any]:
        if self.numeric:
            return self.agree(c, p)
        p_code = self.p_code[p]
        return np.asarray((self.r_plain[c] == p_code) | self.gen[self.r_gen[c], p_code], dtype=bool)

    def distance(self, c: NDArray[Any], p: NDArray[Any]) -> NDArray[Any]:
        if not self.numeric:
            return np.asarray(~self.covers(c, p), dtype=np.float32)
        r, t = self.r_val[c], self.p_val[p]
        d = np.minimum(np.abs(r - t) / self.scale, 1.0)
        both_blank = np.isnan(r) & np.isnan(t)
        return np.where(both_blank, 0.0, np.where(np.isnan(d), 1.0, d)).astype(np.float32)

    def agree(self, c: NDArray[Any], p: NDArray[Any]) -> NDArray[Any]:
        if not self.numeric:
            return self.covers(c, p)
        r, t = self.r_val[c], self.p_val[p]
        return np.asarray((np.abs(r - t) <= self.tolerance) | (np.isnan(r) & np.isnan(t)))
