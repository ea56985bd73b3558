"""``manage.py conflicts`` as users run it: files in lineage form, exit status, stdout, stderr."""

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
NAMES = [
    "Bob Smith",
    "Kate Jones",
    "Jane Armstrong",
    "Doug Fulton",
    "Louis Fisher",
    "John Hopkins",
    "Susane Lippencott",
]
BMI = [24, 35, 41, 43, 44, 48, 50]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "conflicts", *map(str, args)],
        cwd=ROOT,
        env={**os.environ, "DEBUG": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def bmi(tmp_path):
    """Seed 000, Figure 9: the source and the two 3-anonymous microaggregations of BMI."""
    pd.DataFrame({"name": NAMES, "bmi": BMI}).to_csv(tmp_path / "source.csv", index=False)
    for label, groups in (("k1", [0, 0, 0, 0, 1, 1, 1]), ("k2", [0, 0, 0, 1, 1, 1, 1])):
        means = pd.Series(BMI, dtype=float).groupby(groups).transform("mean")
        release = pd.DataFrame({"name": NAMES, "bmi": means}).sample(frac=1, random_state=1)
        release.to_csv(tmp_path / f"{label}.csv", index=False)
    return tmp_path


def test_bmi_text_names_doug_fulton_and_his_bmi(bmi):
    p = run(bmi / "source.csv", bmi / "k1.csv", bmi / "k2.csv", "--id", "name")
    assert p.returncode == 1, p.stderr
    assert "Doug Fulton: 43.00" in p.stdout
    assert "exact_inference [bmi]: 1 record(s)" in p.stdout
    assert not any(n in p.stdout for n in NAMES if n != "Doug Fulton")


def test_bmi_json_has_the_contract_shape(bmi):
    p = run(bmi / "source.csv", bmi / "k1.csv", bmi / "k2.csv", "--id", "name", "--format", "json")
    assert p.returncode == 1, p.stderr
    out = json.loads(p.stdout)
    (finding,) = out["findings"]
    assert finding["type"] == "exact_inference"
    assert finding["records"] == ["Doug Fulton"]
    assert finding["values"] == {"Doug Fulton": 43.0}
    assert isinstance(finding["explanation"], str) and "k2.csv" in finding["explanation"]


def test_one_scheme_alone_or_twice_finds_nothing(bmi):
    for files in ((bmi / "k1.csv",), (bmi / "k1.csv", bmi / "k1.csv")):
        p = run(bmi / "source.csv", *files, "--id", "name", "--format", "json")
        assert p.returncode == 0, p.stdout + p.stderr
        assert json.loads(p.stdout)["findings"] == []


def test_whole_then_subset_is_differencing(tmp_path):
    # 211 and 210 people: both means are printed in full (a computer's 17 digits), so exact.
    ids = [f"r{i:03d}" for i in range(211)]
    income = np.random.default_rng(2).integers(20_000, 90_000, 211).astype(float)
    pd.DataFrame({"id": ids, "income": income}).to_csv(tmp_path / "s.csv", index=False)
    pd.DataFrame({"id": ids, "income": income.mean()}).to_csv(tmp_path / "all.csv", index=False)
    keep = np.arange(211) != 17
    subset = pd.DataFrame({"id": np.array(ids)[keep], "income": income[keep].mean()})
    subset.to_csv(tmp_path / "sub.csv", index=False)
    p = run(
        tmp_path / "s.csv",
        tmp_path / "all.csv",
        tmp_path / "sub.csv",
        "--id",
        "id",
        "--format",
        "json",
    )
    assert p.returncode == 1, p.stderr
    (finding,) = json.loads(p.stdout)["findings"]
    assert finding["type"] == "differencing" and finding["records"] == ["r017"]
    assert finding["values"]["r017"] == pytest.approx(income[17], rel=1e-9)
    assert "who is not in sub.csv" in finding["explanation"]


def test_joined_classes_smaller_than_k_with_qi(tmp_path):
    ages = [31, 32, 33, 34] * 3 + [36, 36] + [41, 42, 43, 44] * 3
    ids = [f"p{i}" for i in range(len(ages))]
    pd.DataFrame({"id": ids, "age": ages}).to_csv(tmp_path / "s.csv", index=False)
    for start in (0, 5):
        lo = [(a - start) // 10 * 10 + start for a in ages]
        release = pd.DataFrame({"id": ids, "age": [f"{x}-{x + 9}" for x in lo]})
        release.to_csv(tmp_path / f"from{start}.csv", index=False)
    p = run(
        tmp_path / "s.csv",
        tmp_path / "from0.csv",
        tmp_path / "from5.csv",
        "--id",
        "id",
        "--qi",
        "age",
        "--k",
        "5",
        "--format",
        "json",
    )
    assert p.returncode == 1, p.stderr
    (finding,) = json.loads(p.stdout)["findings"]
    assert finding["type"] == "linkage" and finding["records"] == ["p12", "p13"]
    assert finding["link"] == "row order" and finding["k_joined"] == 2


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--id", "nom"], "unknown id column: nom"),
        (["--id", "name", "--k", "5"], "--k needs --qi"),
        (["--id", "name", "--k", "five", "--qi", "bmi"], "--k expects a whole number"),
        (["--id", "name", "--l", "2"], "--l needs --sensitive"),
        (["--id", "name", "--bounds", "bmi=50"], "--bounds expects COL=LOW:HIGH"),
        (["--id", "name", "--p", "150"], "--p must be between 0 and 100"),
        ([], "the following arguments are required: --id"),
        (["--id", "name", "--format", "xml"], "invalid choice: 'xml'"),
    ],
)
def test_bad_input_is_one_line_and_status_2(bmi, extra, message):
    p = run(bmi / "source.csv", bmi / "k1.csv", *extra)
    assert p.returncode == 2
    assert message in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and p.stdout == ""


