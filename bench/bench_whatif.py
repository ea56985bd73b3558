"""Benchmark: one what-if call (k, classes, suppression, l, t, δ, risks, loss) on 1,000,000 rows.

    .venv/bin/python bench/bench_whatif.py [--rows 1000000] [--repeat 7]

Two tables of ``--rows`` rows: ARX's Adult resampled (8 quasi-identifiers, occupation
sensitive) and a synthetic one with many distinct rows (age, 5-digit ZIP masked from the right,
sex, a date; a diagnosis sensitive). Reports the median of ``WhatIfTable.evaluate`` over varied
nodes (the encoded table cached, as the web page keeps it), the one-off encoding, and as a
same-run baseline a plain pandas ``groupby(...).size()`` over the same node's already
generalized columns (which gives k and classes only, nothing else).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from anonweb.core.io.frame import read_table  # noqa: E402
from anonweb.core.io.hierarchy import read_hierarchy  # noqa: E402
from anonweb.core.io.hierarchy_builders import (  # noqa: E402
    date_hierarchy,
    interval_hierarchy,
    mask_hierarchy,
)
from anonweb.core.search.whatif import WhatIfTable  # noqa: E402

DATA = Path(os.environ.get("ANONWEB_SHARED_DIR", ROOT.parent / "shared")) / "datasets" / "arx"
QI8 = [
    "age",
    "education",
    "marital-status",
    "native-country",
    "race",
    "salary-class",
    "sex",
    "workclass",
]


def adult(rows: int, rng: np.random.Generator):
    df = read_table(DATA / "adult.csv", sep=";")
    df = df.iloc[rng.integers(0, len(df), rows)].reset_index(drop=True)
    hierarchies = {q: read_hierarchy(DATA / f"adult_hierarchy_{q}.csv", attribute=q) for q in QI8}
    return df, QI8, hierarchies, ["occupation"]


def synthetic(rows: int, rng: np.random.Generator):
    days = pd.date_range("1940-01-01", "2005-12-31").strftime("%Y-%m-%d").to_numpy()
    df = pd.DataFrame(
        {
            "age": rng.integers(0, 100, rows),
            "zip": (rng.integers(10000, 20000, rows)).astype(str),
            "sex": rng.choice(["F", "M"], rows),
            "birth": days[rng.integers(0, len(days), rows)],
            "diagnosis": rng.choice([f"D{i:02d}" for i in range(40)], rows),
        }
    )
    qis = ["age", "zip", "sex", "birth"]
    hierarchies = {
        "age": interval_hierarchy(df["age"], width=5, start=0, attribute="age"),
        "zip": mask_hierarchy(df["zip"], attribute="zip"),
        "sex": read_rows([("F", "*"), ("M", "*")], "sex"),
        "birth": date_hierarchy(df["birth"], attribute="birth"),
    }
    return df, qis, hierarchies, ["diagnosis"]


def read_rows(rows, attribute):
    from anonweb.core.io.hierarchy import Hierarchy

    return Hierarchy(rows=tuple(rows), attribute=attribute)


def nodes(w: WhatIfTable, count: int, rng: np.random.Generator) -> list[dict[str, int]]:
    heights = w.heights
    return [{q: int(rng.integers(0, h)) for q, h in heights.items()} for _ in range(count)]


def run(name, df, qis, hierarchies, sensitive, repeat, rng) -> None:
    t0 = time.perf_counter()
    w = WhatIfTable(df, quasi_identifiers=qis, hierarchies=hierarchies, sensitive=sensitive)
    encode = time.perf_counter() - t0
    picks = nodes(w, repeat, rng)
    calls, base = [], []
    for levels in picks:
        t0 = time.perf_counter()
        result = w.evaluate(levels, suppression=0.02).to_dict()
        calls.append(time.perf_counter() - t0)
        generalized = pd.DataFrame(
            {q: hierarchies[q].generalize(df[q], lv) for q, lv in levels.items()}
        )
        t0 = time.perf_counter()
        sizes = generalized.groupby(qis, dropna=False, observed=True, sort=False).size()
        base.append(time.perf_counter() - t0)
        assert int(sizes.sum()) == len(df)
    med, med_base = statistics.median(calls), statistics.median(base)
    print(
        f"{name}: {len(df):,} rows, {w.table.m:,} distinct (QI, sensitive) rows, "
        f"{len(picks)} nodes\n"
        f"  what-if call   median {med * 1000:8.1f} ms   max {max(calls) * 1000:8.1f} ms"
        f"   (k, classes, suppression, l, t, δ, risks, loss)\n"
        f"  pandas groupby median {med_base * 1000:8.1f} ms"
        f"   (k and classes only, columns already generalized)\n"
        f"  ratio what-if / groupby: {med / med_base:.2f}\n"
        f"  encoding once: {encode:.2f} s   last node: k={result['k']}, "
        f"classes={result['classes']}, suppressed={result['suppressed']}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    if (DATA / "adult.csv").exists():
        run("Adult resampled", *adult(args.rows, rng), args.repeat, rng)
    else:
        print(f"(Adult skipped: {DATA} not found; set ANONWEB_SHARED_DIR)")
    run("synthetic", *synthetic(args.rows, rng), args.repeat, rng)


if __name__ == "__main__":
    main()
