"""Benchmark of the risk core (not a test: the machine is shared and timings are noisy).

    .venv/bin/python bench/bench_risk.py [--repeat 5] [--rows 10000000] [--skip-pycanon]

1. ARX Adult, QI8, SA occupation: the full profile (k, risks, distinct/entropy l, t) against a
   bare ``groupby(QI8, dropna=False).size()`` (target <= 3x) and against pycanon's k + l +
   entropy l + t calls (target >= 100x faster), with the values compared.
2. A generated table (10,000,000 rows, 8 QIs): k, classes and prosecutor risk in a subprocess,
   time and peak RSS (targets <= 10 s, <= 4 GB).
3. ``manage.py assess`` as a whole process on a 26,000-row file against a bare
   ``python -c "import pandas; read_csv; groupby"`` process (target <= 3x).
Each figure is the median of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATASETS = Path(os.environ.get("ANONWEB_SHARED_DIR", str(ROOT.parent / "shared"))) / "datasets"
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
AIRLINE = DATASETS / "pycanon/raw/airline_passenger_sat.csv"
AIRLINE_QI = ["Gender", "Customer Type", "Age", "Type of Travel", "Class"]


def median_time(fn, repeat: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def bench_adult(repeat: int, skip_pycanon: bool) -> None:
    import pandas as pd

    from anonweb.core.assessment.profile import assess_risk

    df = pd.read_csv(DATASETS / "arx/adult.csv", sep=";")
    bare, _ = median_time(lambda: df.groupby(QI8, dropna=False).size(), repeat)
    ours_t, prof = median_time(
        lambda: assess_risk(df, quasi_identifiers=QI8, sensitive=["occupation"]).to_dict(), repeat
    )
    sa = prof["sensitive"]["occupation"]
    print(
        f"[adult QI8] rows={prof['rows']} classes={prof['classes']} k={prof['k']} "
        f"l={sa['l_distinct']} entropy-l={sa['l_entropy']:.4f} t={sa['t_closeness']:.4f}"
    )
    print(f"[adult QI8] bare groupby      {bare * 1000:8.1f} ms (median of {repeat})")
    print(
        f"[adult QI8] full profile      {ours_t * 1000:8.1f} ms  ratio {ours_t / bare:.2f}x "
        "(target <= 3x)"
    )
    if skip_pycanon:
        return
    from pycanon import anonymity as pc

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        theirs = (
            pc.k_anonymity(df, QI8),
            pc.l_diversity(df, QI8, ["occupation"]),
            pc.entropy_l_diversity(df, QI8, ["occupation"]),
            pc.t_closeness(df, QI8, ["occupation"]),
        )
        pyc = time.perf_counter() - t
    ours = (prof["k"], sa["l_distinct"], int(sa["l_entropy"]), sa["t_closeness"])
    same = ours[:3] == theirs[:3] and abs(ours[3] - theirs[3]) < 1e-9
    print(
        f"[adult QI8] pycanon k+l+entropy-l+t {pyc:8.2f} s  values {theirs[:3]}, "
        f"t={theirs[3]:.4f}  same as ours: {same}"
    )
    print(f"[adult QI8] speed-up over pycanon {pyc / ours_t:8.0f}x (target >= 100x)")


LARGE = r"""
import resource, sys, time
import numpy as np, pandas as pd
sys.path.insert(0, {root!r})
from anonweb.core.models.k_anonymity import k_anonymity_of
from anonweb.core.risk.classes import equivalence_classes
from anonweb.core.risk.reidentification import risk_of
rows = {rows}
rng = np.random.default_rng(0)
cards = {cards!r}
df = pd.DataFrame({{f"q{{i}}": rng.integers(0, c, rows, dtype=np.int16) for i, c in enumerate(cards)}})
df["q3"] = pd.Categorical.from_codes(df["q3"].to_numpy(), [f"country-{{i}}" for i in range(41)])
t = time.perf_counter()
ec = equivalence_classes(df, quasi_identifiers=list(df.columns))
k, r = k_anonymity_of(ec), risk_of(ec)
elapsed = time.perf_counter() - t
print(elapsed, k.k, k.classes, r.prosecutor_max, r.prosecutor_mean,
      resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


# Adult-like cardinalities: a key space of 74M slots (dense path). The wide variant (744M slots)
# takes the hashing path, the slower one.
CARDS = {"adult-like": [90, 16, 7, 41, 5, 2, 2, 9], "wide": [90, 16, 7, 41, 5, 2, 2, 90]}


def bench_large(repeat: int, rows: int, kind: str = "adult-like") -> None:
    runs = []
    for _ in range(repeat):
        code = LARGE.format(root=str(ROOT), rows=rows, cards=CARDS[kind])
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout.split()
        runs.append(out)
    secs = statistics.median(float(r[0]) for r in runs)
    rss_gb = statistics.median(int(r[5]) for r in runs) / 1024 / 1024
    r = runs[0]
    print(
        f"[{rows:,} rows, 8 QIs, {kind}] k={r[1]} classes={r[2]} "
        f"prosecutor max={float(r[3]):.3f} mean={float(r[4]):.4f}"
    )
    print(
        f"[{rows:,} rows, 8 QIs, {kind}] k+classes+risk {secs:6.2f} s (target <= 10 s), peak RSS "
        f"{rss_gb:.2f} GB incl. generating the table (target <= 4 GB)"
    )


def bench_cli(repeat: int) -> None:
    env = {**os.environ, "DEBUG": "1"}
    bare_code = (
        f"import pandas; df = pandas.read_csv({str(AIRLINE)!r}); "
        f"df.groupby({AIRLINE_QI!r}, dropna=False).size()"
    )
    cmd = [
        sys.executable,
        str(ROOT / "manage.py"),
        "assess",
        str(AIRLINE),
        "--qi",
        ",".join(AIRLINE_QI),
        "--sensitive",
        "satisfaction",
        "--format",
        "json",
    ]

    def run(args):
        return lambda: subprocess.run(args, env=env, cwd=ROOT, capture_output=True, check=True)

    bare, _ = median_time(run([sys.executable, "-c", bare_code]), repeat)
    ours, proc = median_time(run(cmd), repeat)
    d = json.loads(proc.stdout)
    print(f"[assess CLI] {AIRLINE.name}: rows={d['rows']} k={d['k']} classes={d['classes']}")
    print(
        f"[assess CLI] bare pandas process {bare:6.2f} s, manage.py assess {ours:6.2f} s, "
        f"ratio {ours / bare:.2f}x (target <= 3x)"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--skip-pycanon", action="store_true")
    ap.add_argument("--wide", action="store_true", help="also the 744M-slot key space (hashing)")
    ap.add_argument("--only", choices=("adult", "large", "cli"))
    args = ap.parse_args()
    if not DATASETS.is_dir():
        sys.exit(f"reference datasets not found at {DATASETS}")
    if args.only in (None, "adult"):
        bench_adult(args.repeat, args.skip_pycanon)
    if args.only in (None, "large"):
        bench_large(max(1, min(args.repeat, 3)), args.rows)
        if args.wide:
            bench_large(max(1, min(args.repeat, 3)), args.rows, "wide")
    if args.only in (None, "cli"):
        bench_cli(args.repeat)


if __name__ == "__main__":
    main()
