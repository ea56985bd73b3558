"""Benchmark of DP synthetic data on Adult (not a test: the machine is shared and timings are noisy).

    .venv/bin/python bench/bench_synthetic.py [--epsilons 0.5,1,4] [--methods independent,mst,aim]
        [--tables arx9,adult14] [--bins 32]

Tables (from ``../shared/datasets``):

* ``arx9``: ARX's Adult, 30,162 rows, its 9 columns (age in 10-year public bins 0-100 by
  default, ``--bins`` for others; every other column categorical);
* ``adult14``: the UCI Adult training set, 32,561 rows, its 14 columns without ``fnlwgt``
  (age, education-num, capital gain and loss, hours per week in ``--bins`` equal bins over public
  bounds; ``?`` kept as a category).

The categories are read from the data here, for the benchmark only (a plan must declare them).
Each (table, ε, method) runs in a fresh process so that its peak memory (ru_maxrss) is its own;
δ = 1e-9. Printed per run: seconds and CPU seconds (measure, select, estimate and sample; the
CPU time is the fairer figure on a loaded machine), peak MB, and the mean
total-variation distance of the synthetic table's 2-way and 3-way marginals to the source's, with
the ratio to the independent baseline at the same ε. Goal at ε = 1: MST (with its compression of
rare categories) and AIM (rounds and model size bounded, ``marginals.AIM_*``) beat the baseline's
2-way TVD by at least 30% in under 120 s CPU within 2 GB.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "datasets"
if not DATA.exists():
    DATA = Path("/work/shared/datasets")

from anonweb.core.dp import marginals as mg  # noqa: E402
from anonweb.core.dp import mechanisms as dpm  # noqa: E402
from anonweb.core.dp.synthetic_quality import way_tvds  # noqa: E402

NUMERIC14 = {
    "age": (17, 91),
    "education-num": (1, 17),
    "capital-gain": (0, 100_000),
    "capital-loss": (0, 4_500),
    "hours-per-week": (1, 100),
}


def load(name: str, bins: int) -> tuple[pd.DataFrame, mg.Domain]:
    if name == "arx9":
        df = pd.read_csv(DATA / "arx" / "adult.csv", sep=";")
        numeric = {"age": (0.0, 100.0)}
        n_bins = {"age": 10 if bins == 32 else bins}
    else:
        df = pd.read_csv(DATA / "pycanon" / "raw" / "adult.csv", skipinitialspace=True)
        df = df.drop(columns=["fnlwgt"])
        numeric = {c: (float(lo), float(hi)) for c, (lo, hi) in NUMERIC14.items()}
        n_bins = dict.fromkeys(numeric, bins)
    labels: dict[str, tuple[str, ...]] = {}
    edges: dict[str, tuple[float, ...]] = {}
    for col in df.columns:
        if col in numeric:
            lo, hi = numeric[col]
            e = np.linspace(lo, hi, n_bins[col] + 1)
            edges[col] = tuple(float(v) for v in e)
            labels[col] = tuple(f"[{a:g}, {b:g})" for a, b in zip(e[:-1], e[1:]))
        else:
            labels[col] = tuple(dict.fromkeys(dpm.cell_labels(df[col].dropna())))
    return df, mg.Domain(columns=tuple(df.columns), labels=labels, edges=edges)


def one_run(table: str, epsilon: float, method: str, bins: int, queue: Any) -> None:
    df, domain = load(table, bins)
    codes = mg.encode(df, domain)
    plan = mg.MarginalPlan(method=method, domain=domain, epsilon=epsilon, delta=1e-9)
    start, cpu0 = time.perf_counter(), time.process_time()
    result = mg.run(codes, plan, rng=np.random.default_rng(0), n_rows=len(df))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu0
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    tvds = way_tvds(codes, result.codes, domain)
    queue.put(
        {
            "table": table,
            "rows": len(df),
            "columns": len(domain.columns),
            "epsilon": epsilon,
            "rho": plan.rho,
            "method": method,
            "seconds": round(seconds, 1),
            "cpu_seconds": round(cpu, 1),
            "peak_mb": round(peak_mb),
            "two_way_tvd": float(np.mean(list(tvds[2].values()))),
            "three_way_tvd": float(np.mean(list(tvds[3].values()))),
            "pairs": [[domain.columns[i] for i in k] for k in (result.tree or result.cliques)],
            "merged": result.merged,
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epsilons", default="0.5,1,4")
    parser.add_argument("--methods", default="independent,mst,aim")
    parser.add_argument("--tables", default="arx9,adult14")
    parser.add_argument("--bins", type=int, default=32)
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args()
    ctx = mp.get_context("spawn")
    rows = []
    for table in args.tables.split(","):
        for eps in (float(e) for e in args.epsilons.split(",")):
            for method in args.methods.split(","):
                queue = ctx.Queue()
                proc = ctx.Process(target=one_run, args=(table, eps, method, args.bins, queue))
                proc.start()
                row = queue.get()
                proc.join()
                rows.append(row)
                base = next(
                    (
                        r
                        for r in rows
                        if r["method"] == "independent"
                        and r["table"] == table
                        and r["epsilon"] == eps
                    ),
                    None,
                )
                ratio = (
                    f" ({1 - row['two_way_tvd'] / base['two_way_tvd']:+.0%} vs independent)"
                    if base and row is not base
                    else ""
                )
                print(
                    f"{table:8} ε={eps:<4g} ρ={row['rho']:.4f} {method:12} "
                    f"{row['seconds']:6.1f} s (CPU {row['cpu_seconds']:6.1f} s) {row['peak_mb']:5d} MB  "
                    f"2-way TVD {row['two_way_tvd']:.3f}  3-way TVD {row['three_way_tvd']:.3f}"
                    f"{ratio}",
                    flush=True,
                )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
