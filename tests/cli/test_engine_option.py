"""``--engine`` and ``--memory-limit`` on the command line: the same report from every engine,
which says which engine ran and the process's peak memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(command: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DEBUG": "1"}
    env.pop("ANONWEB_ENGINE", None)
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), command, *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def table(tmp_path) -> Path:
    rng = np.random.default_rng(5)
    n = 2_000
    df = pd.DataFrame(
        {
            "age": rng.integers(20, 70, n),
            "zip": rng.choice(["47677", "47602", "47678", None], n),
            "sex": rng.choice(["F", "M"], n),
            "disease": rng.choice(["flu", "ulcer", "cancer"], n),
            "salary": rng.integers(1, 9, n) * 1000,
        }
    )
    path = tmp_path / "t.parquet"
    df.to_parquet(path)
    return path


def test_assess_reports_the_same_figures_on_pandas_and_duckdb(table):
    args = [str(table), "--qi", "age,zip,sex", "--sensitive", "disease,salary"]
    args += ["--population", "100000", "--format", "json"]
    reports = {}
    for engine in ("pandas", "duckdb"):
        extra = ["--memory-limit", "200MB"] if engine == "duckdb" else []
        p = run("assess", *args, "--engine", engine, *extra)
        assert p.returncode == 0, p.stderr
        reports[engine] = json.loads(p.stdout)
    for engine, report in reports.items():
        assert report.pop("engine") == engine
        assert report.pop("peak_memory_bytes") > 10_000_000
    assert reports["pandas"] == reports["duckdb"]
    assert reports["pandas"]["rows"] == 2_000


def test_auto_takes_duckdb_from_the_row_threshold(table):
    env_rows = {"ANONWEB_ENGINE_AUTO_ROWS": "1000"}
    p = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "assess", str(table), "--qi", "age"]
        + ["--format", "json"],
        cwd=ROOT,
        env={**os.environ, "DEBUG": "1", **env_rows},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["engine"] == "duckdb"


def test_engine_options_are_checked(table):
    p = run("assess", str(table), "--qi", "age", "--engine", "polars")
    assert p.returncode == 2 and "invalid choice: 'polars'" in p.stderr
    p = run("assess", str(table), "--qi", "age", "--engine", "duckdb", "--known", "age")
    assert p.returncode == 2 and "use --engine pandas" in p.stderr
    p = run(
        "anonymize", str(table), "--qi", "age", "--hierarchy", "age=x.csv", "--k", "2",
        "--engine", "duckdb", "--purpose", "p", "--recipient", "r", "--out", "o.csv",
        "--decimal", ",",
    )  # fmt: skip
    assert p.returncode == 2 and "--decimal , reads the table in memory" in p.stderr
