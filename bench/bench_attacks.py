"""Benchmark of the record-level attacks (not a test: the machine is shared and timings are
noisy).

    .venv/bin/python bench/bench_attacks.py [--rows 1000000] [--targets 2000]

A source of ``--rows`` records (age, sex, a ZIP code among 1,000, a diagnosis, an income) and a
control of 15 % more people of the same population; four releases of the source are attacked
with ``--targets`` people from each side, the attacker knowing age, sex and ZIP:

* a generalized release (age in 10-year bands, ZIP to three digits): few distinct rows;
* a perturbed release (noise on age and income): as many distinct rows as records, the worst
  case for the nearest-record search;
* a microaggregated release (income replaced by the mean of groups of 5 by age order);
* independent records of the same population (what a synthetic release with no memory gives).

Goal: each release's attacks in under 120 s and 2 GB. Each release is attacked in a fresh
process that first loads the source, the control and the release from Parquet files (as the
job does), so the memory printed is the attacks' own: the peak of the Python allocations during
the attacks (tracemalloc, numpy's and pandas' arrays included) and the growth of the process's
peak resident memory over what the loaded tables already held. Printed per release: seconds,
both figures and the attacks' sentences.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from anonweb.core.attacks.run import run_attacks  # noqa: E402

KNOWN = ["age", "sex", "zip"]
SENSITIVE = ["diagnosis", "income"]


def population(n: int, rng: np.random.Generator) -> pd.DataFrame:
    age = rng.integers(17, 91, n)
    return pd.DataFrame(
        {
            "age": age,
            "sex": rng.choice(["F", "M"], n),
            "zip": np.char.add("0", rng.integers(2000, 3000, n).astype(str)),
            "diagnosis": np.where(
                age > 65, rng.choice(["heart", "diabetes"], n), rng.choice(["flu", "asthma"], n)
            ),
            "income": (rng.lognormal(10.5, 0.5, n) + 300 * (age - 17)).round(),
        }
    )


def generalized(df: pd.DataFrame) -> pd.DataFrame:
    low = (df["age"] // 10) * 10
    return df.assign(
        age="[" + low.astype(str) + ", " + (low + 10).astype(str) + "[",
        zip=df["zip"].str[:3] + "**",
    )


def perturbed(df: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    return df.assign(
        age=df["age"] + rng.normal(0, 2, len(df)),
        income=df["income"] * rng.normal(1, 0.1, len(df)),
    )


def microaggregated(df: pd.DataFrame) -> pd.DataFrame:
    order = np.argsort(df["age"].to_numpy(), kind="stable")
    groups = np.empty(len(df), dtype=np.int64)
    groups[order] = np.arange(len(df)) // 5
    return df.assign(income=df["income"].groupby(groups).transform("mean"))


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def make(name: str, source: pd.DataFrame, rng: np.random.Generator) -> pd.DataFrame:
    if name == "generalized":
        return generalized(source)
    if name == "perturbed":
        return perturbed(source, rng)
    if name == "microaggregated":
        return microaggregated(source)
    return population(len(source), np.random.default_rng(1))


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return peak_mb()


def attack_one(folder: Path, name: str, targets: int) -> dict:
    """Attack one release from its Parquet files (in a process of its own)."""
    source = pd.read_parquet(folder / "source.parquet")
    control = pd.read_parquet(folder / "control.parquet")
    release = pd.read_parquet(folder / f"{name}.parquet")
    lineage_path = folder / f"{name}.lineage.npy"
    lineage = np.load(lineage_path) if lineage_path.exists() else None
    loaded_peak = peak_mb()
    loaded_rss = rss_mb()
    tracemalloc.start()
    t0 = time.perf_counter()
    report = run_attacks(
        source,
        release,
        known=KNOWN,
        sensitive=SENSITIVE,
        control=control,
        targets=targets,
        rng=np.random.default_rng(3),
        lineage=lineage,
    )
    seconds = time.perf_counter() - t0
    _, traced = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "seconds": seconds,
        "traced_mb": traced / 2**20,
        "rss_growth_mb": peak_mb() - max(loaded_peak, loaded_rss),
        "loaded_mb": loaded_rss,
        "sentences": report.to_dict()["sentences"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--targets", type=int, default=2000)
    parser.add_argument("--only", default=None, help="one release: " + ", ".join(RELEASES))
    parser.add_argument("--one", nargs=2, metavar=("FOLDER", "NAME"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(attack_one(Path(args.one[0]), args.one[1], args.targets)))
        return
    rng = np.random.default_rng(0)
    source = population(args.rows, rng)
    control = population(int(args.rows * 0.15), rng)
    names = [args.only] if args.only else list(RELEASES)
    print(f"{args.rows:,} rows, {args.targets:,} targets and as many controls; knows {KNOWN}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        source.to_parquet(folder / "source.parquet")
        control.to_parquet(folder / "control.parquet")
        for name in names:
            release = make(name, source, rng).sample(frac=1, random_state=2)
            if name != "independent":
                np.save(folder / f"{name}.lineage.npy", release.index.to_numpy())
            release.reset_index(drop=True).to_parquet(folder / f"{name}.parquet")
            del release
        del source, control
        for name in names:
            out = subprocess.run(
                [sys.executable, __file__, "--targets", str(args.targets), "--one", tmp, name],
                check=True,
                capture_output=True,
                text=True,
            )
            d = json.loads(out.stdout.strip().splitlines()[-1])
            print(
                f"\n{name}: {d['seconds']:.1f} s; attacks' peak {d['traced_mb']:,.0f} MB "
                f"allocated (tracemalloc), resident peak +{d['rss_growth_mb']:,.0f} MB over "
                f"the {d['loaded_mb']:,.0f} MB of loaded tables"
            )
            for sentence in d["sentences"]:
                print(f"  {sentence}")


RELEASES = ("generalized", "perturbed", "microaggregated", "independent")


if __name__ == "__main__":
    main()
