"""manage.py dp-release, ldp and intruder: outputs, reports, and one-line refusals (exit 2)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def people(tmp_path) -> Path:
    rng = np.random.default_rng(0)
    n = 400
    path = tmp_path / "people.csv"
    pd.DataFrame(
        {
            "region": rng.choice(list("NSEW"), n),
            "sex": rng.choice(["F", "M"], n),
            "income": rng.normal(50, 10, n).round(1),
            "pid": rng.integers(0, 150, n),
        }
    ).to_csv(path, index=False)
    return path


@pytest.fixture
def categories(tmp_path) -> Path:
    path = tmp_path / "cats.csv"
    path.write_text("region,sex\nN,F\nS,M\nE,\nW,\n")
    return path


def run(*args: str) -> None:
    call_command(*args)


def refused(*args: str) -> str:
    with pytest.raises(CommandError) as info:
        call_command(*args)
    assert info.value.returncode == 2
    message = str(info.value)
    assert "\n" not in message
    return message


def test_dp_release_histogram_writes_counts_and_report(people, categories, tmp_path):
    out, report = tmp_path / "out.csv", tmp_path / "report.json"
    run(
        "dp-release",
        str(people),
        "--histogram",
        "region,sex",
        "--epsilon",
        "1",
        "--categories-from",
        str(categories),
        "--out",
        str(out),
        "--report",
        str(report),
    )
    table = pd.read_csv(out, keep_default_na=False)
    assert list(table.columns) == ["region", "sex", "noisy_count"]
    assert {"N", "S", "E", "W"} <= set(table["region"])
    data = json.loads(report.read_text())
    assert data["epsilon_spent"] == 1.0 and data["delta_spent"] == 0.0
    assert data["ci95_halfwidth"] > 0
    assert "seed" not in report.read_text()


def test_dp_release_with_key_selection_and_contribution_bound(people, tmp_path):
    out, report = tmp_path / "out.csv", tmp_path / "report.json"
    run(
        "dp-release",
        str(people),
        "--histogram",
        "region",
        "--epsilon",
        "1",
        "--delta",
        "1e-6",
        "--identifier",
        "pid",
        "--max-contributions",
        "2",
        "--out",
        str(out),
        "--report",
        str(report),
    )
    data = json.loads(report.read_text())
    assert 0 < data["delta_spent"] <= 1e-6
    assert data["unit_of_privacy"]["d_in"] == 2 and data["noise"]["scale"] == pytest.approx(2.0)


@pytest.mark.parametrize("stat", ["--sum", "--mean", "--quantile", "--range"])
def test_dp_release_numeric_statistics(people, tmp_path, stat):
    out, report = tmp_path / "out.csv", tmp_path / "report.json"
    run(
        "dp-release",
        str(people),
        stat,
        "income",
        "--bounds",
        "0,100",
        "--epsilon",
        "2",
        "--out",
        str(out),
        "--report",
        str(report),
    )
    assert len(pd.read_csv(out)) >= 1
    assert json.loads(report.read_text())["epsilon_spent"] <= 2.0


def test_dp_release_preview_reads_no_data(tmp_path, capsys):
    run("dp-release", str(tmp_path / "absent.csv"), "--count", "--epsilon", "0.5", "--preview")
    preview = json.loads(capsys.readouterr().out)
    assert preview["epsilon_spent"] == 0.5 and preview["ci95_halfwidth"] > 0


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--histogram", "region", "--epsilon", "0"], "epsilon"),
        (["--histogram", "region", "--epsilon", "-1"], "epsilon"),
        (["--histogram", "region", "--epsilon", "abc"], "epsilon"),
        (["--sum", "income", "--epsilon", "1"], "bounds"),
        (["--histogram", "nope", "--epsilon", "1", "--delta", "1e-6"], "nope"),
    ],
)
def test_dp_release_refuses_bad_input_and_writes_nothing(people, tmp_path, args, fragment):
    out, report = tmp_path / "out.csv", tmp_path / "report.json"
    message = refused("dp-release", str(people), *args, "--out", str(out), "--report", str(report))
    assert fragment in message
    assert not out.exists() and not report.exists()
    assert not list(tmp_path.glob(".*.tmp"))


def test_dp_release_refuses_a_category_outside_the_declared_set(people, tmp_path):
    cats = tmp_path / "cats.csv"
    cats.write_text("region\nN\nS\n")
    out, report = tmp_path / "out.csv", tmp_path / "report.json"
    message = refused(
        "dp-release",
        str(people),
        "--histogram",
        "region",
        "--epsilon",
        "1",
        "--categories-from",
        str(cats),
        "--out",
        str(out),
        "--report",
        str(report),
    )
    assert "outside the declared categories" in message
    assert not out.exists() and not report.exists()


def test_ldp_randomizes_the_column_and_reports_debiased_counts(people, tmp_path):
    out, report = tmp_path / "out.csv", tmp_path / "report.json"
    cats = tmp_path / "regions.csv"
    cats.write_text("region\nN\nS\nE\nW\n")
    run(
        "ldp",
        str(people),
        "--column",
        "region",
        "--epsilon",
        "2",
        "--categories-from",
        str(cats),
        "--out",
        str(out),
        "--report",
        str(report),
    )
    original, randomized = pd.read_csv(people), pd.read_csv(out)
    assert list(randomized.columns) == list(original.columns)
    assert (randomized["income"] == original["income"]).all()
    assert (randomized["region"] != original["region"]).any()
    data = json.loads(report.read_text())
    assert set(data["estimated_counts"]) == set("NSEW")
    assert sum(data["estimated_counts"].values()) == pytest.approx(len(original))


def test_ldp_missing_value_is_refused_unless_reported_as_a_declared_category(tmp_path):
    """Issue 20.1: one missing value among 1,001 rows made (missing) a possible answer for
    every record and lowered the keep probability from 0.731 to 0.576."""
    data, cats = tmp_path / "data.csv", tmp_path / "cats.csv"
    pd.DataFrame({"v": ["a", "b"] * 500 + [None]}).to_csv(data, index=False)
    cats.write_text("v\na\nb\n")
    out, report = tmp_path / "out.csv", tmp_path / "report.json"
    args = ["ldp", str(data), "--column", "v", "--epsilon", "1", "--categories-from", str(cats)]
    message = refused(*args, "--out", str(out), "--report", str(report))
    assert "1 missing value(s)" in message and "'(missing)' is not a declared category" in message
    assert not out.exists() and not report.exists()
    run(*args, "--missing-as", "a", "--out", str(out), "--report", str(report))
    assert json.loads(report.read_text())["p_keep"] == pytest.approx(0.731, abs=1e-3)
    assert pd.read_csv(out, keep_default_na=False)["v"].isin(["a", "b"]).all()


def test_ldp_without_declared_categories_is_refused(people, tmp_path):
    out, report = tmp_path / "out.csv", tmp_path / "report.json"
    message = refused(
        "ldp", str(people), "--column", "region", "--epsilon", "1",
        "--out", str(out), "--report", str(report),
    )  # fmt: skip
    assert "--categories-from" in message


def test_ldp_numeric_column_with_bounds(people, tmp_path):
    out, report = tmp_path / "out.csv", tmp_path / "report.json"
    run(
        "ldp",
        str(people),
        "--column",
        "income",
        "--bounds",
        "0,100",
        "--epsilon",
        "1",
        "--out",
        str(out),
        "--report",
        str(report),
    )
    assert json.loads(report.read_text())["noise"]["scale"] == pytest.approx(100.0, rel=1e-6)


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--column", "region", "--epsilon", "0"], "epsilon"),
        (["--column", "nope", "--epsilon", "1", "--bounds", "0,1"], "nope"),
        (["--column", "region", "--epsilon", "x"], "epsilon"),
    ],
)
def test_ldp_refuses_bad_input(people, tmp_path, args, fragment):
    out, report = tmp_path / "out.csv", tmp_path / "report.json"
    assert fragment in refused(
        "ldp", str(people), *args, "--out", str(out), "--report", str(report)
    )
    assert not out.exists() and not report.exists()


def _tables(tmp_path, noise: float) -> tuple[Path, Path]:
    rng = np.random.default_rng(1)
    x = pd.DataFrame(
        rng.multivariate_normal([0, 0, 0], np.eye(3) * 0.5 + 0.5, size=800), columns=list("abc")
    )
    y = x + rng.normal(0, noise, size=x.shape)
    px, py = tmp_path / "x.csv", tmp_path / "y.csv"
    x.to_csv(px, index=False)
    y.to_csv(py, index=False)
    return px, py


def test_intruder_prints_share_and_both_distributions(tmp_path, capsys):
    px, py = _tables(tmp_path, 0.03)
    run("intruder", str(px), str(py), "--columns", "a,b,c", "--format", "json")
    result = json.loads(capsys.readouterr().out)
    assert result["not_deniable_share"] > 0.15
    assert len(result["match_distances"]["counts"]) == len(result["baseline_distances"]["counts"])


def test_intruder_refuses_unknown_columns(tmp_path):
    px, py = _tables(tmp_path, 0.1)
    assert "zz" in refused("intruder", str(px), str(py), "--columns", "a,zz")


def test_exit_status_two_and_one_line_from_the_shell(people, tmp_path):
    env = {**os.environ, "DEBUG": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "dp-release",
            str(people),
            "--histogram",
            "region",
            "--epsilon",
            "-2",
            "--out",
            str(tmp_path / "o.csv"),
            "--report",
            str(tmp_path / "r.json"),
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "o.csv").exists()


def test_an_unwritable_output_leaves_neither_file(people, tmp_path):
    out, report = tmp_path / "missing-dir" / "out.csv", tmp_path / "report.json"
    message = refused(
        "dp-release",
        str(people),
        "--count",
        "--epsilon",
        "1",
        "--out",
        str(out),
        "--report",
        str(report),
    )
    assert str(out) in message
    assert not report.exists() and not list(tmp_path.glob(".*.tmp"))


def test_a_histogram_without_public_categories_selects_them_privately(people, tmp_path):
    """The documented form `--histogram COL --epsilon E` works without a categories file: keys
    are selected with the default δ, which the report states."""
    import json
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    out, report = tmp_path / "h.csv", tmp_path / "h.json"
    subprocess.run(
        [
            sys.executable,
            "manage.py",
            "dp-release",
            str(people),
            "--histogram",
            "region",
            "--epsilon",
            "1",
            "--out",
            str(out),
            "--report",
            str(report),
        ],
        cwd=ROOT,
        env={**os.environ, "DEBUG": "1"},
        check=True,
        capture_output=True,
        text=True,
    )
    data = json.loads(report.read_text())
    assert data["epsilon_spent"] == 1.0
    assert 0 < data["delta_spent"] <= 1e-6
    assert data["categories"] != "declared"