def test_a_release_with_unknown_ids_or_missing_file(bmi):
    (bmi / "odd.csv").write_text("name,bmi\nNobody,30\n")
    p = run(bmi / "source.csv", bmi / "odd.csv", "--id", "name")
    assert p.returncode == 2 and "odd.csv: 1 id(s) are not in the source" in p.stderr
    p = run(bmi / "source.csv", bmi / "missing.csv", "--id", "name")
    assert p.returncode == 2 and "no such file" in p.stderr and "Traceback" not in p.stderr


@pytest.mark.parametrize(
    "decimals, between",
    [(2, "between 42.98 and 43.05"), (1, "between 42.95 and 43.25")],
)
def test_bmi_as_printed_is_an_interval_not_a_value(tmp_path, decimals, between):
    """Seed 000's table prints the means with two decimals: Doug is confined, not fixed."""
    pd.DataFrame({"name": NAMES, "bmi": BMI}).to_csv(tmp_path / "source.csv", index=False)
    for label, groups in (("k1", [0, 0, 0, 0, 1, 1, 1]), ("k2", [0, 0, 0, 1, 1, 1, 1])):
        means = pd.Series(BMI, dtype=float).groupby(groups).transform("mean").round(decimals)
        pd.DataFrame({"name": NAMES, "bmi": means}).to_csv(tmp_path / f"{label}.csv", index=False)
    p = run(tmp_path / "source.csv", tmp_path / "k1.csv", tmp_path / "k2.csv", "--id", "name")
    assert p.returncode == 1, p.stderr
    assert "exact_inference [bmi]: 1 record(s)" in p.stdout
    assert f"Doug Fulton: {between}" in p.stdout
    assert "within ±5%" in p.stdout


def test_rounded_means_of_a_group_and_the_group_less_one_fix_nothing(tmp_path):
    """A thousand ages; the second release leaves out r123 (81). Means rounded to one decimal
    confine that age to decades, which is no disclosure."""
    ids = [f"r{i:03d}" for i in range(1000)]
    age = np.random.default_rng(7).integers(17, 91, 1000).astype(float)
    age[123] = 81
    pd.DataFrame({"id": ids, "age": age}).to_csv(tmp_path / "s.csv", index=False)
    whole = pd.DataFrame({"id": ids, "age": round(age.mean(), 1)})
    whole.to_csv(tmp_path / "all.csv", index=False)
    keep = np.arange(1000) != 123
    less = pd.DataFrame({"id": np.array(ids)[keep], "age": round(age[keep].mean(), 1)})
    less.to_csv(tmp_path / "less.csv", index=False)
    p = run(
        tmp_path / "s.csv",
        tmp_path / "all.csv",
        tmp_path / "less.csv",
        "--id",
        "id",
        "--bounds",
        "age=0:120",
    )
    assert p.returncode == 0, p.stdout + p.stderr
    assert "no conflicts found" in p.stdout and "r123" not in p.stdout


def test_two_means_confine_a_value_only_together(tmp_path):
    """A averages s1, s2, s3 and B averages s1, s3, s4: their difference puts s2 (99) at least
    97 above s4 >= 0, so in [97, 100] under the public bounds."""
    ids = ["s1", "s2", "s3", "s4"]
    v = [50.0, 99.0, 51.0, 2.0]
    pd.DataFrame({"id": ids, "v": v}).to_csv(tmp_path / "s.csv", index=False)
    pd.DataFrame({"id": ["s1", "s2", "s3"], "v": sum(v[:3]) / 3}).to_csv(
        tmp_path / "a.csv", index=False
    )
    pd.DataFrame({"id": ["s1", "s3", "s4"], "v": (v[0] + v[2] + v[3]) / 3}).to_csv(
        tmp_path / "b.csv", index=False
    )
    args = ("--id", "id", "--p", "5", "--bounds", "v=0:100")
    p = run(tmp_path / "s.csv", tmp_path / "a.csv", tmp_path / "b.csv", *args)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "s2: between 97.00 and 100.00" in p.stdout
    for alone in ("a.csv", "b.csv"):
        p = run(tmp_path / "s.csv", tmp_path / alone, *args)
        assert p.returncode == 0 and "no conflicts found" in p.stdout
