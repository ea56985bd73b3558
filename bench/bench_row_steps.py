"""Benchmark: the row-wise steps in an out-of-core release (``make_engine_release``).

    .venv/bin/python bench/bench_row_steps.py [--rows 1000000] [--engines pandas,duckdb]
        [--memory-limit 1GB] [--data /tmp/scale/rows-N.parquet]

The table of ``bench_scale.py`` (8 Adult-like quasi-identifiers and ``occupation``). Two plans,
each engine and plan in its own process (peak resident memory is its own):

* ``search``: the k=5 / 2 % search, the release written as Parquet, its risk after, the
  attacks on a sample, the gate (the baseline);
* ``rows``: PRAM on ``occupation`` (a matrix: keep 0.8, else the next category) and keyed
  tokens of it, then the same search: the engine streams the table through the two steps once
  before the search.

Printed per engine and plan: wall seconds, peak RSS, and for ``rows`` the seconds the two
steps took (their reports' ``seconds``). The released rows of the ``rows`` plan are checked to
be the same multiset on every engine (the same seed and key).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.bench_scale import QIS, SENSITIVE, generate  # noqa: E402

KEY = b"benchmark token key"


def plan(kind: str) -> dict:
    from bench.bench_scale import hierarchies

    occupation, card, _ = SENSITIVE
    cats = [f"occ-{i}" for i in range(card)]
    matrix = {c: {c: 0.8, cats[(i + 1) % card]: 0.2} for i, c in enumerate(cats)}
    steps = [
        {"kind": "optimal_generalization", "params": {"k": 5, "suppression": 0.02}},
    ]
    if kind == "rows":
        steps = [
            {"kind": "pram", "params": {"column": occupation, "matrix": matrix}},
            {"kind": "tokenize", "params": {"columns": [occupation], "key": "bench"}},
            *steps,
        ]
    return {
        "quasi_identifiers": list(QIS),
        "hierarchies": {n: {"rows": [list(r) for r in h.rows]} for n, h in hierarchies().items()},
        "steps": steps,
    }


def worker(engine_name: str, kind: str, path: str, memory_limit: str) -> dict:
    import pyarrow.parquet as pq

    from anonweb.core.engine.base import peak_memory_bytes
    from anonweb.core.engine.select import make_engine
    from anonweb.core.release.engine_release import make_engine_release
    from anonweb.core.release.plan import plan_from_dict

    engine = make_engine(engine_name, path, memory_limit=memory_limit)
    out = Path(path).with_name(f"rows-release-{engine_name}-{os.getpid()}.parquet")
    tags = {q: "quasi_identifier" for q in QIS} | {SENSITIVE[0]: "keep"}
    started = time.perf_counter()
    try:
        made = make_engine_release(
            path,
            plan_from_dict(plan(kind)),
            engine=engine,
            out=out,
            rng=np.random.default_rng(5),
            tags=tags,
            secrets={"bench": KEY},
        )
        wall = time.perf_counter() - started
        # the released rows as a multiset: a digest of the sorted rows' text
        table = pq.read_table(out).to_pandas().astype(str)
        digest = hashlib.sha256(
            "\n".join(sorted(map("|".join, table.to_numpy().tolist()))).encode()
        ).hexdigest()
    finally:
        engine.close()
        out.unlink(missing_ok=True)
    search = next(s for s in made.report["steps"] if s["kind"] == "optimal_generalization")
    return {
        "wall": wall,
        "peak": peak_memory_bytes(),
        "load": os.getloadavg()[0],
        "steps": {s["kind"]: s["seconds"] for s in made.report["steps"]},
        "figures": [search["levels"], search["suppressed"], search["k"], made.rows],
        "attacks": made.report["attacks"].get("sample"),
        "digest": digest,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--engines", default="pandas,duckdb")
    ap.add_argument("--memory-limit", default="1GB")
    ap.add_argument("--data", default=None)
    ap.add_argument("--worker", nargs=4, metavar=("ENGINE", "PLAN", "PATH", "LIMIT"))
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return
    path = Path(args.data or f"/tmp/scale/rows-{args.rows}.parquet")
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        generate(path, args.rows)
    results: dict = {}
    for engine in args.engines.split(","):
        for kind in ("search", "rows"):
            p = subprocess.run(
                [sys.executable, __file__, "--worker", engine, kind, str(path), args.memory_limit],
                capture_output=True,
                text=True,
                check=True,
            )
            r = json.loads(p.stdout.strip().splitlines()[-1])
            results[(engine, kind)] = r
            print(
                f"{engine:7s} {kind:6s} {r['wall']:8.1f} s  peak {r['peak'] / 1e9:5.2f} GB  "
                f"load {r['load']:.1f}  steps {r['steps']}  figures {r['figures']}",
                flush=True,
            )
    digests = {r["digest"] for (e, k), r in results.items() if k == "rows"}
    print("same released rows on every engine:", len(digests) == 1)


if __name__ == "__main__":
    main()
