"""Benchmark: the risk profile and the k=5 / 2 % search on 10⁶–10⁸ rows, on each engine.

    .venv/bin/python bench/bench_scale.py [--rows 10000000] [--engines pandas,duckdb,spark]
        [--memory-limit 1GB] [--pandas-max-rows 20000000] [--data /tmp/scale/rows-N.parquet]
        [--tasks upload,assess,search,release,whatif] [--spark-master local-cluster[2,1,1024]]
        [--spark-driver-memory 3g] [--spark-partitions 64] [--pyarrow-max-rows 20000000]

Generates N rows (default 10⁷; ``--rows 100000000`` for 10⁸) of 8 quasi-identifiers with
Adult-like cardinalities and skew plus a sensitive column, written as Parquet in chunks of a
million rows (memory bounded by one chunk). Then, per engine, each task runs in its own process
so that its peak resident memory (the OS's figure, ``getrusage``; with Spark, plus its JVM) is
its own:

* ``upload``: once, not per engine: the table written as CSV (streamed, a row group at a
  time, next to the Parquet file, removed afterwards), then read into typed Parquet by the
  upload job's own reading (:func:`anonweb.core.io.ingest.convert_to_parquet`, as
  ``anonweb.datasets.ingest`` calls it), against ``pyarrow.csv.read_csv`` of the same file in
  the same run (up to ``--pyarrow-max-rows``: it holds the whole table in memory). The Parquet
  written is checked against the generated table: its row count and the value counts of
  ``education`` and ``age``;
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
engine's figures (the whole risk profile: k, classes, risks, l, t, δ; levels, suppressed, k,
classes, loss) are checked to be the same, numbers to 1e-9.

Spark runs on ``local[2]`` unless ``--spark-master`` names another master, such as
``local-cluster[2,1,1024]``: two executor JVMs of 1 GiB each started from the pip wheel (its
``SPARK_HOME`` is set for them), so the group-by's shuffle crosses processes. The peak memory
printed for Spark adds its JVMs' (driver and executors) to the Python process's.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
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


def csv_of(path: Path, csv: Path) -> None:
    """The Parquet file at ``path`` written as CSV at ``csv``, a row group at a time."""
    import pyarrow.csv as pacsv
    import pyarrow.parquet as pq

    source = pq.ParquetFile(str(path))
    partial = csv.with_name(csv.name + ".partial")
    with pacsv.CSVWriter(str(partial), source.schema_arrow) as writer:
        for group in range(source.num_row_groups):
            writer.write_table(source.read_row_group(group))
    partial.rename(csv)


def value_counts(path: Path, column: str) -> dict[str, int]:
    """``column``'s values and their counts in the Parquet file at ``path``, a row group at a
    time (values as text, so that a column read back with another type compares)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    f = pq.ParquetFile(str(path))
    counts: dict[str, int] = {}
    for group in range(f.num_row_groups):
        values = f.read_row_group(group, columns=[column]).column(0)
        for item in pc.value_counts(values).to_pylist():
            key = str(item["values"])
            counts[key] = counts.get(key, 0) + int(item["counts"])
    return counts


