"""The accuracy of each DP statistic: one half-width per statistic, at one confidence level.

A statistic that is one noisy value (a count, a cell, a sum) takes OpenDP's accuracy for the
noise that was added (:func:`anonweb.core.dp.accounting.laplace_ci95`).
Range counts are not one noisy value: each bin and each cumulative count is read off a b-ary
tree of noisy counts made consistent by OpenDP's ``make_consistent_b_ary_tree``, so its error is
a fixed linear combination of the nodes' noise. The weights come from OpenDP's own function
(it is linear: applied to each unit vector it gives one column), and the 95% half-width is the
95th percentile of |error| over many draws of the same discrete Laplace noise, drawn with a fixed
seed so the figure is the same every time it is asked for. No data is read: the intervals are
public, like the mechanism. Nothing here adds noise to a release.

Discrete noise cannot always be covered at exactly 95%: a count at scale 1 is within ±3 in 97.3%
of runs and within ±2 in 92.7%; OpenDP's accuracy takes the safe side.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from anonweb.core.dp.accounting import CONFIDENCE, opendp
from anonweb.core.dp.statistic import find_statistic
from anonweb.core.numbers import for_people

# Trees with more leaves than this get the union bound over their nodes instead (stated as
# conservative): the weight matrix grows with the square of the leaves.
MAX_EXACT_LEAVES = 512
SEED = 20_061_995  # any fixed value: the half-widths are the same every time they are computed
DRAW_BUDGET = 2_000_000_000  # draws × nodes × outputs, about a second of matrix products


@dataclass(frozen=True)
class TreeAccuracy:
    """Half-widths of range counts read off a consistent noisy tree."""

    per_bin: float  # every bin's count (the largest over the bins)
    cumulative: tuple[float, ...]  # the count of bins 1..k, for each k
    method: str

    def to_dict(self) -> dict[str, Any]:
        return {"per_bin": self.per_bin, "cumulative": list(self.cumulative)}


@functools.lru_cache(maxsize=32)
def tree_weights(bins: int, branching: int) -> NDArray[np.float64]:
    """``W`` with leaf estimates = ``W @ noisy_nodes``, from OpenDP's consistency function."""
    dp = opendp()
    leaves = branching ** math.ceil(math.log(bins, branching) - 1e-12)
    nodes = (leaves * branching - 1) // (branching - 1)
    # OpenDP's tree keeps only the nodes its leaves need (the padding on the right is implicit)
    used = nodes - (leaves - bins)
    consistent = dp.t.make_consistent_b_ary_tree(branching_factor=branching, TIA=int, TOA=float)
    columns = []
    for i in range(used):
        unit = [0] * used
        unit[i] = 1
        columns.append(np.asarray(consistent(unit), dtype=float)[:bins])
    return np.stack(columns, axis=1)


def _discrete_laplace(rng: np.random.Generator, scale: float, shape: tuple[int, int]) -> Any:
    """P(z) ∝ exp(−|z|/scale): the difference of two geometric variables (OpenDP's noise)."""
    p = -math.expm1(-1.0 / scale)  # 1 − e^(−1/scale), without cancellation for large scales
    return (rng.geometric(p, shape) - rng.geometric(p, shape)).astype(float)


