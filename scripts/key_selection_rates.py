"""Measured release rate of keys held by one person under private key selection, against the δ
the release states.

    .venv/bin/python scripts/key_selection_rates.py [--people 20000] [--runs 5]

Each run releases a histogram of a column in which every person holds keys nobody else holds
(one row on one key; or, with max_contributions = 3, three rows on one key or one row on each of
three keys). A person is "released" when any of their keys comes out. The rate over
people × runs is compared with the stated δ (its standard error beside it). For contrast, the
same noise with the threshold OpenDP 0.16 chooses for the declared δ is measured too: its δ map
counts only noise strictly above the threshold while it releases counts at it (OpenDP issue 2922).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from anonweb.core.dp import accounting as acc  # noqa: E402
from anonweb.core.dp.mechanisms import DPQuery, prepare, release  # noqa: E402


def _people(n: int, rows_each: int, spread: bool) -> pd.DataFrame:
    pid = np.repeat(np.arange(n), rows_each)
    if spread:
        keys = [f"k{p}-{j}" for p in range(n) for j in range(rows_each)]
    else:
        keys = [f"k{p}" for p in pid]
    return pd.DataFrame({"key": keys, "pid": pid})


def _rate(query: DPQuery, frame: pd.DataFrame, runs: int) -> float:
    rng = np.random.default_rng(7)
    hits = 0
    for _ in range(runs):
        table = release(frame, query, rng=rng).table
        hits += table["key"].str.split("-").str[0].nunique()
    return hits / (runs * frame["pid"].nunique())


def _opendp_rate(scale: float, delta: float, n: int, runs: int) -> tuple[int, float, float]:
    """OpenDP's own threshold for ``delta`` (one row per person) and its measured rate."""
    dp = acc.opendp()
    space = dp.vector_domain(dp.atom_domain(T=str)), dp.symmetric_distance()
    pre = dp.t.make_count_by(*space)
    threshold = None
    for t in range(1, 200):  # the smallest threshold OpenDP's map accepts for delta
        meas = pre >> dp.m.then_laplace_threshold(scale=scale, threshold=t)
        try:
            if meas.map(1)[1] <= delta:
                threshold = t
                break
        except Exception:  # noqa: BLE001  (OpenDP refuses thresholds below what it allows)
            continue
    reported = float(meas.map(1)[1])
    keys = [f"k{i}" for i in range(n)]
    hits = sum(len(meas(keys)) for _ in range(runs))
    return threshold, reported, hits / (n * runs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--people", type=int, default=20000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    n, runs = args.people, args.runs
    print(f"ε = 1; {n} people × {runs} runs per line; rate ± one standard error\n")
    print(
        f"{'declared δ':>10} {'rows/person':>12} {'threshold':>9} {'stated δ':>10} "
        f"{'measured rate':>17}"
    )
    cases = [(0.05, 1, False), (0.01, 1, False), (0.05, 3, False), (0.05, 3, True)]
    for declared, c, spread in cases:
        params = {"kind": "histogram", "epsilon": 1.0, "columns": ["key"], "delta": declared}
        if c > 1:
            params |= {"identifier": "pid", "max_contributions": c}
        query = DPQuery.from_params(params)
        prepared = prepare(query)
        frame = _people(n // c if c > 1 else n, c, spread)
        rate = _rate(query, frame, runs)
        se = math.sqrt(max(rate * (1 - rate), 1e-12) / (frame["pid"].nunique() * runs))
        how = f"{c}" + (" keys" if spread else " on 1 key" if c > 1 else "")
        print(
            f"{declared:>10g} {how:>12} {prepared.detail['threshold']:>9} "
            f"{prepared.delta:>10.4g} {rate:>9.4f} ± {se:.4f}"
        )
    print("\nOpenDP 0.16's own threshold for the declared δ (one row per person), for contrast:")
    scale = prepare(
        DPQuery.from_params({"kind": "histogram", "epsilon": 1.0, "columns": ["k"], "delta": 0.05})
    ).scale
    for declared in (0.05, 0.01):
        t, reported, rate = _opendp_rate(scale, declared, n, runs)
        se = math.sqrt(rate * (1 - rate) / (n * runs))
        print(
            f"{declared:>10g} {'1':>12} {t:>9} {reported:>10.4g} {rate:>9.4f} ± {se:.4f}"
            "   (OpenDP's δ)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