def peak_rss_fresh() -> int:
    """This process's peak resident memory since exec (VmHWM), in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    from anonweb.core.engine.base import peak_memory_bytes

    return peak_memory_bytes()


def upload_worker(mode: str, csv: str) -> dict:
    """One reading of the CSV in this process: the upload job's (``anonweb``) or pyarrow's."""
    started = time.perf_counter()
    out: dict = {}
    if mode == "pyarrow":
        import pyarrow.csv as pacsv

        table = pacsv.read_csv(csv)
        out["rows"] = table.num_rows
    else:
        from anonweb.core.io.ingest import convert_to_parquet
        from anonweb.core.io.sources import Limits

        dest = Path(csv).with_suffix(".upload.parquet")
        info = convert_to_parquet(
            csv,
            dest,
            fmt="csv",
            name=Path(csv).name,
            # the app's limits are settings (ANONWEB_MAX_*); these let 10⁸ rows through
            limits=Limits(max_cells=10**10, max_expanded_bytes=1024**4),
        )
        out["rows"] = info.rows
        out["types"] = {c.name: c.type for c in info.columns}
        out["parquet"] = str(dest)
    out["wall"] = time.perf_counter() - started
    out["peak"] = peak_rss_fresh()
    out["load"] = os.getloadavg()[0]
    return out


def upload(path: Path, rows: int, pyarrow_max_rows: int) -> None:
    """The ``upload`` task (see the module's docstring)."""
    csv = path.with_name(path.stem + ".csv")
    t = time.perf_counter()
    if not csv.exists():
        csv_of(path, csv)
        print(
            f"upload  wrote {csv} ({csv.stat().st_size / 2**30:.2f} GiB) in "
            f"{time.perf_counter() - t:.1f} s"
        )
    results = {}
    try:
        for mode in ("anonweb", "pyarrow"):
            if mode == "pyarrow" and rows > pyarrow_max_rows:
                print(f"upload  pyarrow.csv.read_csv not run: {rows:,} rows do not fit in memory")
                continue
            proc = subprocess.run(
                [sys.executable, __file__, "--upload-worker", mode, str(csv)],
                capture_output=True,
                text=True,
            )
            if proc.returncode != 0:
                print(f"upload  {mode} failed: {proc.stderr.strip().splitlines()[-3:]}")
                continue
            results[mode] = json.loads(proc.stdout.strip().splitlines()[-1])
    finally:
        csv.unlink(missing_ok=True)
    ours, base = results.get("anonweb"), results.get("pyarrow")
    if base:
        print(
            f"upload  pyarrow.csv.read_csv  wall {base['wall']:8.2f} s  "
            f"peak RSS {base['peak'] / 2**30:6.2f} GiB  load {base['load']:.1f}"
        )
    if not ours:
        return
    ratio = ""
    if base:
        ratio = (
            f"  {ours['wall'] / base['wall']:.2f}x the time, "
            f"{ours['peak'] / base['peak']:.2f}x the peak of pyarrow's read"
        )
    print(
        f"upload  convert_to_parquet    wall {ours['wall']:8.2f} s  "
        f"peak RSS {ours['peak'] / 2**30:6.2f} GiB  load {ours['load']:.1f}{ratio}"
    )
    written = Path(ours["parquet"])
    try:
        import pyarrow.parquet as pq

        got_rows = pq.ParquetFile(str(written)).metadata.num_rows
        same = {c: value_counts(written, c) == value_counts(path, c) for c in ("education", "age")}
    finally:
        written.unlink(missing_ok=True)
    print(
        f"upload  types {ours['types']}; rows {got_rows:,} "
        f"({'same' if got_rows == rows else 'DIFFERENT'} as generated); value counts "
        + ", ".join(f"{c} {'same' if ok else 'DIFFERENT'}" for c, ok in same.items())
    )


def same_figures(a: object, b: object, tol: float = 1e-9) -> bool:
    """Whether two JSON figures are equal, numbers to ``tol`` (relative, or absolute below 1)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_figures(a[k], b[k], tol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_figures(x, y, tol) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return abs(a - b) <= tol * max(1.0, abs(a), abs(b))
    return a == b


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
        out["profile"] = p
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
                if target.is_dir():  # Spark writes a folder of parts
                    shutil.rmtree(target, ignore_errors=True)
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
    ap.add_argument("--pyarrow-max-rows", type=int, default=20_000_000)
    ap.add_argument("--spark-master", default=None, help="e.g. local-cluster[2,1,1024]")
    ap.add_argument("--spark-driver-memory", default=None, help="e.g. 3g")
    ap.add_argument("--spark-partitions", type=int, default=None, help="e.g. 64")
    ap.add_argument("--worker", nargs=4, metavar=("ENGINE", "TASK", "PATH", "LIMIT"))
    ap.add_argument("--upload-worker", nargs=2, metavar=("MODE", "CSV"))
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return
    if args.upload_worker:
        print(json.dumps(upload_worker(*args.upload_worker)))
        return
    path = Path(args.data or f"/tmp/scale/rows-{args.rows}.parquet")
    path.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    home = None
    if args.spark_master:
        import pyspark

        env["ANONWEB_SPARK_MASTER"] = args.spark_master
        if "SPARK_HOME" not in env:
            # a local cluster's workers keep each executor's folder (logs, spilled data) in
            # SPARK_HOME/work: a home of this run's own (links to the wheel's parts) keeps them
            # out of the installed package, and they go with it
            home = Path(tempfile.mkdtemp(prefix="spark-home-"))
            for part in Path(pyspark.__file__).parent.iterdir():
                if part.name != "work":
                    (home / part.name).symlink_to(part)
            env["SPARK_HOME"] = str(home)
    if args.spark_driver_memory:
        env["ANONWEB_SPARK_DRIVER_MEMORY"] = args.spark_driver_memory
    if args.spark_partitions:
        env["ANONWEB_SPARK_SHUFFLE_PARTITIONS"] = str(args.spark_partitions)
    try:
        run(args, path, env)
    finally:
        if home is not None:
            shutil.rmtree(home, ignore_errors=True)


def run(args: argparse.Namespace, path: Path, env: dict[str, str]) -> None:
    if not path.exists():
        t = time.perf_counter()
        generate(path, args.rows)
        print(f"generated {args.rows:,} rows in {time.perf_counter() - t:.1f} s: {path}")
    load = os.getloadavg()[0]
    spark = env.get("ANONWEB_SPARK_MASTER", "local[2]")
    print(
        f"{args.rows:,} rows, 8 QIs, load {load:.1f}, DuckDB memory_limit {args.memory_limit}, "
        f"Spark {spark} ({env.get('ANONWEB_SPARK_SHUFFLE_PARTITIONS', 'default')} parts)"
    )
    results: dict = {}
    for task in args.tasks.split(","):
        if task == "upload":
            upload(path, args.rows, args.pyarrow_max_rows)
            continue
        for engine in args.engines.split(","):
            if engine == "pandas" and args.rows > args.pandas_max_rows:
                continue
            proc = subprocess.run(
                [sys.executable, __file__, "--worker", engine, task, str(path), args.memory_limit],
                capture_output=True,
                text=True,
                env=env,
            )
            if proc.returncode != 0:
                # the Python lines of the error (a Spark error's Java frames are indented)
                lines = [x for x in proc.stderr.strip().splitlines() if x and x[0] not in " \t"]
                print(f"{task:7} {engine:7} failed: {lines[-4:]}")
                continue
            results[task, engine] = json.loads(proc.stdout.strip().splitlines()[-1])
        base = results.get((task, "pandas"))
        for engine in args.engines.split(","):
            r = results.get((task, engine))
            if r is None:
                continue
            ratio = f"{base['wall'] / r['wall']:.2f}x" if base else "-"
            duck = results.get((task, "duckdb"))
            if engine != "duckdb" and duck:
                ratio += f", this/duckdb {r['wall'] / duck['wall']:.2f}x"
            same = "" if not base else ("same" if _same_run(r, base) else "DIFFERENT")
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
        done = [r for (t, _), r in results.items() if t == task]
        if not done:
            print(f"{task:7} no engine finished")
        elif all(_same_run(r, done[0]) for r in done):
            what = "figures and whole risk profile" if "profile" in done[0] else "figures"
            print(
                f"{task:7} {what} the same on every engine (to 1e-9): "
                + json.dumps(done[0]["figures"], sort_keys=True)
            )
        else:
            shown = sorted({json.dumps(r["figures"], sort_keys=True) for r in done})
            print(f"{task:7} figures DIFFER between engines: {shown}")


def _same_run(a: dict, b: dict) -> bool:
    return same_figures(a["figures"], b["figures"]) and same_figures(
        a.get("profile"), b.get("profile")
    )


if __name__ == "__main__":
    main()
