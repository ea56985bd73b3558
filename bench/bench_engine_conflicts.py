"""Benchmark: the conflict check of record-level releases out of core, against the in-memory one.

    .venv/bin/python bench/bench_engine_conflicts.py [--rows 1000000] [--memory-limit 1GB]
        [--data /tmp/scale/rows-N.parquet]

The table of ``bench_scale.py`` (8 Adult-like quasi-identifiers and ``occupation``). DuckDB
writes two releases of it with their lineage (``make_engine_release``, rows shuffled): an
earlier one, the k=5 / 2 % search over the eight quasi-identifiers, and a new one, the same
search over four of them (age, education, race, sex) with the other four dropped, both keeping
``occupation``. Then, each in its own process (peak resident memory is its own):

* ``engine``: the check of the new release against the earlier one out of core
  (``engine_release_conflicts``: DuckDB joins the two Parquet files and lineage files);
* ``memory``: the in-memory check (``release_conflicts``) of the same releases, read with their
  lineage into pandas (the baseline; the time to read them is printed apart).

Printed per process: the check's wall seconds, peak RSS (the OS's figure) and the findings by
type; the two checks' public findings are checked to be the same.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_scale import QIS, SENSITIVE, generate  # noqa: E402

NEW_QIS = ["age", "education", "race", "sex"]
TAGS = {q: "quasi_identifier" for q in QIS} | {SENSITIVE[0]: "sensitive"}


def plan(qis: list[str]) -> dict:
    from bench.bench_scale import hierarchies

    h = hierarchies()
    dropped = [c for c in QIS if c not in qis]
    return {
        "quasi_identifiers": qis,
        "sensitive": [SENSITIVE[0]],
        "hierarchies": {n: {"rows": [list(r) for r in h[n].rows]} for n in qis},
        "steps": [
            *([{"kind": "drop", "params": {"columns": dropped}}] if dropped else []),
            {"kind": "optimal_generalization", "params": {"k": 5, "suppression": 0.02}},
        ],
    }


def write(path: str, folder: str, memory_limit: str) -> dict:
    import numpy as np

    from anonweb.core.engine.duckdb_engine import DuckDBEngine
    from anonweb.core.release.engine_release import make_engine_release
    from anonweb.core.release.plan import plan_from_dict

    out = {}
    for name, qis in (("earlier", list(QIS)), ("new", NEW_QIS)):
        engine = DuckDBEngine(memory_limit=memory_limit)
        started = time.perf_counter()
        made = make_engine_release(
            path,
            plan_from_dict(plan(qis)),
            engine=engine,
            out=Path(folder) / f"{name}.parquet",
            rng=np.random.default_rng(7 if name == "new" else 3),
            tags=TAGS,
        )
        engine.close()
        out[name] = {
            "table": made.path,
            "rows": made.lineage_path,
            "seconds": round(time.perf_counter() - started, 1),
        }
    return out


def check(kind: str, path: str, files: dict, memory_limit: str) -> dict:
    import numpy as np
    import pandas as pd

    from anonweb.core.conflicts.release import NEW_LABEL, EarlierRelease, release_conflicts
    from anonweb.core.engine.base import peak_memory_bytes
    from anonweb.core.engine.duckdb_engine import DuckDBEngine
    from anonweb.core.engine.lineage import LINEAGE_COLUMN

    earlier, new = files["earlier"], files["new"]
    qis = list(QIS)
    sensitive = [SENSITIVE[0]]
    read = 0.0
    if kind == "engine":
        from anonweb.core.conflicts.engine_check import TableRelease, engine_release_conflicts

        engine = DuckDBEngine(memory_limit=memory_limit)
        columns = engine.columns(path)
        rows = engine.row_count(path)
        started = time.perf_counter()
        result = engine_release_conflicts(
            engine.con,
            TableRelease(NEW_LABEL, new["table"], new["rows"], tuple(NEW_QIS)),
            earlier=[
                EarlierRelease(
                    "release 1",
                    "approved",
                    1,
                    quasi_identifiers=tuple(qis),
                    table_file=earlier["table"],
                    rows_file=earlier["rows"],
                )
            ],
            source_rows=rows,
            source_columns=columns,
            quasi_identifiers=qis,
            sensitive=sensitive,
        )
        seconds = time.perf_counter() - started
        engine.close()
    else:
        started = time.perf_counter()
        source = pd.read_parquet(path)

        def lineage(f: dict) -> tuple:
            table = pd.read_parquet(f["table"])
            rows = pd.read_parquet(f["rows"])[LINEAGE_COLUMN].to_numpy(dtype=np.int64)
            return table, rows

        (ft, fr), (et, er) = lineage(new), lineage(earlier)
        read = time.perf_counter() - started
        started = time.perf_counter()
        result = release_conflicts(
            source,
            frame=ft,
            rows=fr,
            earlier=[
                EarlierRelease("release 1", "approved", 1, et, er, quasi_identifiers=tuple(qis))
            ],
            quasi_identifiers=qis,
            plan_quasi_identifiers=NEW_QIS,
            sensitive=sensitive,
        )
        seconds = time.perf_counter() - started
    public = json.dumps(result.public, sort_keys=True, default=str)
    return {
        "kind": kind,
        "seconds": round(seconds, 2),
        "read_seconds": round(read, 2),
        "peak_rss_bytes": peak_memory_bytes(),
        "findings": result.summary()["findings"],
        "records": [f["records"] for f in result.public],
        "public_sha256": hashlib.sha256(public.encode()).hexdigest(),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--memory-limit", default="1GB")
    parser.add_argument("--data")
    parser.add_argument("--worker", choices=["write", "engine", "memory"])
    parser.add_argument("--files")
    parser.add_argument(
        "--checks", default="engine,memory", help="engine, memory or both (the baseline)"
    )
    parser.add_argument(
        "--workdir", help="keep the table and releases here, and reuse those already written"
    )
    args = parser.parse_args()
    if args.worker == "write":
        print(json.dumps(write(args.data, args.files, args.memory_limit)))
        return
    if args.worker:
        files = json.loads(Path(args.files).read_text())
        print(json.dumps(check(args.worker, args.data, files, args.memory_limit)))
        return
    with tempfile.TemporaryDirectory(prefix="bench-conflicts-") as scratch:
        tmp = args.workdir or scratch
        Path(tmp).mkdir(parents=True, exist_ok=True)
        data = args.data or str(Path(tmp) / f"rows-{args.rows}.parquet")
        if not Path(data).exists():
            generate(Path(data), args.rows)

        def run(worker: str, files: str) -> dict:
            cmd = [sys.executable, __file__, "--worker", worker, "--data", data]
            cmd += ["--files", files, "--memory-limit", args.memory_limit]
            done = subprocess.run(cmd, capture_output=True, text=True, check=True, env=os.environ)
            return dict(json.loads(done.stdout.strip().splitlines()[-1]))

        listing = Path(tmp) / "files.json"
        if not listing.exists():
            written = run("write", tmp)
            print("releases written:", {k: v["seconds"] for k, v in written.items()}, "s")
            listing.write_text(json.dumps(written))
        results = [run(kind, str(listing)) for kind in args.checks.split(",")]
        for r in results:
            print(
                f"{r['kind']:>6}: check {r['seconds']} s (reading {r['read_seconds']} s), "
                f"peak {r['peak_rss_bytes'] / 2**30:.2f} GiB, findings {r['findings']}, "
                f"records {r['records']}"
            )
        same = len({r["public_sha256"] for r in results}) == 1
        print("same public findings:", same)
        print("load average:", " ".join(f"{x:.1f}" for x in os.getloadavg()))
        if not same:
            sys.exit(1)


if __name__ == "__main__":
    main()
