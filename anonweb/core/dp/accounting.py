"""Privacy accounting for OpenDP measurements: calibration, cost, accuracy, unit of privacy.

Every number here comes from the measurement that will run: the scale is chosen by asking the
measurement's own privacy map, and the cost reported is ``measurement.map(d_in)``, so the ledger,
the preview and the mechanism cannot disagree. Nothing here reads data, except
:func:`bound_contributions`, which is the one data-dependent step of the unit of privacy.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from anonweb.core.errors import CoreError, ParameterError

CONFIDENCE = 0.95


def opendp() -> Any:
    """OpenDP's prelude with contrib features on (imported late: it loads a native library)."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    return dp


@contextlib.contextmanager
def opendp_errors(cls: type[CoreError] = ParameterError) -> Iterator[None]:
    """Turn OpenDP's exceptions into ``cls`` with OpenDP's own reason, so that a refused
    parameter is a plan error shown to the officer, never a raw exception in the worker."""
    from opendp.mod import OpenDPException

    try:
        yield
    except OpenDPException as exc:
        reason = (exc.message or str(exc)).strip().splitlines()[0] if str(exc) else ""
        raise cls(f"OpenDP refused these parameters: {reason or exc.variant}") from None


def check_epsilon(value: Any, *, name: str = "epsilon") -> float:
    """A finite positive float, or a :class:`ParameterError` a privacy officer can read."""
    try:
        eps = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"{name} must be a number, not {value!r}") from None
    if not math.isfinite(eps) or eps <= 0:
        raise ParameterError(f"{name} must be a positive number, not {value!r}")
    return eps


def check_delta(value: Any) -> float:
    try:
        delta = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"delta must be a number, not {value!r}") from None
    if not 0 < delta < 1:
        raise ParameterError(f"delta must be strictly between 0 and 1, not {value!r}")
    return delta


def check_bounds(value: Any, *, what: str) -> tuple[float, float]:
    """Declared clamping bounds ``(lo, hi)``; they must be public, never read off the data."""
    if value is None:
        raise ParameterError(
            f"{what} needs declared bounds LO,HI (they must not come from the data)"
        )
    if isinstance(value, str):
        value = value.split(",")
    try:
        lo, hi = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ParameterError(
            f"bounds for {what} must be two numbers LO,HI, not {value!r}"
        ) from None
    if not (math.isfinite(lo) and math.isfinite(hi)) or lo >= hi:
        raise ParameterError(f"bounds for {what} must be finite with LO < HI, not {lo:g},{hi:g}")
    return lo, hi


def epsilon_of(measurement: Any, d_in: float) -> tuple[float, float]:
    """(ε, δ) of a measurement at ``d_in``; δ is 0 for pure-DP measures."""
    value = measurement.map(d_in)
    if isinstance(value, tuple):
        return float(value[0]), float(value[1])
    return float(value), 0.0


def calibrate(
    build: Callable[[float], Any], *, sensitivity: float, d_in: float, epsilon: float
) -> tuple[Any, float]:
    """The measurement with the smallest noise scale whose privacy map gives at most ``epsilon``.

    ``sensitivity / epsilon`` is exact for integer queries; float queries carry a rounding slack
    in their map, so OpenDP's own binary search settles the last digits.
    """
    scale = sensitivity / epsilon
    meas = build(scale)
    if epsilon_of(meas, d_in)[0] <= epsilon:
        return meas, scale
    dp = opendp()
    scale = dp.binary_search_param(
        lambda s: _pure(build(s)), d_in=d_in, d_out=epsilon, bounds=(scale, scale * 2 + 1e-9)
    )
    return build(scale), scale


class _pure:
    """Expose only ε of an approximate-DP measurement to ``binary_search_param``."""

    def __init__(self, meas: Any) -> None:
        self.meas = meas

    def map(self, d_in: float) -> float:
        return epsilon_of(self.meas, d_in)[0]

    def check(self, d_in: float, d_out: float) -> bool:
        return self.map(d_in) <= d_out


def split_epsilon(total: float, parts: int, *, decimals: int = 6) -> list[float]:
    """Split ``total`` into ``parts`` shares whose sum never exceeds it (as the ledger adds them).

    Rounding every share to the nearest millionth made ε = 2 over 3 columns cost 2.000001, which a
    budget of exactly 2 refused. Shares are rounded *down*; the last one takes the remainder.
    """
    total = check_epsilon(total)
    if parts < 1:
        raise ParameterError("an ε split needs at least one part")
    unit = 10.0**decimals
    share = math.floor(total / parts * unit) / unit
    if share <= 0:
        raise ParameterError(f"ε = {total:g} is too small to split into {parts} parts")
    shares = [share] * (parts - 1)
    running = 0.0
    for s in shares:
        running += s
    last = total - running
    while running + last > total:  # float rounding: step down to the next representable value
        last = math.nextafter(last, 0.0)
    return [*shares, last]


