"""Benchmark of the conflict check (not a test: the machine is shared and timings are noisy).

    .venv/bin/python bench/bench_conflicts.py [--rows 100000] [--repeat 3]

A source of ``--rows`` records and ten earlier releases of it, as the release job would check a
new one against them (target: the whole check in under 10 s for 100,000 rows):

* four record-level releases generalizing age (widths 5/10/20, two offsets) and the ZIP code,
  one of them keeping a lab reading unique per record;
* three microaggregations of income into groups of 5 (three different cuts);
* a table of income totals per (sex, ZIP) and the same table without one person;
* a differentially private release (left to the budget).

The new release generalizes age differently and keeps the full ZIP code and the same lab reading
(a join with release 1), microaggregates BMI and publishes the income totals without another
person (differencing with release 8). Printed: the check's time (median of ``--repeat``), the findings, and two
baselines measured in the same run: one pandas ``groupby`` per earlier release on the joint
classes (new release x earlier release), and reading the ten releases' Parquet files.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from anonweb.core.conflicts.check import ReleaseView, check_conflicts  # noqa: E402
from anonweb.core.conflicts.inference import Aggregate  # noqa: E402


def source_table(n: int, rng: np.random.Generator) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "age": rng.integers(17, 91, n),
            "sex": rng.choice(["F", "M"], n),
            "zip": rng.integers(10000, 10400, n).astype(str),
            "income": np.round(rng.lognormal(10.5, 0.6, n), 2),
            "bmi": np.round(rng.normal(27, 5, n), 1),
            "glucose": np.round(rng.uniform(60, 250, n), 1) + np.arange(n) * 1e-6,
            "diagnosis": rng.choice(["flu", "asthma", "diabetes", "cancer", "hiv", "none"], n),
        }
    )


def bins(age: pd.Series, width: int, offset: int) -> pd.Series:
    lo = ((age - offset) // width) * width + offset
    return lo.astype(str) + "-" + (lo + width - 1).astype(str)


def record_release(src, label, rng, *, width, offset, zip_digits, keep=()):
    frame = pd.DataFrame(
        {
            "age": bins(src["age"], width, offset),
            "sex": src["sex"],
            "zip": src["zip"].str[:zip_digits] + "*" * (5 - zip_digits),
            "diagnosis": src["diagnosis"],
            **{c: src[c] for c in keep},
        }
    )
    rows = rng.permutation(len(src))
    return ReleaseView(
        label, frame.iloc[rows].reset_index(drop=True), rows, (), ("age", "sex", "zip")
    )


def microaggregation(src, label, column, k, cut):
    """Groups of ``k`` consecutive values in sorted order, the first group ``cut`` long."""
    order = np.argsort(src[column].to_numpy(), kind="stable")
    position = np.empty(len(src), dtype=np.int64)
    position[order] = np.arange(len(src))
    groups = np.where(position < cut, 0, (position - cut) // k + (1 if cut else 0))
    last = (len(src) - cut) // k + (1 if cut else 0) - 1
    groups = np.minimum(groups, last)  # the remainder joins the last group
    values = src[column].to_numpy(dtype=float)
    means = np.bincount(groups, weights=values) / np.bincount(groups)
    return ReleaseView(label, aggregates=(Aggregate(label, column, groups, means),))


def totals(src, label, column, drop_one: int | None):
    keys = src["sex"] + src["zip"]
    groups, _ = pd.factorize(keys)
    groups = groups.astype(np.int64)
    if drop_one is not None:
        groups = groups.copy()
        groups[int(np.flatnonzero(groups == drop_one)[0])] = -1
    inside = groups >= 0
    sums = np.bincount(groups[inside], weights=src[column].to_numpy()[inside])
    return ReleaseView(
        label, aggregates=(Aggregate(label, column, groups, sums, "sum", table=True),)
    )


def earlier_releases(src, rng):
    return [
        record_release(src, "release 1", rng, width=5, offset=0, zip_digits=3, keep=("glucose",)),
        record_release(src, "release 2", rng, width=10, offset=0, zip_digits=3),
        record_release(src, "release 3", rng, width=20, offset=0, zip_digits=2),
        record_release(src, "release 4", rng, width=10, offset=5, zip_digits=2),
        microaggregation(src, "release 5", "income", 5, 0),
        microaggregation(src, "release 6", "income", 5, 2),
        microaggregation(src, "release 7", "income", 7, 3),
        totals(src, "release 8", "income", drop_one=None),
        totals(src, "release 9", "income", drop_one=0),
        ReleaseView("release 10", dp=True),
    ]


def new_release(src, rng):
    view = record_release(src, "new", rng, width=20, offset=10, zip_digits=5, keep=("glucose",))
    bmi = microaggregation(src, "new", "bmi", 3, 0).aggregates
    income = totals(src, "new", "income", drop_one=1).aggregates
    return ReleaseView(view.label, view.frame, view.rows, bmi + income, view.quasi_identifiers)


def median_time(fn, repeat):
    times, result = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times), result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rng = np.random.default_rng(12)
    src = source_table(args.rows, rng)
    earlier = earlier_releases(src, rng)
    new = new_release(src, rng)
    views = [*earlier, new]

    def check():
        return check_conflicts(
            src, views, sensitive=["diagnosis"], k=5, l=2, new="new", unlinked_k=False
        )

    seconds, report = median_time(check, args.repeat)
    print(f"source rows: {args.rows:,}; earlier releases: {len(earlier)} (one DP)")
    print(f"conflict check, new release against all of them: {seconds:.2f} s (target < 10 s)")
    for f in report.findings:
        what = ", ".join(f.columns) or f"k joined {f.facts.get('k_joined')}"
        print(f"  {f.type:16s} {len(f.records):>7,} record(s)  {', '.join(f.releases)}  ({what})")
    for part in report.incomplete:
        print(f"  undecided: {part}")

    def baseline_groupby():
        for v in earlier:
            if v.frame is None:
                continue
            a = new.frame.iloc[np.argsort(new.rows)].reset_index(drop=True)
            b = v.frame.iloc[np.argsort(v.rows)].reset_index(drop=True)
            joint = pd.concat([a[["age", "sex", "zip"]], b[["age", "sex", "zip"]]], axis=1)
            joint.columns = ["a1", "a2", "a3", "b1", "b2", "b3"]
            joint.groupby(list(joint.columns), dropna=False).size()

    base, _ = median_time(baseline_groupby, args.repeat)
    print(
        f"baseline: one pandas groupby on the joint classes per record-level release: "
        f"{base:.2f} s (check / baseline = {seconds / base:.1f}x)"
    )
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, v in enumerate(earlier):
            if v.frame is not None:
                path = Path(tmp) / f"r{i}.parquet"
                v.frame.to_parquet(path, index=False)
                paths.append(path)
        read, _ = median_time(lambda: [pd.read_parquet(p) for p in paths], args.repeat)
    print(f"baseline: reading the record-level releases' Parquet files: {read:.2f} s")


if __name__ == "__main__":
    main()
