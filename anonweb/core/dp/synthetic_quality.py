"""How good a DP synthetic table is: total-variation distance (TVD) of its marginals.

Two reports, as for every release:

* :func:`noisy_quality` compares the synthetic table with the noisy measurements it was made from.
  Both are DP outputs, so these figures are post-processing and may be published.
* :func:`source_quality` compares the synthetic table, and the independent baseline at the same
  budget, with the source's true one-, two- and three-way marginals. It reads the source, so it is
  for officers and stewards only and never part of the published report.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from anonweb.core.dp.marginals import Codes, Domain, Measured, marginal

BASELINE = "independent"
# Three-way marginals grow as C(d, 3); past this many, an evenly spread subset is measured.
MAX_TRIPLES = 1000


def tvd(p: NDArray[Any], q: NDArray[Any]) -> float:
    """Total variation between two count vectors over the same cells (negatives clipped)."""
    p = np.maximum(np.asarray(p, dtype=float), 0.0)
    q = np.maximum(np.asarray(q, dtype=float), 0.0)
    sp, sq = p.sum(), q.sum()
    if sp <= 0 or sq <= 0:
        return 1.0 if sp != sq else 0.0
    return float(0.5 * np.abs(p / sp - q / sq).sum())


def _summary(values: Sequence[float]) -> tuple[float | None, float | None]:
    return (float(np.mean(values)), float(np.max(values))) if values else (None, None)


def _pair_name(domain: Domain, key: tuple[int, ...]) -> str:
    return "|".join(domain.columns[i] for i in key)


def noisy_quality(
    synthetic: Codes, measured: Measured, domain: Domain, *, method: str
) -> dict[str, Any]:
    """TVD between the synthetic table's marginals and the noisy measured ones (DP-safe)."""
    sizes = domain.sizes
    one = {k: tvd(marginal(synthetic, sizes, k), v) for k, v in measured.one_way.items()}
    two = {k: tvd(marginal(synthetic, sizes, k), v) for k, v in measured.two_way.items()}
    one_mean, one_max = _summary(list(one.values()))
    two_mean, two_max = _summary(list(two.values()))
    return {
        "note": "between the synthetic table and the noisy marginals it was made from (DP-safe)",
        "method": method,
        "baseline": BASELINE,
        "one_way_tvd_noisy": one_mean,
        "one_way_tvd_noisy_max": one_max,
        "two_way_tvd_noisy": two_mean,
        "two_way_tvd_noisy_max": two_max,
        "measured_two_way": {_pair_name(domain, k): v for k, v in two.items()},
    }


def _triples(d: int) -> list[tuple[int, ...]]:
    triples: list[tuple[int, ...]] = list(itertools.combinations(range(d), 3))
    if len(triples) <= MAX_TRIPLES:
        return triples
    step = len(triples) / MAX_TRIPLES
    return [triples[int(i * step)] for i in range(MAX_TRIPLES)]


def way_tvds(
    source: Codes, synthetic: Codes, domain: Domain
) -> dict[int, dict[tuple[int, ...], float]]:
    """TVD of every one- and two-way marginal and of (up to ``MAX_TRIPLES``) three-way ones."""
    sizes, d = domain.sizes, len(domain.columns)
    ways: dict[int, list[tuple[int, ...]]] = {
        1: [(j,) for j in range(d)],
        2: list(itertools.combinations(range(d), 2)),
        3: _triples(d),
    }
    return {
        w: {k: tvd(marginal(source, sizes, k), marginal(synthetic, sizes, k)) for k in keys}
        for w, keys in ways.items()
    }


def source_quality(
    source: Codes, synthetic: Codes, baseline: Codes, domain: Domain
) -> dict[str, Any]:
    """The synthetic table and the independent baseline against the source (not DP)."""
    mine, base = way_tvds(source, synthetic, domain), way_tvds(source, baseline, domain)
    out: dict[str, Any] = {
        "note": "computed on the source: for officers and stewards, not differentially private"
    }
    for w, name in ((1, "one_way"), (2, "two_way"), (3, "three_way")):
        out[f"{name}_tvd"], out[f"{name}_tvd_max"] = _summary(list(mine[w].values()))
        out[f"baseline_{name}_tvd"] = _summary(list(base[w].values()))[0]
    out["two_way_by_pair"] = {_pair_name(domain, k): v for k, v in mine[2].items()}
    out["baseline_two_way_by_pair"] = {_pair_name(domain, k): v for k, v in base[2].items()}
    mean, ref = out["two_way_tvd"], out["baseline_two_way_tvd"]
    out["beats_baseline"] = None if mean is None or ref is None else bool(mean < ref)
    out["improvement_over_baseline"] = None if mean is None or not ref else float(1 - mean / ref)
    return out
