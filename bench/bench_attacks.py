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

Goal: each release's attacks in under 120 s and 2 GB. Printed per release: seconds, the peak
memory of the process so far, and the figures.
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--targets", type=int, default=2000)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    source = population(args.rows, rng)
    control = population(int(args.rows * 0.15), rng)
    releases = {
        "generalized": lambda: generalized(source),
        "perturbed": lambda: perturbed(source, rng),
        "microaggregated": lambda: microaggregated(source),
        "independent": lambda: population(args.rows, np.random.default_rng(1)),
    }
    print(f"{args.rows:,} rows, {args.targets:,} targets and as many controls; knows {KNOWN}")
    for name, make in releases.items():
        release = make().sample(frac=1, random_state=2)
        lineage = None if name == "independent" else release.index.to_numpy()
        release = release.reset_index(drop=True)
        t0 = time.perf_counter()
        report = run_attacks(
            source,
            release,
            known=KNOWN,
            sensitive=SENSITIVE,
            control=control,
            targets=args.targets,
            rng=np.random.default_rng(3),
            lineage=lineage,
        )
        seconds = time.perf_counter() - t0
        d = report.to_dict()
        print(f"\n{name}: {seconds:.1f} s, peak memory {peak_mb():,.0f} MB")
        for sentence in d["sentences"]:
            print(f"  {sentence}")
        del release


if __name__ == "__main__":
    main()
