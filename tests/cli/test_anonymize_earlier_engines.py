"""``anonymize --engine duckdb|spark --earlier FILE --id COL``: the release made out of core is
checked against the earlier release files as the one made in memory is, the files' records
linked to the source's rows by DuckDB: the same ``conflicts`` in the report, the same gate and
the same exit status; files that cannot be linked are refused as in memory (status 2)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.cli.test_anonymize_engines import _spark_ready
from tests.cli.test_engine_option import run


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    """A source (Parquet and CSV), its hierarchies, a k-anonymity plan on age, zip and sex, and
    earlier releases in lineage form (published columns plus ``name``, the record id)."""
    folder = tmp_path_factory.mktemp("earlier_engines")
    rng = np.random.default_rng(23)
    n = 600
    zips = ["47677", "47602", "47678", "47905"]
    df = pd.DataFrame(
        {
            "name": [f"person {i}" for i in range(n)],
            "age": rng.integers(20, 70, n),
            "zip": rng.choice(zips, n),
            "sex": rng.choice(["F", "M"], n),
            "disease": rng.choice(["flu", "ulcer", "cancer"], n, p=[0.6, 0.3, 0.1]),
            "income": rng.integers(10, 90, n) * 1000,
        }
    )
    df.to_parquet(folder / "t.parquet", index=False)
    df.to_csv(folder / "t.csv", index=False)
    rows = [[a, f"{a // 10 * 10}-{a // 10 * 10 + 9}", "*"] for a in range(20, 70)]
    pd.DataFrame(rows).to_csv(folder / "age.csv", sep=";", header=False, index=False)
    rows = [[z, z[:4] + "*", z[:3] + "**", "*"] for z in zips]
    pd.DataFrame(rows).to_csv(folder / "zip.csv", sep=";", header=False, index=False)
    pd.DataFrame([["F", "*"], ["M", "*"]]).to_csv(
        folder / "sex.csv", sep=";", header=False, index=False
    )
    plan = {
        "quasi_identifiers": ["age", "zip", "sex"],
        "sensitive": ["disease"],
        "hierarchies": {q: str(folder / f"{q}.csv") for q in ("age", "zip", "sex")},
        "steps": [
            {"kind": "drop", "params": {"columns": ["name", "income"]}},
            {"kind": "optimal_generalization", "params": {"k": 5, "suppression": 0.02}},
        ],
    }
    (folder / "plan.json").write_text(json.dumps(plan))
    order = rng.permutation(n)
    # an earlier release in other bins (age by twos, zip whole), in source order: joined row
    # to row with a new one in source order too (split by sex there), classes fall below k
    lo = df["age"] // 2 * 2
    earlier = pd.DataFrame(
        {
            "name": df["name"],
            "age": lo.astype(str) + "-" + (lo + 1).astype(str),
            "zip": df["zip"],
            "disease": df["disease"],
        }
    )
    earlier.to_csv(folder / "earlier.csv", index=False)
    # a second one, of part of the records: sex and zip's first three digits
    part = df.iloc[order[: n // 2]]
    pd.DataFrame(
        {"name": part["name"], "sex": part["sex"], "zip": part["zip"].str[:3] + "**"}
    ).to_csv(folder / "partial.csv", index=False)
    # one naming a record the source does not have
    stranger = earlier.iloc[order].copy()
    stranger.iloc[0, 0] = "nobody"
    stranger.to_csv(folder / "stranger.csv", index=False)
    # one publishing each record's income as the mean of its group (exact inference's input)
    means = df[["name"]].assign(income=df.groupby(df["age"] // 10)["income"].transform("mean"))
    means.to_csv(folder / "means.csv", index=False)
    return folder


def anonymize(files: Path, engine: str, source: str, *extra: str):
    out = files / f"{engine}-{source}-{'-'.join(Path(e).stem for e in extra)}"
    p = run(
        "anonymize", str(files / source), "--plan", str(files / "plan.json"),
        "--out", str(out) + ".csv", "--report", str(out) + ".json", "--purpose", "tests",
        "--recipient", "us", "--engine", engine, "--seed", "3", *extra,
    )  # fmt: skip
    report = json.loads(Path(str(out) + ".json").read_text()) if p.returncode != 2 else None
    return p, report


def conflict_gate(report: dict) -> list[dict]:
    return [f for f in report["gate"]["findings"] if f["code"].startswith("conflict")]


EARLIER = ("--id", "name", "--earlier", "earlier.csv", "--earlier", "partial.csv", "--keep-order")


def same_check(files: Path, engine: str) -> None:
    extra = [str(files / a) if a.endswith(".csv") else a for a in EARLIER]
    memory, m = anonymize(files, "pandas", "t.parquet", *extra, "--fail-on-block")
    ours, o = anonymize(files, engine, "t.parquet", *extra, "--fail-on-block")
    assert memory.returncode == ours.returncode == 1, ours.stderr[-3000:]
    assert m["conflicts"], "the inputs are meant to conflict"
    assert "linkage" in {c["type"] for c in m["conflicts"]}
    assert o["conflicts"] == m["conflicts"]
    assert conflict_gate(o) == conflict_gate(m)
    assert o["engine"] == engine
    # the stderr line names the same blocking codes
    assert memory.stderr.strip().splitlines()[-1] == ours.stderr.strip().splitlines()[-1]


def test_duckdb_finds_the_conflicts_the_in_memory_run_finds(files):
    same_check(files, "duckdb")


@pytest.mark.slow
@pytest.mark.skipif(not _spark_ready(), reason="Spark needs pyspark and a Java runtime")
def test_spark_finds_the_conflicts_the_in_memory_run_finds(files, monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    monkeypatch.setenv("ANONWEB_SPARK_MASTER", "local[2]")
    same_check(files, "spark")


def test_without_earlier_files_both_check_against_none(files):
    _, m = anonymize(files, "pandas", "t.parquet")
    _, o = anonymize(files, "duckdb", "t.parquet")
    assert m["conflicts"] == o["conflicts"] == []


@pytest.mark.parametrize(
    "extra,message",
    [
        (
            ("--earlier", "stranger.csv", "--id", "name"),
            "stranger.csv: 1 id(s) are not in the source",
        ),
        (("--earlier", "earlier.csv", "--id", "zip"), "the id column 'zip' is not unique"),
        (("--earlier", "earlier.csv", "--id", "nope"), "unknown id column: nope"),
        (("--earlier", "earlier.csv"), "--earlier needs --id"),
    ],
)
def test_files_that_cannot_be_linked_are_refused_as_in_memory(files, extra, message):
    extra = tuple(str(files / a) if a.endswith(".csv") else a for a in extra)
    for engine in ("pandas", "duckdb"):
        p, _ = anonymize(files, engine, "t.parquet", *extra)
        assert p.returncode == 2, (engine, p.stderr[-2000:])
        assert message in p.stderr, (engine, p.stderr[-2000:])


def test_a_csv_source_is_refused_on_an_engine(files):
    p, _ = anonymize(
        files, "duckdb", "t.csv", "--earlier", str(files / "earlier.csv"), "--id", "name"
    )
    assert p.returncode == 2
    assert "convert the source to Parquet" in p.stderr


def test_an_earlier_file_of_means_is_refused_on_an_engine_and_solved_in_memory(files):
    extra = ("--earlier", str(files / "means.csv"), "--id", "name")
    memory, m = anonymize(files, "pandas", "t.parquet", *extra)
    assert memory.returncode == 0
    assert m["conflicts"] is not None
    ours, _ = anonymize(files, "duckdb", "t.parquet", *extra)
    assert ours.returncode == 2
    assert "means.csv publishes income as the means of groups of records" in ours.stderr
    assert "--engine pandas" in ours.stderr
