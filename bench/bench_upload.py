"""Benchmark: converting a 1 GB CSV upload to the dataset's Parquet table.

    DEBUG=1 .venv/bin/python bench/bench_upload.py [--size-mb 1024] [--path FILE] [--keep]

Writes a CSV of ``--size-mb`` (integers, ZIP codes with leading zeros, dates, floats, text with
blanks), then runs, each in a fresh process so that its peak memory is its own:

* the upload job's conversion, ``anonweb.core.io.ingest.convert_to_parquet`` (streaming CSV
  reader, column types from every value, limits checked, distinct counts, Parquet written);
* as the same-run baseline, pyarrow's own ``pyarrow.csv.read_csv`` of the same file (the whole
  table in memory, no Parquet written, no checks).

Prints the wall time and peak resident memory of each and their ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def peak_rss_mb() -> float:
    """This process's peak resident memory. VmHWM starts afresh at exec; getrusage's maxrss
    would carry the parent's peak (the CSV writer's) over into the measured process."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def write_csv(path: Path, size_mb: int) -> int:
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(20261123)
    target = size_mb * 1024 * 1024
    rows = 0
    chunk = 250_000
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8", newline="") as out:
        header = True
        while out.tell() < target:
            n = chunk
            frame = pd.DataFrame(
                {
                    "id": np.arange(rows, rows + n),
                    "age": rng.integers(0, 100, n),
                    "sex": rng.choice(["F", "M"], n),
                    "zip": [f"{z:05d}" for z in rng.integers(0, 100_000, n)],
                    "birth": pd.to_datetime(rng.integers(-15_000, 15_000, n), unit="D").strftime(
                        "%Y-%m-%d"
                    ),
                    "income": np.round(rng.lognormal(10, 1, n), 2),
                    "diagnosis": rng.choice(["flu", "asthma", "cancer", "gastritis", ""], n),
                    "note": rng.choice(["", "follow-up", "referred, see letter", "none"], n),
                }
            )
            frame.to_csv(out, index=False, header=header)
            header = False
            rows += n
    return rows


def child(mode: str, path: str) -> None:
    """Run one measurement in this process and print it as JSON."""
    if mode == "pyarrow":
        import pyarrow.csv as pacsv

        base = peak_rss_mb()
        start = time.perf_counter()
        table = pacsv.read_csv(path)
        seconds = time.perf_counter() - start
        out = {"rows": table.num_rows, "columns": table.num_columns}
    else:
        from anonweb.core.io.ingest import convert_to_parquet
        from anonweb.core.io.sources import Limits

        base = peak_rss_mb()
        with tempfile.TemporaryDirectory(dir=Path(path).parent) as tmp:
            start = time.perf_counter()
            info = convert_to_parquet(
                path,
                Path(tmp) / "table.parquet",
                fmt="csv",
                limits=Limits(max_cells=10**10, max_expanded_bytes=10 * 1024**3),
            )
            seconds = time.perf_counter() - start
            size = (Path(tmp) / "table.parquet").stat().st_size
        out = {
            "rows": info.rows,
            "columns": len(info.columns),
            "types": {c.name: c.to_dict().get("type") for c in info.columns},
            "parquet_mb": round(size / 1024**2, 1),
        }
    out.update(seconds=round(seconds, 2), peak_mb=round(peak_rss_mb(), 1), start_mb=round(base, 1))
    print(json.dumps(out))


def measure(mode: str, path: Path) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, "--child", mode, "--path", str(path)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if proc.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--path", default=str(ROOT / "var" / "bench" / "upload.csv"))
    parser.add_argument("--keep", action="store_true", help="keep the generated CSV")
    parser.add_argument("--child", choices=["pyarrow", "anonweb"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    path = Path(args.path)
    if args.child:
        child(args.child, str(path))
        return
    want = args.size_mb * 1024 * 1024
    if not path.exists() or abs(path.stat().st_size - want) > 64 * 1024 * 1024:
        start = time.perf_counter()
        rows = write_csv(path, args.size_mb)
        print(
            f"wrote {path} ({path.stat().st_size / 1024**2:,.0f} MB, {rows:,} rows) "
            f"in {time.perf_counter() - start:.1f} s"
        )
    size_mb = path.stat().st_size / 1024**2
    try:
        base = measure("pyarrow", path)
        ours = measure("anonweb", path)
    finally:
        if not args.keep and args.child is None and path.name == "upload.csv":
            path.unlink(missing_ok=True)
    print(f"CSV: {size_mb:,.0f} MB, {ours['rows']:,} rows x {ours['columns']} columns")
    print(f"column types: {ours['types']}")
    print(
        f"pyarrow.csv.read_csv (baseline):     {base['seconds']:7.2f} s   "
        f"peak {base['peak_mb']:7.0f} MB (process at start {base['start_mb']:.0f} MB)"
    )
    print(
        f"convert_to_parquet (the upload job): {ours['seconds']:7.2f} s   "
        f"peak {ours['peak_mb']:7.0f} MB (process at start {ours['start_mb']:.0f} MB), "
        f"Parquet {ours['parquet_mb']:,} MB"
    )
    print(
        f"ratio: {ours['seconds'] / base['seconds']:.2f}x the time, "
        f"{ours['peak_mb'] / base['peak_mb']:.2f}x the peak memory of pyarrow's own read; "
        f"throughput {size_mb / ours['seconds']:.0f} MB/s"
    )
    assert ours["peak_mb"] < 2048, "the conversion went over 2 GB of memory"


if __name__ == "__main__":
    main()
