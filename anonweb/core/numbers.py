"""Numbers written for people: the released DP tables and the sentences about them.

One helper for both, so a figure reads the same in the CSV and in the report: a count released as
a whole number is written as one, other figures keep a sensible number of significant digits
(``5.7``, not ``5.699999999999999``), a difference lost in floating-point noise is 0 (not
``-2.842e-14``), and a probability as small as δ is written in scientific notation with two
significant digits (``9.4e-7``).
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

TABLE_DIGITS = 6  # released figures: far finer than any DP noise, short enough to read
TEXT_DIGITS = 4
# Below this share of the figures it is compared with, a difference is floating-point noise.
RELATIVE_NOISE = 1e-9


def significant(value: float, digits: int = TABLE_DIGITS) -> float:
    """``value`` rounded to ``digits`` significant digits (non-finite values as they are)."""
    value = float(value)
    if not math.isfinite(value) or value == 0:
        return value
    return float(f"{value:.{digits}g}")


def for_people(value: Any, digits: int = TEXT_DIGITS, *, scale: float | None = None) -> str:
    """A figure for a sentence: whole numbers with thousands separators, others with ``digits``
    significant digits; with ``scale`` (the size of the figures it is a difference of), a value
    below ``RELATIVE_NOISE`` of it is written 0."""
    if value is None:
        return "—"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    number = float(value)
    if not math.isfinite(number):
        return "unbounded" if number > 0 else "−unbounded" if number < 0 else "undefined"
    if scale is not None and abs(number) <= RELATIVE_NOISE * max(abs(scale), 1.0):
        return "0"
    if number.is_integer() and abs(number) < 1e15:
        return f"{int(number):,}"
    text = f"{number:,.{digits}g}"
    return _short_exponent(text) if "e" in text else text


def probability(value: Any) -> str:
    """A small probability (δ): two significant digits, in scientific notation below 0.001."""
    if value is None:
        return "—"
    number = float(value)
    if number == 0 or not 0 < abs(number) < 1e-3:
        return f"{number:.2g}"
    return _short_exponent(f"{number:.1e}")


def _short_exponent(text: str) -> str:
    """``9.4e-07`` → ``9.4e-7``, ``1.0e-06`` → ``1e-6``."""
    mantissa, exponent = text.split("e")
    if "." in mantissa:
        mantissa = mantissa.rstrip("0").rstrip(".")
    return f"{mantissa}e{int(exponent)}"


def released_table(table: pd.DataFrame, *, keep: tuple[str, ...] = ()) -> pd.DataFrame:
    """A released table as people read it: a float column holding only whole numbers becomes an
    integer column, other float columns keep ``TABLE_DIGITS`` significant digits (those named in
    ``keep``, public parameters such as bin edges, are left as written). Rounding a released
    figure is post-processing: it spends no privacy."""
    out = table.copy()
    for column in (c for c in out.columns if c not in keep):
        values = out[column]
        if not pd.api.types.is_float_dtype(values):
            continue
        finite = values.dropna()
        if len(finite) and finite.map(lambda v: math.isfinite(v) and float(v).is_integer()).all():
            out[column] = values.astype("Int64") if values.isna().any() else values.astype(int)
        else:
            out[column] = values.map(significant, na_action="ignore").astype(float)
    return out