def laplace_ci95(scale: float, *, integer: bool) -> float:
    """Half-width of the 95% interval of Laplace noise (discrete for integer counts)."""
    dp = opendp()
    alpha = 1 - CONFIDENCE
    if integer:
        return float(dp.discrete_laplacian_scale_to_accuracy(scale=scale, alpha=alpha))
    return float(dp.laplacian_scale_to_accuracy(scale=scale, alpha=alpha))


def check_contributions(identifier: Any, max_contributions: Any) -> tuple[str | None, int]:
    try:
        c = int(max_contributions)
    except (TypeError, ValueError):
        raise ParameterError(
            f"max_contributions must be a whole number, not {max_contributions!r}"
        ) from None
    if c < 1 or c != float(max_contributions):
        raise ParameterError(
            f"max_contributions must be a whole number ≥ 1, not {max_contributions!r}"
        )
    if identifier is None and c != 1:
        raise ParameterError(
            "max_contributions needs an identifier column (who the rows belong to)"
        )
    return (str(identifier) if identifier else None), c


@dataclass(frozen=True)
class Contributions:
    """How many rows each person (a value of the identifier) has, and what a bound drops.

    Source figures: for officers and stewards (the plan page, the internal report), never for
    a published report. ``dropped`` does not depend on which rows are kept: every person keeps
    ``min(rows, bound)`` of theirs."""

    identifier: str | None
    rows: int
    persons: int
    max_rows: int
    distribution: tuple[tuple[int, int], ...]  # (rows a person has, persons with that many)
    bound: int
    dropped: int
    persons_truncated: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "identifier": self.identifier,
            "rows": self.rows,
            "persons": self.persons,
            "max_rows_per_person": self.max_rows,
            "rows_per_person": {str(k): v for k, v in self.distribution},
            "max_contributions": self.bound,
            "rows_dropped": self.dropped,
            "persons_truncated": self.persons_truncated,
            "statement": self.statement(),
        }

    def statement(self) -> str:
        who = f"{self.identifier!r}" if self.identifier else "row"
        head = (
            f"{self.persons:,} people (values of {who}) in {self.rows:,} rows, at most "
            f"{self.max_rows:,} row(s) each"
            if self.identifier
            else f"{self.rows:,} rows, each row one person"
        )
        if not self.dropped:
            return f"{head}; with at most {self.bound} row(s) kept per person, no row is dropped."
        return (
            f"{head}; with at most {self.bound} row(s) kept per person, {self.dropped:,} row(s) "
            f"of {self.persons_truncated:,} {'person' if self.persons_truncated == 1 else 'people'}"
            " are dropped before the noise is added, so the "
            f"released figures may fall short of the source's by that much: the stated interval "
            f"covers the noise only."
        )


def contributions(
    values: pd.Series | None, *, bound: int = 1, rows: int | None = None
) -> Contributions:
    """Rows per person of an identifier column (``None``: each row is a person, ``rows`` of
    them). Missing identifiers count as one person, as :func:`bound_contributions` keeps them."""
    if values is None:
        n = int(rows or 0)
        return Contributions(None, n, n, 1 if n else 0, ((1, n),) if n else (), bound, 0, 0)
    counts = values.value_counts(dropna=False, sort=False).to_numpy()
    return contributions_from_counts(str(values.name), counts, bound=bound)


def contributions_from_counts(identifier: str, counts: Any, *, bound: int = 1) -> Contributions:
    """:func:`contributions` from the number of rows of each person (as a column's value counts
    give them, its missing values counted as one more person)."""
    counts = np.asarray(counts, dtype=np.int64)
    counts = counts[counts > 0]
    spread = np.bincount(counts) if len(counts) else np.zeros(1, dtype=int)
    distribution = tuple((int(k), int(v)) for k, v in enumerate(spread) if k and v)
    over = counts[counts > bound]
    return Contributions(
        identifier=identifier,
        rows=int(counts.sum()),
        persons=len(counts),
        max_rows=int(counts.max()) if len(counts) else 0,
        distribution=distribution,
        bound=bound,
        dropped=int((over - bound).sum()),
        persons_truncated=len(over),
    )


