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
from collections.abc import Mapping, Sequence
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


def quality_chart(entry: Mapping[str, Any]) -> Any:
    """A plotly figure of each two-way marginal's error for a synthetic step's report entry.

    From the published entry: the TVD to each measured (noisy) pair, a DP output. From the
    internal entry (officers and stewards): every pair's TVD to the source, beside the
    independent baseline's at the same ε. None when the entry has neither."""
    import plotly.graph_objects as go

    source = entry.get("quality_vs_source")
    noisy = (entry.get("quality") or {}).get("measured_two_way") or {}
    if isinstance(source, Mapping) and source.get("two_way_by_pair"):
        pairs = list(source["two_way_by_pair"])
        base = source.get("baseline_two_way_by_pair") or {}
        bars = [
            go.Bar(x=pairs, y=[source["two_way_by_pair"][p] for p in pairs], name="synthetic"),
            go.Bar(x=pairs, y=[base.get(p) for p in pairs], name="independent baseline"),
        ]
        what = "total variation of each two-way marginal to the source's (not DP: staff only)"
    elif noisy:
        pairs = list(noisy)
        bars = [go.Bar(x=pairs, y=[noisy[p] for p in pairs], name="to the noisy measurement")]
        what = "total variation of each measured pair to its noisy measurement"
    else:
        return None
    eps = entry.get("epsilon_spent")
    cost = f"ε = {eps:.3g}" if isinstance(eps, (int, float)) else ""
    fig = go.Figure(bars)
    fig.update_layout(
        title=f"Step {entry.get('step')}: DP synthetic data, {entry.get('method')} ({cost})"
        f"<br><sub>{what}</sub>",
        xaxis_type="category",
        yaxis_title="total variation distance",
        barmode="group",
    )
    return fig
