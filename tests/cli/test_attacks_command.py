"""``manage.py attacks`` as users run it: the JSON contract, exit status, plain errors."""

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


def run(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "attacks", *map(str, args)],
        cwd=ROOT,
        env={**os.environ, "DEBUG": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """A source, people held out of it, and a release that is the source shuffled."""
    rng = np.random.default_rng(7)
    n = 2400
    everyone = pd.DataFrame(
        {
            "age": rng.integers(17, 90, n),
            "sex": rng.choice(["F", "M"], n),
            "zip": rng.choice([f"0{z}" for z in range(2100, 2250)], n),
            "disease": rng.choice(["flu", "asthma", "ulcer", "heart"], n),
        }
    )
    d = tmp_path_factory.mktemp("attacks")
    everyone.iloc[400:].to_csv(d / "source.csv", index=False)
    everyone.iloc[:400].to_csv(d / "control.csv", index=False)
    everyone.iloc[400:].sample(frac=1, random_state=2).to_csv(d / "release.csv", index=False)
    return d


def test_json_has_the_contract_shape_and_the_source_itself_is_linked(files):
    p = run(
        files / "source.csv",
        files / "release.csv",
        "--known",
        "age,sex,zip",
        "--sensitive",
        "disease",
        "--control",
        files / "control.csv",
        "--targets",
        "500",
        "--seed",
        "1",
        "--format",
        "json",
    )
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    for figure in (out["linkage"], out["inference"]["disease"], out["singling_out"]):
        assert {"rate", "control_rate", "excess", "ci", "targets"} <= set(figure)
        assert figure["targets"] == 500
        assert figure["ci"][0] <= figure["excess"] <= figure["ci"][1]
    assert out["linkage"]["rate"] > 0.9 and out["linkage"]["excess"] > 0.5
    assert set(out["membership"]) >= {"auc", "ci"} and out["membership"]["auc"] > 0.9
    assert out["note"] is None


def test_the_same_seed_gives_the_same_figures(files):
    args = (
        files / "source.csv",
        files / "release.csv",
        "--known",
        "age,sex",
        "--targets",
        "200",
        "--seed",
        "5",
        "--format",
        "json",
    )
    assert json.loads(run(*args).stdout) == json.loads(run(*args).stdout)


def test_without_a_control_it_says_the_excess_cannot_be_measured(files):
    p = run(files / "source.csv", files / "release.csv", "--known", "age,sex,zip")
    assert p.returncode == 0, p.stderr
    assert "link them to their row" in p.stdout
    assert "cannot be measured" in p.stdout
    p = run(files / "source.csv", files / "release.csv", "--known", "age", "--format", "json")
    out = json.loads(p.stdout)
    assert out["linkage"]["excess"] is None and out["membership"]["auc"] is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--known", "salary"), "no column 'salary'"),
        (("--known", "age", "--targets", "lots"), "--targets expects a whole number"),
        (("--known", "age", "--targets", "0"), "--targets must be at least 1"),
        (("--known", "age", "--sensitive", "age"), "both known to the attacker and sensitive"),
        (("--known", "age", "--control", "nope.csv"), "nope.csv"),
    ],
)
def test_bad_input_exits_2_with_one_plain_line(files, args, message):
    p = run(files / "source.csv", files / "release.csv", *args)
    assert p.returncode == 2, p.stdout + p.stderr
    assert message in p.stderr
    assert "Traceback" not in p.stderr