def bound_contributions(
    df: pd.DataFrame, *, identifier: str | None, max_contributions: int, rng: np.random.Generator
) -> pd.DataFrame:
    """Keep at most ``max_contributions`` rows per person, chosen at random.

    Without an identifier every row is a person and nothing is dropped. Rows whose identifier is
    missing are treated as one person: counting them as many could let one person exceed the bound.
    """
    if identifier is None:
        return df
    order = rng.permutation(len(df))
    shuffled = df[identifier].iloc[order]
    rank = shuffled.groupby(shuffled, dropna=False, sort=False).cumcount().to_numpy()
    keep = np.zeros(len(df), dtype=bool)
    keep[order[rank < max_contributions]] = True
    return df.loc[keep]


def unit_of_privacy(
    identifier: str | None, max_contributions: int, d_in: int | None = None
) -> dict[str, Any]:
    return {
        "neighbouring": "unbounded: add or remove one person (symmetric distance)",
        "identifier": identifier,
        "person": f"the value of {identifier!r}" if identifier else "each row is a person",
        "max_rows_per_person": max_contributions,
        "d_in": max_contributions if d_in is None else d_in,
    }


# -- private key selection -------------------------------------------------------------------


def discrete_laplace_tail(t: int, scale: float) -> float:
    """P(Z ≥ t) for OpenDP's discrete Laplace noise, P(Z = z) ∝ exp(−|z| / scale)."""
    r = math.exp(-1.0 / scale)
    if t >= 1:
        return math.exp(-t / scale) / (1.0 + r)
    return 1.0 - math.exp(-(1 - t) / scale) / (1.0 + r)


def selection_delta(*, threshold: int, scale: float, d_in: int) -> float:
    """δ of releasing the noisy counts that reach ``threshold`` (count + Z ≥ threshold).

    A key held by the added person alone exists in one table and not in the other: the release
    tells them apart exactly when such a key is released. The person's ``d_in`` rows can spread
    over keys in any way; by convexity of the tail the worst case puts ``d_in − m + 1`` rows on
    one key and one row on each of ``m − 1`` others, and δ is the largest union bound over
    ``m``. Counts equal to the threshold are released, so the tail includes the threshold."""

    def released(count: int) -> float:
        return discrete_laplace_tail(threshold - count, scale)

    worst = max(released(d_in - m + 1) + (m - 1) * released(1) for m in range(1, d_in + 1))
    return min(1.0, worst)


def selection_threshold(*, scale: float, d_in: int, delta: float) -> int:
    """The smallest threshold (at least ``d_in``, as OpenDP requires) whose δ is at most ``delta``."""
    lo = max(1, int(d_in))
    if selection_delta(threshold=lo, scale=scale, d_in=d_in) <= delta:
        return lo
    hi = lo * 2
    while selection_delta(threshold=hi, scale=scale, d_in=d_in) > delta:
        lo, hi = hi, hi * 2
        if hi > 2**30:
            raise ParameterError(f"delta {delta:g} is too small for key selection")
    while hi - lo > 1:  # invariant: δ(lo) > target ≥ δ(hi)
        mid = (lo + hi) // 2
        if selection_delta(threshold=mid, scale=scale, d_in=d_in) <= delta:
            hi = mid
        else:
            lo = mid
    return hi


def check_categories(raw: Any, columns: tuple[str, ...]) -> dict[str, tuple[str, ...]] | None:
    if raw is None:
        return None
    if not isinstance(raw, Mapping):
        raise ParameterError("categories must map each histogram column to its list of values")
    missing = [c for c in columns if c not in raw]
    if missing:
        raise ParameterError(f"no declared categories for column(s): {', '.join(missing)}")
    out = {}
    for col in columns:
        values = [str(v) for v in raw[col]]
        if not values or len(set(values)) != len(values):
            raise ParameterError(f"declared categories for {col!r} must be non-empty and distinct")
        out[col] = tuple(values)
    return out


def check_alphas(raw: Any) -> tuple[float, ...]:
    try:
        alphas = tuple(float(a) for a in ([raw] if isinstance(raw, (int, float)) else raw))
    except (TypeError, ValueError):
        raise ParameterError(f"quantile levels must be numbers in [0, 1], not {raw!r}") from None
    if not alphas or any(not 0 <= a <= 1 for a in alphas):
        raise ParameterError(f"quantile levels must be numbers in [0, 1], not {raw!r}")
    return alphas


def check_bins(raw: Any) -> int:
    try:
        bins = int(raw)
    except (TypeError, ValueError):
        raise ParameterError(f"bins must be a whole number, not {raw!r}") from None
    if not 2 <= bins <= 100_000:
        raise ParameterError(f"bins must be between 2 and 100000, not {raw!r}")
    return bins