@functools.lru_cache(maxsize=64)
def tree_accuracy(bins: int, branching: int, scale: float, depth: int) -> TreeAccuracy:
    """The 95% half-widths of the bins' counts and of the cumulative counts."""
    if bins > MAX_EXACT_LEAVES:
        # each count is the sum of at most 2(b − 1) nodes per level: a union bound over them
        nodes = 2 * (branching - 1) * depth
        dp = opendp()
        alpha = (1 - CONFIDENCE) / nodes
        node = float(dp.discrete_laplacian_scale_to_accuracy(scale=scale, alpha=alpha))
        bound = nodes * node
        return TreeAccuracy(bound, (bound,) * bins, "conservative: union bound over tree nodes")
    weights = tree_weights(bins, branching)
    outputs = np.vstack([weights, np.cumsum(weights, axis=0)])
    draws = int(min(20_000, max(2_000, DRAW_BUDGET // (weights.shape[1] * outputs.shape[0]))))
    rng = np.random.default_rng(SEED)
    noise = _discrete_laplace(rng, scale, (draws, weights.shape[1]))
    errors = np.abs(noise @ outputs.T)
    half = np.quantile(errors, CONFIDENCE, axis=0, method="higher")
    return TreeAccuracy(
        float(half[:bins].max()),
        tuple(float(h) for h in half[bins:]),
        f"the error distribution of the consistent tree ({draws:,} draws of its noise)",
    )


def mean_halfwidth(*, sum_scale: float, count_scale: float, mean: float, count: float) -> float:
    """95% half-width of a mean released as noisy sum over noisy count.

    Its error is (e_sum − mean · e_count) / count to first order: two independent Laplace
    variables (the count's discrete noise taken as continuous, close at the scales used), whose
    difference has the tail P(|X − Y| > t) = (a² e^(−t/a) − b² e^(−t/b)) / (a² − b²). Computed
    from the released mean and count only (post-processing), never from the source."""
    a, b = float(sum_scale), abs(float(mean)) * float(count_scale)
    alpha = 1 - CONFIDENCE
    if count <= 0:
        return math.inf

    def tail(t: float) -> float:
        if abs(a - b) < 1e-9 * max(a, b, 1e-300):  # equal scales: the limit (1 + t/a) e^(−t/a)
            return (1 + t / a) * math.exp(-t / a)
        return (a * a * math.exp(-t / a) - b * b * math.exp(-t / b)) / (a * a - b * b)

    if b == 0:
        t = a * math.log(1 / alpha)
    else:
        lo, hi = 0.0, (a + b) * math.log(2 / alpha) * 2
        for _ in range(100):  # the tail falls monotonically: bisection
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if tail(mid) > alpha else (lo, mid)
        t = hi
    return t / float(count)


def _pm(value: Any) -> str:
    return f"±{for_people(value)}"


def value_accuracy(what: str) -> Callable[[Mapping[str, Any], str], tuple[str, str]]:
    """The accuracy of a statistic released as noisy values with one half-width: ``what`` names
    them (``"the count is"``)."""

    def statement(entry: Mapping[str, Any], level: str) -> tuple[str, str]:
        half = entry.get("ci95_halfwidth")
        return f"With {level} confidence {what} within {_pm(half)} of the truth", ""

    return statement


def mean_accuracy(entry: Mapping[str, Any], level: str) -> tuple[str, str]:
    """A mean: its noisy sum's and noisy count's half-widths, then the mean's (approximate)."""
    half = entry.get("ci95_halfwidth")
    if not isinstance(half, Mapping):
        return value_accuracy("each released value is")(entry, level)
    text = (
        f"With {level} confidence the noisy sum is within {_pm(half.get('sum'))} and the noisy "
        f"count within {_pm(half.get('count'))} of the truth"
    )
    if entry.get("mean_ci95_halfwidth_approx") is not None:
        text += f"; the mean within {_pm(entry['mean_ci95_halfwidth_approx'])}"
    return text, ""


def _cumulative_spread(entry: Mapping[str, Any]) -> str:
    cumulative = [float(h) for h in entry.get("cumulative_ci95_halfwidth") or []]
    if cumulative and min(cumulative) != max(cumulative):
        return f"{_pm(min(cumulative))} to {_pm(max(cumulative))}"
    return _pm(cumulative[0]) if cumulative else "—"


def range_accuracy(entry: Mapping[str, Any], level: str) -> tuple[str, str]:
    """Range counts: each bin's half-width and the spread of the cumulative counts'."""
    text = (
        f"With {level} confidence each bin's count is within {_pm(entry.get('ci95_halfwidth'))} "
        f"of the truth, and each cumulative count within {_cumulative_spread(entry)}"
    )
    return text, ""


def quantile_accuracy(entry: Mapping[str, Any], level: str) -> tuple[str, str]:
    """Quantiles: how the bins read them, then (a release only) each one's interval."""
    text = (
        f"Quantiles are read linearly within public bins of width "
        f"{for_people(entry.get('bin_width'))} (how values spread inside a bin can move "
        "the raw values' quantile further)"
    )
    released = ""
    if entry.get("quantile_ci95"):
        intervals = "; ".join(
            f"{a:g}: [{for_people(lo)}, {for_people(hi)}]"
            for a, (lo, hi) in zip(entry.get("alphas") or [], entry["quantile_ci95"])
        )
        released = (
            f" With {level} confidence each quantile, as the bins read it, lies in its "
            f"interval ({intervals})."
        )
    return text, released


def accuracy_statement(entry: Mapping[str, Any]) -> str:
    """The one sentence stating a DP statistic's accuracy, from its report entry (or preview):
    the same half-widths the chart and the utility table show, with the confidence level. The
    statistic's declaration says what its figures are; a kind no longer registered reads as
    values with one half-width."""
    level = f"{CONFIDENCE:.0%}"
    statistic = find_statistic(entry.get("kind"))
    statement = statistic.accuracy if statistic else value_accuracy("each released value is")
    # ``released``: what only the release itself knows, after what the preview states
    text, released = statement(entry, level)
    unit = entry.get("unit_of_privacy") or {}
    if unit.get("identifier"):
        text += (
            f" (the noise only: rows beyond {unit.get('max_rows_per_person')} per person are "
            "dropped before counting)"
        )
    method = entry.get("accuracy_method")
    return text + (f"; from {method}." if method else ".") + released


@functools.lru_cache(maxsize=16)
def _rank_errors(bins: int, branching: int, scale: float, alpha: float) -> NDArray[np.float64]:
    """Draws of ``(C_k − αT)`` noisy minus true at every bin edge k = 0..bins (C_0 = 0): the
    error that decides where the α-quantile falls, one row per draw of the tree's noise."""
    weights = tree_weights(bins, branching)
    cumulative = np.vstack([np.zeros(weights.shape[1]), np.cumsum(weights, axis=0)])
    outputs = cumulative - alpha * cumulative[-1]
    draws = int(min(20_000, max(2_000, DRAW_BUDGET // (weights.shape[1] * outputs.shape[0]))))
    rng = np.random.default_rng(SEED)
    errors: NDArray[np.float64] = (
        _discrete_laplace(rng, scale, (draws, weights.shape[1])) @ outputs.T
    )
    return errors


def quantile_interval(
    edges: list[float],
    counts: list[float],
    alpha: float,
    *,
    branching: int,
    scale: float,
) -> tuple[float, float]:
    """The 95% interval of the α-quantile from the noisy bin counts, read as OpenDP's
    ``make_quantiles_from_counts`` reads the quantile itself (linear within a bin).

    The true quantile is where the true count below crosses α·n; the noisy count below, less
    α times the noisy total, misses that by the tree's rank error at that point (linear in the
    nodes' noise, interpolated between the bin's edges as the value is). The interval is the
    values where the noisy count below reaches α·total ∓ h, h that error's 95% half-width.
    Post-processing of the released counts only."""
    cumulative = np.concatenate([[0.0], np.cumsum(counts)])
    total = cumulative[-1]
    if total <= 0:
        return (edges[0], edges[-1])
    bins = len(counts)

    def locate(rank: float) -> tuple[int, float]:
        """The bin where the count below first reaches ``rank``, and how far into it (a count
        below 0 can make the running sum dip; the first crossing counts, as in OpenDP)."""
        reached = np.nonzero(cumulative[1:] >= rank)[0]
        k = int(reached[0]) if len(reached) else bins - 1
        width = cumulative[k + 1] - cumulative[k]
        return k, float(np.clip((rank - cumulative[k]) / width, 0, 1)) if width > 0 else 0.5

    target = alpha * total
    if bins > MAX_EXACT_LEAVES:
        depth = math.ceil(math.log(bins, branching)) + 1
        h = 2 * max(tree_accuracy(bins, branching, scale, depth).cumulative)
    else:
        draws = _rank_errors(bins, branching, scale, alpha)

        def halfwidth(rank: float) -> float:
            """The 95% half-width of the rank error where the noisy count below is ``rank``
            (linear between the edges of its bin, as the value is read)."""
            k, f = locate(rank)
            mixed = np.abs((1 - f) * draws[:, k] + f * draws[:, k + 1])
            return float(np.quantile(mixed, CONFIDENCE, method="higher"))

        h = halfwidth(target)

    def value_at(rank: float) -> float:
        if rank <= 0:
            return float(edges[0])
        if rank >= total:
            return float(edges[-1])
        k, f = locate(rank)
        return float(edges[k] + f * (edges[k + 1] - edges[k]))

    return value_at(target - h), value_at(target + h)
