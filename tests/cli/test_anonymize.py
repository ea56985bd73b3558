"""``manage.py anonymize`` as users run it: a subprocess, its exit status, files and stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
QI8 = [
    "age",
    "education",
    "marital-status",
    "native-country",
    "race",
    "salary-class",
    "sex",
    "workclass",
]


STATED = ("--purpose", "method comparison", "--recipient", "test suite")


def run(*args: str, stated: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "DEBUG": "1"}
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "anonymize", *args, *(STATED if stated else ())],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def toy_args():
    return [
        str(FIX / "test2.csv"),
        "--sep",
        ";",
        "--qi",
        "ZIPCode,Age",
        "--hierarchy",
        f"ZIPCode={FIX / 'test2_hierarchy_ZIPCode.csv'}",
        "--hierarchy",
        f"Age={FIX / 'test2_hierarchy_Age.csv'}",
    ]


def test_search_shortcut_writes_output_and_report(tmp_path):
    out, rep = tmp_path / "out.csv", tmp_path / "report.json"
    p = run(
        *toy_args(),
        "--k",
        "3",
        "--l-distinct",
        "Disease=2",
        "--out",
        str(out),
        "--report",
        str(rep),
    )
    assert p.returncode == 0, p.stderr
    report = json.loads(rep.read_text())
    assert {"levels", "suppressed", "k", "information_loss", "search"} <= set(report)
    assert report["k"] >= 3 and report["search"]["nodes_checked"] >= 1
    df = pd.read_csv(out, sep=";", dtype=str)
    assert df.groupby(["ZIPCode", "Age"]).size().min() >= 3
    assert df.groupby(["ZIPCode", "Age"])["Disease"].nunique().min() >= 2


def test_plan_mode_with_secret_and_seed(tmp_path):
    key = tmp_path / "key"
    key.write_bytes(b"a-release-key-kept-private\n")
    plan = {
        "steps": [
            {"kind": "tokenize", "params": {"columns": ["ZIPCode"], "key": "k"}},
            {"kind": "add_noise", "params": {"columns": ["Salary"], "sd": 1.0}},
        ]
    }
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    out, rep = tmp_path / "out.csv", tmp_path / "report.json"
    args = [
        str(FIX / "test2.csv"),
        "--plan",
        str(tmp_path / "plan.json"),
        "--secret",
        f"k={key}",
        "--seed",
        "424242",
        "--out",
        str(out),
        "--report",
        str(rep),
    ]
    p = run(*args)
    assert p.returncode == 0, p.stderr
    text = rep.read_text()
    assert "a-release-key-kept-private" not in text and "424242" not in text
    first = out.read_text()
    assert run(*args).returncode == 0 and out.read_text() == first


@pytest.mark.parametrize(
    "extra,message",
    [
        (["--k", "100"], "larger than the table"),
        (["--k", "2", "--l-distinct", "Nope=2"], "Nope"),
        (["--k", "9", "--l-distinct", "Disease=9"], "no generalization satisfies"),
        (["--k", "2", "--qi", "ZIPCode,Age,Salary"], "no --hierarchy"),
    ],
)
def test_bad_input_exits_2_without_output(tmp_path, extra, message):
    out = tmp_path / "out.csv"
    args = toy_args()
    if "--qi" in extra:
        i = args.index("--qi")
        del args[i : i + 2]
    p = run(*args, *extra, "--out", str(out), "--report", str(tmp_path / "r.json"))
    assert p.returncode == 2, p.stderr
    assert message in p.stderr and len(p.stderr.strip().splitlines()) == 1
    assert list(tmp_path.iterdir()) == []


def test_hierarchy_missing_values_and_unknown_step(tmp_path):
    h = tmp_path / "age.csv"
    h.write_text("29;[20,30[;*\n22;[20,30[;*\n")
    p = run(
        str(FIX / "test2.csv"),
        "--sep",
        ";",
        "--qi",
        "Age",
        "--hierarchy",
        f"Age={h}",
        "--k",
        "2",
        "--out",
        str(tmp_path / "o.csv"),
    )
    assert p.returncode == 2 and "does not cover" in p.stderr and "27 (a number)" in p.stderr
    (tmp_path / "plan.json").write_text(json.dumps({"steps": [{"kind": "teleport"}]}))
    p = run(
        str(FIX / "test2.csv"),
        "--plan",
        str(tmp_path / "plan.json"),
        "--out",
        str(tmp_path / "o.csv"),
    )
    assert p.returncode == 2 and "unknown step kind 'teleport'" in p.stderr
    assert sorted(x.name for x in tmp_path.iterdir()) == ["age.csv", "plan.json"]


@pytest.mark.shared_data
def test_adult_k5_s2_matches_arx(datasets_dir, tmp_path):
    arx = datasets_dir / "arx"
    hier = [a for q in QI8 for a in ("--hierarchy", f"{q}={arx / f'adult_hierarchy_{q}.csv'}")]
    out, rep = tmp_path / "out.csv", tmp_path / "report.json"
    p = run(
        str(arx / "adult.csv"),
        "--sep",
        ";",
        "--qi",
        ",".join(QI8),
        *hier,
        "--k",
        "5",
        "--suppression",
        "0.02",
        "--out",
        str(out),
        "--report",
        str(rep),
        "--keep-order",  # compared with ARX's output row by row
    )
    assert p.returncode == 0, p.stderr
    report = json.loads(rep.read_text())
    assert report["row_order"] == "source order (kept on request)"
    assert [report["levels"][q] for q in QI8] == [3, 2, 2, 1, 0, 0, 0, 1]
    assert report["suppressed"] == 506 and report["k"] == 5
    ours = pd.read_csv(out, sep=";", dtype=str)
    expected = pd.read_csv(datasets_dir / "arx-outputs" / "adult_k5_s2.csv", sep=";", dtype=str)
    pd.testing.assert_frame_equal(ours[QI8], expected[QI8])


def test_an_integer_quasi_identifier_with_blanks_takes_an_arx_hierarchy(tmp_path):
    """Ages read as integers with two blank cells: an ARX hierarchy file written as '39;30-39;*'
    covers them (a float column would read '39.0'), the blank rows form a class of their own,
    and the output keeps integers as written beside the '*' of the suppressed row."""
    src = tmp_path / "people.csv"
    rows = [(39, "F")] * 3 + [(40, "F")] * 3 + [("", "F")] * 2 + [(85, "F")]
    src.write_text("age,sex\n" + "".join(f"{a},{s}\n" for a, s in rows))
    age = tmp_path / "age.csv"
    age.write_text("".join(f"{a};{a // 10 * 10}-{a // 10 * 10 + 9};*\n" for a in range(100)))
    sex = tmp_path / "sex.csv"
    sex.write_text("F;*\nM;*\n")
    out, rep = tmp_path / "out.csv", tmp_path / "report.json"
    p = run(
        str(src),
        "--qi",
        "age,sex",
        "--hierarchy",
        f"age={age}",
        "--hierarchy",
        f"sex={sex}",
        "--k",
        "2",
        "--suppression",
        "0.12",
        "--out",
        str(out),
        "--report",
        str(rep),
    )
    assert p.returncode == 0, p.stderr
    report = json.loads(rep.read_text())
    assert report["levels"] == {"age": 0, "sex": 0} and report["suppressed"] == 1
    assert report["k"] == 2 and report["classes"] == 3
    lines = out.read_text().splitlines()
    assert lines[0] == "age,sex"
    assert sorted(lines[1:]) == sorted(["39,F"] * 3 + ["40,F"] * 3 + [",F"] * 2 + ["*,*"])


def test_rows_are_shuffled_and_cells_neutralised_like_a_web_release(tmp_path):
    n = 200
    src = pd.DataFrame(
        {
            "id": [f"P{i:04d}" for i in range(n)],
            "age": [20 + i % 50 for i in range(n)],
            "note": ["=HYPERLINK(1)" if i % 7 == 0 else "fine" for i in range(n)],
        }
    )
    path = tmp_path / "in.csv"
    src.to_csv(path, index=False)
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "quasi_identifiers": ["age"],
                "steps": [{"kind": "tokenize", "params": {"columns": ["id"], "key": "k"}}],
            }
        )
    )
    outputs = []
    for name in ("a", "b"):
        out, rep = tmp_path / f"{name}.csv", tmp_path / f"{name}.json"
        p = run(str(path), "--plan", str(plan), "--out", str(out), "--report", str(rep))
        assert p.returncode == 0, p.stderr
        outputs.append(pd.read_csv(out, dtype=str))
        report = json.loads(rep.read_text())
        assert report["row_order"] == "shuffled"
        assert report["purpose"] == "method comparison" and report["recipient"] == "test suite"
        assert "gate" in report and report["rows_in"] == n
        assert "rows_in" not in report["published"] and "risk_before" not in report["published"]
    a, b = outputs
    # not in source order, and the ages as a multiset unchanged
    assert list(a["age"]) != list(src["age"].astype(str))
    assert sorted(a["age"]) == sorted(src["age"].astype(str))
    # formulas neutralised as in a web download
    assert a["note"].str.startswith("'=").sum() == (src["note"] != "fine").sum()
    # a fresh key per run: the same person's token differs between the two releases
    assert not set(a["id"]) & set(b["id"])


def test_purpose_and_recipient_are_required(tmp_path):
    out = tmp_path / "out.csv"
    p = run(*toy_args(), "--k", "2", "--out", str(out), stated=False)
    assert p.returncode == 2 and "purpose and recipient" in p.stderr and not out.exists()


def test_the_gate_runs_on_the_command_line(tmp_path):
    out, rep = tmp_path / "out.csv", tmp_path / "report.json"
    p = run(*toy_args(), "--k", "2", "--out", str(out), "--report", str(rep))
    assert p.returncode == 0, p.stderr
    gate = json.loads(rep.read_text())["gate"]
    codes = {f["code"] for f in gate["findings"]}
    # Disease and the other test2 columns were never tagged on the command line
    assert "column_untagged" in codes and "release gate:" in p.stderr


def test_fail_on_block_exits_1_with_the_files_written(tmp_path):
    out, rep = tmp_path / "out.csv", tmp_path / "report.json"
    files = ("--out", str(out), "--report", str(rep), "--fail-on-block")
    # k=2 is below the gate's default threshold and Disease/Salary are untagged: blocked
    p = run(*toy_args(), "--k", "2", *files)
    assert p.returncode == 1, p.stderr
    assert "release gate:" in p.stderr and "column_untagged" in p.stderr
    assert out.exists() and json.loads(rep.read_text())["gate"]["findings"]
    # k=5 with every column tagged: nothing to find, status 0 with the flag
    tags = ("--tag", "Disease=sensitive", "--tag", "Salary=other")
    p = run(*toy_args(), "--k", "5", *files, *tags)
    assert p.returncode == 0, p.stderr
    assert json.loads(rep.read_text())["gate"]["findings"] == []


def test_the_report_names_the_recipients_given(tmp_path):
    out, rep = tmp_path / "out.csv", tmp_path / "report.json"
    files = ("--out", str(out), "--report", str(rep))
    p = run(*toy_args(), "--k", "2", *files, "--recipients", "ana, group:Internal QA,ana")
    assert p.returncode == 0, p.stderr
    assert json.loads(rep.read_text())["recipients"] == ["ana", "group:Internal QA"]
    # not given: every analyst of the team receives it, and the report names no one
    p = run(*toy_args(), "--k", "2", *files)
    assert p.returncode == 0, p.stderr
    assert "recipients" not in json.loads(rep.read_text())
    out.unlink()
    p = run(*toy_args(), "--k", "2", *files, "--recipients", "ana,group:")
    assert p.returncode == 2 and "'group:' does not name a group" in p.stderr
    assert not out.exists()


def test_local_suppression_blanks_cells_instead_of_suppressing_records(tmp_path):
    out, rep = tmp_path / "out.csv", tmp_path / "report.json"
    args = [*toy_args(), "--k", "4", "--suppression", "0.5", "--out", str(out)]
    p = run(*args, "--local-suppression", "--importance", "Age=5", "--report", str(rep))
    assert p.returncode == 0, p.stderr
    report = json.loads(rep.read_text())
    blanks = report["local_suppression"]
    assert report["suppressed"] == 0 and blanks["k"] == 4
    df = pd.read_csv(out, sep=";", dtype=str, keep_default_na=False, na_values=[""])
    assert len(df) == len(pd.read_csv(FIX / "test2.csv", sep=";"))
    assert int(df[["ZIPCode", "Age"]].isna().to_numpy().sum()) == blanks["cells_blanked"]
    from anonweb.core.transforms.local_suppression import brute_force_counts

    assert brute_force_counts(df, quasi_identifiers=["ZIPCode", "Age"]).min() >= 4
    # the search alone, at the same limit, suppresses whole records
    plain = tmp_path / "plain.json"
    p = run(*args, "--report", str(plain))
    assert p.returncode == 0, p.stderr
    assert json.loads(plain.read_text())["levels"] == report["levels"]
    bad = run(*args, "--importance", "Age=5")
    assert bad.returncode == 2 and "--local-suppression" in bad.stderr


def test_population_uniqueness_flags_reach_the_search(tmp_path):
    out, rep = tmp_path / "out.csv", tmp_path / "report.json"
    args = [*toy_args(), "--k", "1", "--out", str(out), "--report", str(rep)]
    p = run(*args, "--population-uniqueness", "0.01", "--population-size", "100")
    assert p.returncode == 0, p.stderr
    report = json.loads(rep.read_text())
    spec = {"model": "population_uniqueness", "max": 0.01, "population_size": 100}
    assert report["plan"]["steps"][0]["params"]["models"] == [spec]
    checks = [c for c in report["model_checks"] if c["model"]["model"] == spec["model"]]
    assert len(checks) == 1 and checks[0]["satisfied"]
    assert checks[0]["value"] is not None and checks[0]["value"] <= 0.01
    # without the population's size the plan is refused before anything is read
    bad = run(*args, "--population-uniqueness", "0.01")
    assert bad.returncode == 2 and "population_size" in bad.stderr


def test_k_map_flag_reaches_the_search(tmp_path):
    out, rep = tmp_path / "out.csv", tmp_path / "report.json"
    args = [*toy_args(), "--out", str(out), "--report", str(rep)]
    p = run(*args, "--k-map", "3", "--population-size", "9", "--suppression", "0.5")
    assert p.returncode == 0, p.stderr
    report = json.loads(rep.read_text())
    spec = {"model": "k_map", "k": 3, "population_size": 9}
    assert report["plan"]["steps"][0]["params"]["models"] == [spec]
    checks = [c for c in report["model_checks"] if c["model"]["model"] == "k_map"]
    assert len(checks) == 1 and checks[0]["satisfied"]
    bad = run(*args, "--k-map", "three", "--population-size", "9")
    assert bad.returncode == 2 and "--k-map" in bad.stderr


def _doubled_population(tmp_path):
    """test2's 9 people, each twice: every class of test2 holds half of its population's."""
    people = pd.read_csv(FIX / "test2.csv", sep=";")
    path = tmp_path / "people.csv"
    pd.concat([people, people], ignore_index=True).to_csv(path, sep=";", index=False)
    return path


def test_k_map_and_delta_presence_read_a_population_table(tmp_path):
    out, rep = tmp_path / "out.csv", tmp_path / "report.json"
    people = str(_doubled_population(tmp_path))
    args = [*toy_args(), "--out", str(out), "--report", str(rep), "--population-table", people]
    # every class of one record is two people: 2-map holds with nothing generalized
    p = run(*args, "--k-map", "2")
    assert p.returncode == 0, p.stderr
    report = json.loads(rep.read_text())
    assert report["levels"] == {"ZIPCode": 0, "Age": 0}
    assert report["plan"]["steps"][0]["params"]["models"] == [{"model": "k_map", "k": 2}]
    check = next(c for c in report["model_checks"] if c["model"]["model"] == "k_map")
    assert check["satisfied"] and check["value"] == 2
    assert check["description"] == "2-map (population table 'people.csv', 18 people)"
    assert report["risk_after"]["population_table"] == {"name": "people.csv", "rows": 18}
    # 3-map needs classes of two records (four people)
    p = run(*args, "--k-map", "3")
    assert p.returncode == 0, p.stderr
    assert json.loads(rep.read_text())["k"] >= 2
    # δ = 1/2 in every class at every node: (0, 0.5) holds at once, (0, 0.4) nowhere
    p = run(*args, "--delta-presence", "0:0.5")
    assert p.returncode == 0, p.stderr
    report = json.loads(rep.read_text())
    assert report["levels"] == {"ZIPCode": 0, "Age": 0}
    check = next(c for c in report["model_checks"] if c["model"]["model"] == "delta_presence")
    assert check["value"] == 0.5 and check["satisfied"]
    p = run(*args, "--delta-presence", "0:0.4")
    assert p.returncode == 2 and "no generalization satisfies" in p.stderr


def test_population_models_refuse_what_they_cannot_judge(tmp_path):
    out = tmp_path / "out.csv"
    args = [*toy_args(), "--out", str(out)]
    p = run(*args, "--delta-presence", "0:0.5")
    assert p.returncode == 2 and "needs a population table" in p.stderr
    p = run(*args, "--delta-presence", "0.5")
    assert p.returncode == 2 and "MIN:MAX" in p.stderr
    # a table with a record the population lacks is not part of it
    fewer = tmp_path / "fewer.csv"
    pd.read_csv(FIX / "test2.csv", sep=";").iloc[1:].to_csv(fewer, sep=";", index=False)
    p = run(*args, "--k-map", "2", "--population-table", str(fewer))
    assert p.returncode == 2 and "not part of the population 'fewer.csv'" in p.stderr


def test_average_risk_flag_reaches_the_search_and_the_gate(tmp_path):
    out, rep = tmp_path / "out.csv", tmp_path / "report.json"
    args = [*toy_args(), "--k", "1", "--out", str(out), "--report", str(rep)]
    p = run(*args, "--average-risk", "0.3")
    assert p.returncode == 0, p.stderr
    report = json.loads(rep.read_text())
    assert report["plan"]["steps"][0]["params"]["models"] == [
        {"model": "average_risk", "threshold": 0.3}
    ]
    checks = [c for c in report["model_checks"] if c["model"]["model"] == "average_risk"]
    assert len(checks) == 1 and checks[0]["satisfied"] and checks[0]["value"] <= 0.3
    df = pd.read_csv(out, sep=";", dtype=str)
    kept = df[~(df[["ZIPCode", "Age"]] == "*").all(axis=1)]
    sizes = kept.groupby(["ZIPCode", "Age"]).size()
    assert len(sizes) / sizes.sum() <= 0.3
