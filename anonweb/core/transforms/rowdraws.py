"""Per-row draws for the row-wise random steps (noise, PRAM), keyed by the row's position.

A row's draw is a function of the step's seed, the row's position in the table and a stream
number (one per column the step perturbs), never of the rows before it: SplitMix64 (Steele,
Lea & Flood 2014), whose n-th output is a mixing function of ``seed + n * gamma``, evaluated
at the row's position. So a step run on the whole table in memory and the same step run by an
engine a part at a time give every row the same value, and each row's output depends only on
that row, the seed and its position (the step is row-wise, as its stability declares).

The seed itself is drawn from the plan's ``rng`` when the step runs (once per step), so the
plan's randomness still comes from the caller. These draws are for the non-DP perturbation
steps only: differentially private noise is drawn by OpenDP.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from anonweb.core.release.steps import StepContext

_GAMMA = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB
_STREAM = 0xD1B54A32D192ED03


def _mix(z: NDArray[np.uint64]) -> NDArray[np.uint64]:
    """SplitMix64's output function (wrapping 64-bit arithmetic)."""
    with np.errstate(over="ignore"):
        z = (z ^ (z >> np.uint64(30))) * np.uint64(_MIX1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(_MIX2)
    return z ^ (z >> np.uint64(31))


def row_seed(ctx: StepContext) -> int:
    """The step's seed: drawn from the plan's ``rng`` (one draw per step run on a whole table;
    on the first part when an engine runs it a part at a time, and kept for the others)."""
    if ctx.row_seed is not None:
        return int(ctx.row_seed)
    seed = int(ctx.rng.integers(0, 2**63))
    if ctx.row_positions is not None:
        ctx.row_seed = seed
    return seed


def positions(ctx: StepContext, n: int) -> NDArray[np.int64]:
    """The positions in the table of the ``n`` rows the step was given."""
    if ctx.row_positions is None:
        return np.arange(n, dtype=np.int64)
    out = np.asarray(ctx.row_positions, dtype=np.int64)
    if out.shape != (n,):
        raise ValueError("the row positions must give one position per row")
    return out


def row_uniforms(seed: int, rows: NDArray[Any], stream: int = 0) -> NDArray[np.float64]:
    """One uniform draw in (0, 1) per row position, for ``seed`` and ``stream``."""
    rows = np.asarray(rows, dtype=np.int64)
    with np.errstate(over="ignore"):
        key = _mix(
            np.array([seed % 2**64], dtype=np.uint64)
            + np.array([(stream + 1) * _STREAM % 2**64], dtype=np.uint64)
        )
        z = _mix(key + (rows.astype(np.uint64) + np.uint64(1)) * np.uint64(_GAMMA))
    # the top 53 bits, centred in their interval: never exactly 0 or 1
    return ((z >> np.uint64(11)).astype(np.float64) + 0.5) * 2.0**-53


def row_normals(seed: int, rows: NDArray[Any], stream: int = 0) -> NDArray[np.float64]:
    """One standard normal draw per row position (the inverse normal CDF of its uniform)."""
    from scipy.special import ndtri

    return np.asarray(ndtri(row_uniforms(seed, rows, stream)), dtype=np.float64)
