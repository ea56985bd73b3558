"""``anonweb anonymize --engine duckdb|spark``: the release made out of core has the JSON figures
of the one made in memory (``--engine pandas``) and the same rows; a plan an engine cannot run is
refused with the reason, and a table past the in-memory limit at submission."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.cli.test_engine_option import ROOT, run
from tests.core.release.test_engine_release import close

FIGURES = (
    "levels",
    "suppressed",
    "k",
    "classes",
    "information_loss",
    "information_loss_measure",
    "model_checks",
    "risk_before",
    "risk_after",
    "rows_in",
    "rows_out",
    "row_order",
)


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    """A table (Parquet and CSV), ARX-format hierarchies and two search plans."""
    folder = tmp_path_factory.mktemp("engines")
    rng = np.random.default_rng(11)
    n = 1_500
    zips = ["47677", "47602", "47678", "47905"]
    df = pd.DataFrame(
        {
            "name": [f"person {i}" for i in range(n)],
            "age": rng.integers(20, 70, n),
            "zip": rng.choice(zips, n),
            "sex": rng.choice(["F", "M"], n),
            "disease": rng.choice(["flu", "ulcer", "cancer"], n, p=[0.5, 0.3, 0.2]),
        }
    )
    df.to_parquet(folder / "t.parquet", index=False)
    df.to_csv(folder / "t.csv", index=False)
    rows = [[a, f"{a // 10 * 10}-{a // 10 * 10 + 9}", "*"] for a in range(20, 70)]
    pd.DataFrame(rows).to_csv(folder / "age.csv", sep=";", header=False, index=False)
    rows = [[z, z[:4] + "*", z[:3] + "**", "*"] for z in zips]
    pd.DataFrame(rows).to_csv(folder / "zip.csv", sep=";", header=False, index=False)
    rows = [["F", "*"], ["M", "*"]]
    pd.DataFrame(rows).to_csv(folder / "sex.csv", sep=";", header=False, index=False)
    for name, search in (
        ("l", {"k": 5, "suppression": 0.05, "models": [_model("distinct_l", l=2)]}),
        ("t", {"k": 40, "suppression": 0.1, "models": [_model("t_closeness", t=0.2)]}),
    ):
        plan = {
            "quasi_identifiers": ["age", "zip", "sex"],
            "sensitive": ["disease"],
            "hierarchies": {q: str(folder / f"{q}.csv") for q in ("age", "zip", "sex")},
            "steps": [
                {"kind": "drop", "params": {"columns": ["name"]}},
                {"kind": "optimal_generalization", "params": search},
            ],
        }
        (folder / f"plan_{name}.json").write_text(json.dumps(plan))
    return folder


def _model(kind: str, **params) -> dict:
    return {"model": kind, "sensitive": "disease", **params}


def anonymize(files: Path, engine: str, source: str, plan: str, out: str, *extra: str) -> dict:
    report = files / f"{engine}-{source}-{plan}-{out}.json"
    p = run(
        "anonymize", str(files / source), "--plan", str(files / f"plan_{plan}.json"),
        "--out", str(files / f"{engine}-{source}-{plan}-{out}"), "--report", str(report),
        "--purpose", "tests", "--recipient", "us", "--engine", engine, "--seed", "7", *extra,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.startswith("wrote 1500 rows: levels")
    return json.loads(report.read_text())


def released(files: Path, engine: str, source: str, plan: str, out: str) -> pd.DataFrame:
    path = files / f"{engine}-{source}-{plan}-{out}"
    frame = pd.read_parquet(path) if out.endswith(".parquet") else pd.read_csv(path)
    return frame


def rows(frame: pd.DataFrame) -> list[tuple]:
    return sorted(map(tuple, frame.astype(str).to_numpy().tolist()))


def same_release(files: Path, engine: str, source: str, plan: str, out: str) -> None:
    memory = anonymize(files, "pandas", source, plan, out)
    ours = anonymize(files, engine, source, plan, out, *(("--memory-limit", "300MB") if engine == "duckdb" else ()))  # fmt: skip
    for key in FIGURES:
        close(memory[key], ours[key], key)
    assert (memory["engine"], ours["engine"]) == ("pandas", engine)
    assert ours["published"]["engine"] == engine
    assert ours["peak_memory_bytes"] > 10_000_000
    close(memory["gate"], ours["gate"], "gate")
    assert ours["lineage"]["records"] == 1500
    a = released(files, "pandas", source, plan, out)
    b = released(files, engine, source, plan, out)
    assert list(a.columns) == list(b.columns) == ["age", "zip", "sex", "disease"]
    assert rows(a) == rows(b)
    # shuffled: not the source's order
    src = pd.read_parquet(files / "t.parquet")
    assert b["disease"].tolist() != src["disease"].tolist()


@pytest.mark.parametrize(
    "source,plan,out",
    [
        ("t.parquet", "l", "out.csv"),
        ("t.csv", "t", "out.parquet"),
    ],
)
def test_duckdb_gives_the_figures_and_rows_of_pandas(files, source, plan, out):
    same_release(files, "duckdb", source, plan, out)


def _spark_ready() -> bool:
    return importlib.util.find_spec("pyspark") is not None and shutil.which("java") is not None


@pytest.mark.slow
@pytest.mark.skipif(not _spark_ready(), reason="Spark needs pyspark and a Java runtime")
def test_spark_gives_the_figures_and_rows_of_pandas(files, monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    monkeypatch.setenv("ANONWEB_SPARK_MASTER", "local[2]")
    same_release(files, "spark", "t.parquet", "t", "out.csv")


def test_a_step_the_engine_cannot_run_is_refused(files):
    plan = json.loads((files / "plan_l.json").read_text())
    plan["steps"].insert(1, {"kind": "shuffle", "params": {"columns": ["disease"]}})
    (files / "plan_swap.json").write_text(json.dumps(plan))
    p = run(
        "anonymize", str(files / "t.parquet"), "--plan", str(files / "plan_swap.json"),
        "--out", str(files / "swap.csv"), "--purpose", "p", "--recipient", "r",
        "--engine", "duckdb",
    )  # fmt: skip
    assert p.returncode == 2, p.stderr
    assert "step 2 (shuffle) runs in memory only" in p.stderr
    assert "not on the duckdb engine" in p.stderr
    assert not (files / "swap.csv").exists()


def test_a_table_past_the_in_memory_limit_is_refused_before_anything_runs(files):
    plan = json.loads((files / "plan_l.json").read_text())
    plan["steps"].insert(1, {"kind": "shuffle", "params": {"columns": ["disease"]}})
    (files / "plan_swap.json").write_text(json.dumps(plan))
    env = {**os.environ, "DEBUG": "1", "ANONWEB_ENGINE_AUTO_ROWS": "1000"}
    env.pop("ANONWEB_ENGINE", None)
    p = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "anonymize", str(files / "t.parquet"),
         "--plan", str(files / "plan_swap.json"), "--out", str(files / "big.csv"),
         "--purpose", "p", "--recipient", "r"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 2, p.stderr
    assert "step 2 (shuffle) runs in memory only" in p.stderr
    assert "the table has 1,500 rows, more than the 1,000 an in-memory step may read" in p.stderr
    assert not (files / "big.csv").exists()
    # a plan the engines run goes past the limit on DuckDB, which streams the Parquet copy
    p = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "anonymize", str(files / "t.parquet"),
         "--plan", str(files / "plan_l.json"), "--out", str(files / "auto.csv"),
         "--report", str(files / "auto.json"), "--purpose", "p", "--recipient", "r"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert json.loads((files / "auto.json").read_text())["engine"] == "duckdb"


def test_row_wise_steps_run_on_duckdb_with_the_in_memory_values(files):
    """Keyed tokens (a key from a file), noise and PRAM before the search: DuckDB streams the
    table through them and writes the in-memory release's rows for the same seed and key; its
    report has the attacks, the reconstruction and the lineage."""
    plan = json.loads((files / "plan_l.json").read_text())
    plan["steps"][:1] = [
        {"kind": "tokenize", "params": {"columns": ["name"], "key": "release"}},
        {"kind": "add_noise", "params": {"columns": ["age"], "sd": 2.0}},
        {
            "kind": "pram",
            "params": {"column": "disease", "matrix": {
                "flu": {"flu": 0.8, "ulcer": 0.2}, "ulcer": {"ulcer": 1.0},
                "cancer": {"cancer": 0.9, "flu": 0.1},
            }},
        },
    ]  # fmt: skip
    plan["quasi_identifiers"] = ["zip", "sex"]
    plan["hierarchies"] = {q: plan["hierarchies"][q] for q in ("zip", "sex")}
    (files / "plan_rows.json").write_text(json.dumps(plan))
    (files / "key.bin").write_bytes(b"the release's token key")
    secret = ("--secret", f"release={files / 'key.bin'}")
    memory = anonymize(files, "pandas", "t.parquet", "rows", "out.parquet", *secret)
    ours = anonymize(files, "duckdb", "t.parquet", "rows", "out.parquet", *secret)
    for key in FIGURES:
        close(memory[key], ours[key], key)
    steps = [{k: v for k, v in s.items() if k != "seconds"} for s in memory["steps"][:3]]
    assert steps == [{k: v for k, v in s.items() if k != "seconds"} for s in ours["steps"][:3]]
    a = released(files, "pandas", "t.parquet", "rows", "out.parquet")
    b = released(files, "duckdb", "t.parquet", "rows", "out.parquet")
    assert rows(a) == rows(b)
    assert set(b["name"].str.len()) == {16}
    for key in ("attacks", "reconstruction"):
        assert key in ours and "skipped" not in ours[key]
    assert ours["conflicts"] == []
    assert len(ours["lineage"]["source_sha256"]) == 64
