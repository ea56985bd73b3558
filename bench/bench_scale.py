"""Benchmark: the risk profile and the k=5 / 2 % search on 10⁶–10⁸ rows, on each engine.

    .venv/bin/python bench/bench_scale.py [--rows 10000000] [--engines pandas,duckdb,spark]
        [--memory-limit 1GB] [--pandas-max-rows 20000000] [--data /tmp/scale/rows-N.parquet]
        [--tasks assess,search,release,whatif]

Generates N rows (default 10⁷; ``--rows 100000000`` for 10⁸) of 8 quasi-identifiers with
Adult-like cardinalities and skew plus a sensitive column, written as Parquet in chunks of a
million rows (memory bounded by one chunk). Then, per engine, each task runs in its own process
so that its peak resident memory (the OS's figure, ``getrusage``; with Spark, plus its JVM) is
its own:

* ``assess``: read the rows into the histogram (QIs and the sensitive column), then the risk
  profile (k, risks, l, t, δ);
* ``search``: read the QI histogram, then the k=5 search with a 2 % suppression limit;
* ``release``: the search's task, then the engine writes the release of its node as Parquet
  (next to the data, removed afterwards);
* ``whatif``: the what-if table built from the histogram (QIs and the sensitive column), then
  five what-if calls at different nodes (k=5, 2 %), each timed: wall seconds and the process's
  CPU seconds (what the call costs on a core of its own, on a machine shared under load).

Printed per engine and task: wall seconds, peak RSS and the ratio of the pandas engine's wall
time to this engine's in the same run (pandas runs only up to ``--pandas-max-rows``). Every
engine's figures (k, classes, levels, suppressed, loss) are checked to be the same.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# name: (cardinality, skew of a Zipf-like law: larger, fewer common values)
QIS = {
    "age": (74, 0.6),
    "education": (16, 0.8),
    "marital-status": (7, 1.0),
    "native-country": (41, 2.0),
    "race": (5, 1.5),
    "salary-class": (2, 0.8),
    "sex": (2, 0.3),
    "workclass": (8, 1.2),
}
SENSITIVE = ("occupation", 14, 0.5)
# what-if calls: a level per QI (hierarchy heights: age 4, the others 3)
WHATIF_NODES = [
    (0, 0, 0, 0, 0, 0, 0, 0),
    (1, 1, 1, 1, 0, 0, 0, 1),
    (2, 1, 1, 2, 1, 0, 1, 1),
    (3, 2, 2, 2, 2, 1, 1, 2),
    (1, 0, 1, 2, 0, 0, 1, 0),
]


def _probabilities(card: int, skew: float) -> np.ndarray:
    p = 1.0 / np.arange(1, card + 1) ** skew
    return p / p.sum()


def generate(path: Path, rows: int, chunk: int = 1_000_000, seed: int = 0) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(seed)
    writer = None
    try:
        done = 0
        while done < rows:
            n = min(chunk, rows - done)
            cols = {}
            for name, (card, skew) in QIS.items():
                codes = rng.choice(card, n, p=_probabilities(card, skew))
                if name == "age":
                    cols[name] = pa.array(codes + 17, type=pa.int64())
                else:
                    cols[name] = pa.DictionaryArray.from_arrays(
                        pa.array(codes.astype(np.int32)),
                        pa.array([f"{name[:4]}-{i}" for i in range(card)]),
                    ).cast(pa.string())
            name, card, skew = SENSITIVE
            codes = rng.choice(card, n, p=_probabilities(card, skew))
            cols[name] = pa.array([f"occ-{i}" for i in range(card)]).take(pa.array(codes))
            table = pa.table(cols)
            if writer is None:
                writer = pq.ParquetWriter(str(path), table.schema, compression="zstd")
            writer.write_table(table, row_group_size=chunk)
            done += n
    finally:
        if writer is not None:
            writer.close()


def hierarchies() -> dict:
    from anonweb.core.io.hierarchy import Hierarchy

    out = {}
    for name, (card, _) in QIS.items():
        if name == "age":
            rows = tuple(
                (
                    str(a),
                    f"{a // 5 * 5}-{a // 5 * 5 + 4}",
                    f"{a // 10 * 10}-{a // 10 * 10 + 9}",
                    "*",
                )
                for a in range(17, 17 + card)
            )
        else:
            rows = tuple((f"{name[:4]}-{i}", f"{name[:4]}-g{i // 3}", "*") for i in range(card))
        out[name] = Hierarchy(rows=rows, attribute=name)
    return out


def worker(engine_name: str, task: str, path: str, memory_limit: str) -> dict:
    from anonweb.core.assessment.profile import assess_histogram
    from anonweb.core.engine.base import peak_memory_bytes
    from anonweb.core.engine.select import make_engine
    from anonweb.core.search.flash import search_histogram

    qis = list(QIS)
    if engine_name == "spark":
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    engine = make_engine(engine_name, path, memory_limit=memory_limit)
    started = time.perf_counter()
    out: dict = {}
    if task == "assess":
        hist = engine.histogram(path, qis, [SENSITIVE[0]])
        read = time.perf_counter() - started
        p = assess_histogram(hist).to_dict()
        s = p["sensitive"][SENSITIVE[0]]
        out["figures"] = {
            "rows": p["rows"],
            "k": p["k"],
            "classes": p["classes"],
            "uniques": p["uniques"],
            "prosecutor_mean": p["prosecutor_risk"]["mean"],
            "l_distinct": s["l_distinct"],
            "l_entropy": s["l_entropy"],
            "t": s["t_closeness"],
            "delta": s["delta_disclosure"],
        }
    elif task == "whatif":
        from anonweb.core.search.whatif import WhatIfTable

        hist = engine.histogram(path, qis, [SENSITIVE[0]])
        read = time.perf_counter() - started
        table = WhatIfTable(
            hist, quasi_identifiers=qis, hierarchies=hierarchies(), sensitive=[SENSITIVE[0]]
        )
        out["build"] = time.perf_counter() - started
        calls, cpu, answers = [], [], []
        for i, node in enumerate(WHATIF_NODES):
            t, c = time.perf_counter(), time.process_time()
            r = table.evaluate(dict(zip(qis, node, strict=True)), suppression=0.02, k=5)
            calls.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
            answers.append([r.suppressed, r.satisfied, r.information_loss])
            if i == 0:
                answers[-1].append(r.profile.to_dict()["k"] if r.profile else 0)
        out["calls"] = calls
        out["cpu_calls"] = cpu  # the process's CPU seconds: what a call costs on a core of its own
        out["figures"] = {"answers": answers}
    else:
        hist = engine.histogram(path, qis)
        read = time.perf_counter() - started
        h = hierarchies()
        r = search_histogram(hist, hierarchies=h, k=5, suppression=0.02)
        out["figures"] = {
            "levels": r.levels,
            "suppressed": r.suppressed,
            "k": r.k,
            "classes": r.classes,
            "loss": r.information_loss,
        }
        if task == "release":
            from anonweb.core.search.release_node import node_release

            target = Path(path).with_name(f"release-{engine_name}-{os.getpid()}.parquet")
            try:
                written = engine.write_release(path, node_release(r, hist, h), target)
            finally:
                target.unlink(missing_ok=True)
            out["figures"]["written"] = [written.rows, written.suppressed]
    out["wall"] = time.perf_counter() - started
    out["read"] = read
    out["cells"] = hist.cells
    out["peak"] = peak_memory_bytes(children=engine_name == "spark")
    out["load"] = os.getloadavg()[0]
    engine.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=10_000_000)
    ap.add_argument("--engines", default="pandas,duckdb,spark")
    ap.add_argument("--tasks", default="assess,search,release")
    ap.add_argument("--memory-limit", default="1GB")
    ap.add_argument("--pandas-max-rows", type=int, default=20_000_000)
    ap.add_argument("--data", default=None, help="Parquet file (generated if absent)")
    ap.add_argument("--worker", nargs=4, metavar=("ENGINE", "TASK", "PATH", "LIMIT"))
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return
    path = Path(args.data or f"/tmp/scale/rows-{args.rows}.parquet")
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        t = time.perf_counter()
        generate(path, args.rows)
        print(f"generated {args.rows:,} rows in {time.perf_counter() - t:.1f} s: {path}")
    load = os.getloadavg()[0]
    print(f"{args.rows:,} rows, 8 QIs, load {load:.1f}, DuckDB memory_limit {args.memory_limit}")
    results: dict = {}
    for task in args.tasks.split(","):
        for engine in args.engines.split(","):
            if engine == "pandas" and args.rows > args.pandas_max_rows:
                continue
            proc = subprocess.run(
                [sys.executable, __file__, "--worker", engine, task, str(path), args.memory_limit],
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                print(f"{task:7} {engine:7} failed: {proc.stderr.strip().splitlines()[-1:]}")
                continue
            results[task, engine] = json.loads(proc.stdout.strip().splitlines()[-1])
        base = results.get((task, "pandas"))
        for engine in args.engines.split(","):
            r = results.get((task, engine))
            if r is None:
                continue
            ratio = f"{base['wall'] / r['wall']:.2f}x" if base else "-"
            same = "" if not base else ("same" if r["figures"] == base["figures"] else "DIFFERENT")
            if "calls" in r:
                print(
                    f"{task:7} {engine:7} built in {r['build']:.2f} s; calls "
                    + ", ".join(f"{c:.3f}" for c in r["calls"])
                    + f" s; after the first: max {max(r['calls'][1:]):.3f} s"
                )
                print(
                    f"{task:7} {engine:7} CPU per call "
                    + ", ".join(f"{c:.3f}" for c in r["cpu_calls"])
                    + f" s; after the first: max {max(r['cpu_calls'][1:]):.3f} s"
                )
            print(
                f"{task:7} {engine:7} wall {r['wall']:8.2f} s (read {r['read']:7.2f} s)  "
                f"peak RSS {r['peak'] / 2**30:6.2f} GiB  pandas/this {ratio:>6}  "
                f"cells {r['cells']:,}  load {r['load']:.1f}  {same}"
            )
        figures = {
            json.dumps(r["figures"], sort_keys=True) for (t, _), r in results.items() if t == task
        }
        if not figures:
            print(f"{task:7} no engine finished")
        elif len(figures) == 1:
            print(f"{task:7} figures identical on every engine: {next(iter(figures))}")
        else:
            print(f"{task:7} figures DIFFER between engines: {sorted(figures)}")


if __name__ == "__main__":
    main()
