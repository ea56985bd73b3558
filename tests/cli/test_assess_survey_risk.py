"""``assess --weights/--household/--suda2/--records``: the exact JSON keys of sdcMicro's survey
risk measures, the per-record CSV, and exit status 2 with one plain line on bad input.

The fixture is sdcMicro's ``tests/testthat/test_indivRisk.R`` table (three keys and a weight)
with a household id added; the expected individual risks are sdcMicro's."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "fixtures" / "sdcmicro_indivrisk.csv"
SDCMICRO = [0.01369863, 0.08579129, 0.01369863, 0.17707583]
SDCMICRO += [0.01877883, 0.01877883, 0.03931625, 0.01369863]


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "assess", str(DATA), "--qi", "A,B,C", *args],
        cwd=ROOT,
        env={**os.environ, "DEBUG": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_json_contract_and_records_file(tmp_path):
    out = tmp_path / "records.csv"
    p = run(
        "--weights",
        "weight",
        "--household",
        "hh",
        "--suda2",
        "--suda2-max-size",
        "3",
        "--records",
        str(out),
        "--format",
        "json",
    )
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    ind = d["individual_risk"]
    assert ind["global"] == pytest.approx(sum(SDCMICRO) / 8, abs=1e-8)
    assert ind["expected_reidentifications"] == pytest.approx(sum(SDCMICRO), abs=1e-7)
    assert ind["records_above"] == {"0.2": 0, "0.1": 1, "0.05": 2, "0.01": 8}
    hh = d["household_risk"]
    # household 2: 1 - (1 - 0.01369863)(1 - 0.17707583)
    assert hh["max"] == pytest.approx(1 - (1 - SDCMICRO[2]) * (1 - SDCMICRO[3]), abs=1e-7)
    assert set(hh["households_above"]) == {"0.2", "0.1", "0.05", "0.01"}
    su = d["suda2"]
    assert set(su) >= {"msu_counts", "records_with_msu", "max_score", "dis_suda_max"}
    # rows (3,3,3), (2,3,2) and (1,4,1) are the sample uniques: C=3, C=2 and A=1 (or B=4) are
    # single-column MSUs; each weighs (3-1)! = 2
    assert su["msu_counts"] == {"1": 4, "2": 0, "3": 0}
    assert su["records_with_msu"] == 3
    assert su["max_score"] == 4.0
    with out.open() as fh:
        rows = list(csv.DictReader(fh))
    assert list(rows[0]) == [
        "row",
        "individual_risk",
        "household_risk",
        "suda_score",
        "dis_suda_score",
    ]
    assert [r["row"] for r in rows] == [str(i) for i in range(1, 9)]
    assert [float(r["individual_risk"]) for r in rows] == pytest.approx(SDCMICRO, abs=1e-8)
    assert [float(r["suda_score"]) for r in rows] == [0, 2, 0, 2, 0, 0, 4, 0]
    assert float(rows[2]["household_risk"]) == float(rows[3]["household_risk"]) == hh["max"]


def test_without_weights_and_households_only_what_was_asked():
    p = run("--suda2", "--format", "json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert "household_risk" not in d
    assert d["individual_risk"]["weights"].startswith("none")
    assert d["individual_risk"]["expected_reidentifications"] == pytest.approx(5.0)
    plain = json.loads(run("--format", "json").stdout)
    assert not {"individual_risk", "household_risk", "suda2"} & set(plain)


def test_text_report_shows_the_survey_measures():
    p = run("--weights", "weight", "--household", "hh", "--suda2")
    assert p.returncode == 0, p.stderr
    assert "individual risk (survey weights)" in p.stdout
    assert "household risk: max" in p.stdout
    assert "SUDA2 (MSUs up to 3 columns)" in p.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--weights", "nope"], "nope"),
        (["--weights", "A"], "cannot also be a quasi-identifier"),
        (["--household", "missing_col"], "missing_col"),
        (["--suda2-max-size", "2"], "--suda2-max-size needs --suda2"),
        (["--suda2", "--suda2-max-size", "two"], "whole number"),
        (["--suda2", "--suda2-max-size", "0"], "from 1"),
        (["--weights", "hh", "--household", "hh"], "both the weight and the household"),
        (["--records", "/nonexistent-dir/x.csv"], "cannot write --records file"),
    ],
)
def test_bad_input_exits_2_with_a_plain_message(args, message):
    p = run(*args, "--format", "json")
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert message in p.stderr
    assert "Traceback" not in p.stderr
    assert p.stdout == ""


def test_risk_method_exact_gives_sdcmicros_exact_series():
    # sdcMicro's indivRisk(method = "exact") on the same table: the keys of three records
    # (0.01369863 approx) are 0.01355297; keys of one or two records are the same either way
    exact = [0.01355297, 0.08579129, 0.01355297, 0.17707583]
    exact += [0.01877883, 0.01877883, 0.03931625, 0.01355297]
    p = run("--weights", "weight", "--risk-method", "exact", "--format", "json")
    assert p.returncode == 0, p.stderr
    ind = json.loads(p.stdout)["individual_risk"]
    assert ind["method"] == "exact"
    assert ind["expected_reidentifications"] == pytest.approx(sum(exact), abs=1e-7)
    p = run("--weights", "weight", "--risk-method", "approx", "--format", "json")
    ind = json.loads(p.stdout)["individual_risk"]
    assert ind["method"] == "approx"
    assert ind["expected_reidentifications"] == pytest.approx(sum(SDCMICRO), abs=1e-7)
    bad = run("--weights", "weight", "--risk-method", "series")
    assert bad.returncode == 2 and "--risk-method" in bad.stderr
