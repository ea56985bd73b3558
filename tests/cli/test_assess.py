"""``manage.py assess`` as users run it: a subprocess, its exit status, stdout and stderr."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"


def run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    env = {**os.environ, "DEBUG": "1"}
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "assess", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_text_report():
    p = run(str(FIX / "test2.csv"), "--qi", "ZIPCode,Age", "--sensitive", "Salary,Disease")
    assert p.returncode == 0, p.stderr
    assert "k = 1" in p.stdout
    assert "sensitive Salary" in p.stdout and "ordered distance" in p.stdout
    assert "records at risk" in p.stdout


def test_json_report_with_hierarchy_population_and_aux(tmp_path):
    aux = tmp_path / "aux.csv"
    aux.write_text("ZIPCode,name\n47677,Ann\n47602,Bob\n11111,Cy\n")
    p = run(
        str(FIX / "test2.csv"),
        "--qi",
        "ZIPCode",
        "--sensitive",
        "Disease",
        "--hierarchy",
        f"Disease={FIX / 'test2_hierarchy_Disease.csv'}",
        "--population",
        "1000",
        "--aux",
        str(aux),
        "--aux-keys",
        "ZIPCode",
        "--format",
        "json",
    )
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    for key in (
        "rows",
        "classes",
        "k",
        "uniques",
        "prosecutor_risk",
        "records_at_risk",
        "class_sizes",
        "sensitive",
        "population",
        "linkage",
    ):
        assert key in d
    assert d["records_at_risk"]["0.2"] == {"count": 9, "share": 1.0}
    assert d["sensitive"]["Disease"]["t_distance"] == "hierarchical"
    assert d["linkage"]["singled_out"] == 2 and d["linkage"]["unmatched"] == 1


@pytest.mark.slow
def test_separator_is_sniffed_and_can_be_given(tmp_path):
    f = tmp_path / "t.tsv"
    f.write_text("a\tb\n1\tx\n1\ty\n2\tx\n")
    sniffed = json.loads(run(str(f), "--qi", "a", "--format", "json").stdout)
    given = json.loads(run(str(f), "--qi", "a", "--sep", "\\t", "--format", "json").stdout)
    assert sniffed["k"] == given["k"] == 1 and sniffed["classes"] == 2
    wrong = run(str(f), "--qi", "a", "--sep", ";")
    assert wrong.returncode == 2 and "unknown quasi-identifier" in wrong.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{t2}", "--qi", "Nope"], "unknown quasi-identifier: Nope"),
        (["{t2}"], "no quasi-identifier given"),
        (["{missing}", "--qi", "a"], "no such file"),
        (["{empty}", "--qi", "a"], "empty"),
        (
            ["{t2}", "--qi", "Age", "--sensitive", "Disease", "--hierarchy", "Disease={bad}"],
            "single column",
        ),
        (
            ["{t2}", "--qi", "Age", "--sensitive", "Disease", "--hierarchy", "Disease={agehier}"],
            "does not cover 6 value",
        ),
        (
            ["{t2}", "--qi", "Age", "--sensitive", "Disease", "--hierarchy", "Disease={missing}"],
            "cannot read hierarchy file",
        ),
        (["{binary}", "--qi", "a"], "cannot be read"),
        (["{t2}", "--qi", "Age", "--population", "3"], "smaller than the table"),
        (["{t2}", "--qi", "Age", "--population", "many"], "expects a whole number"),
        (["{t2}", "--qi", "Age", "--aux-keys", "Age"], "--aux-keys needs --aux"),
        (["{t2}", "--qi", "Age", "--aux", "{t2}", "--aux-keys", "Nope"], "unknown join column"),
    ],
    ids=[
        "unknown-column",
        "no-qi",
        "no-file",
        "empty-file",
        "malformed-hierarchy",
        "hierarchy-missing-values",
        "unreadable-hierarchy",
        "unreadable-file",
        "population",
        "population-not-a-number",
        "aux-keys-alone",
        "aux-unknown-key",
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, args, message):
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    bad = tmp_path / "bad.csv"
    bad.write_text("only-one-column\nanother\n")
    binary = tmp_path / "bin.parquet"
    binary.write_bytes(b"\x00\x01garbage\xff" * 10)
    paths = {
        "t2": FIX / "test2.csv",
        "missing": tmp_path / "nope.csv",
        "empty": empty,
        "bad": bad,
        "agehier": FIX / "test2_hierarchy_Age.csv",
        "binary": binary,
    }
    p = run(*[a.format(**paths) for a in args])
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert message in lines[0]
    assert "Traceback" not in p.stderr


def test_command_does_not_import_celery_or_plotly():
    code = (
        "import os, sys; os.environ['DEBUG']='1'; os.environ.setdefault('DJANGO_SETTINGS_MODULE',"
        "'anonweb.settings'); sys.argv=['manage.py','assess',{!r},'--qi','Age'];"
        "from django.core.management import execute_from_command_line;"
        "execute_from_command_line(sys.argv);"
        "bad=[m for m in sys.modules if m.split('.')[0] in ('celery','plotly','opendp')];"
        "print('LEAKED', bad) if bad else None".format(str(FIX / "test2.csv"))
    )
    p = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "DEBUG": "1"},
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
    assert "LEAKED" not in p.stdout


def test_known_columns_simulate_a_linkage_attack_on_the_table_itself(fixtures_dir):
    import json
    import os
    import subprocess
    import sys

    from tests.conftest import ROOT

    env = {**os.environ, "DEBUG": "1"}
    out = subprocess.run(
        [
            sys.executable,
            "manage.py",
            "assess",
            str(fixtures_dir / "test2.csv"),
            "--qi",
            "ZIPCode",
            "--known",
            "Disease",
            "--format",
            "json",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    link = json.loads(out.stdout)["linkage"]
    # Diseases: gastritis, bronchitis and stomach cancer twice each; three others once.
    assert link["mode"] == "known" and link["singled_out"] == 3
    assert link["histogram"] == [{"candidates": 1, "records": 3}, {"candidates": 2, "records": 6}]


def test_a_workbook_of_several_sheets_needs_sheet_and_decimal_commas_need_decimal(tmp_path):
    from tests.core.io.test_ingest import DECIMAL_COMMAS, _two_sheets

    book = tmp_path / "t.xlsx"
    book.write_bytes(_two_sheets())
    refused = run(str(book), "--qi", "age")
    assert refused.returncode == 2
    assert "the workbook has 2 sheets ('README', 'patients')" in refused.stderr
    chosen = json.loads(
        run(str(book), "--qi", "age", "--sheet", "patients", "--format", "json").stdout
    )
    assert chosen["classes"] == 3
    text = tmp_path / "d.csv"
    text.write_text(DECIMAL_COMMAS)
    p = run(str(text), "--qi", "income", "--decimal", ",", "--format", "json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["classes"] == 3
    clash = run(str(text), "--qi", "income", "--sep", ",", "--decimal", ",")
    assert clash.returncode == 2
    assert "the comma cannot be both the separator and the decimal mark" in clash.stderr


def test_model_flags_check_the_table_as_it_is(tmp_path):
    # the hand-worked β-likeness table: class a's largest gain is hiv's, (0.4 - 0.2) / 0.2 = 1
    table = tmp_path / "t.csv"
    table.write_text(
        "zip,disease\n"
        + "".join(f"a,{d}\n" for d in ["flu", "cold", "cold", "hiv", "hiv"])
        + "".join(f"b,{d}\n" for d in ["flu", "flu", "flu", "flu", "cold"])
    )
    args = [str(table), "--qi", "zip", "--sensitive", "disease", "--format", "json"]
    p = run(*args, "--beta-likeness", "disease=0.99", "--l-distinct", "disease=2")
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert report["sensitive"]["disease"]["beta_likeness"] == pytest.approx(1.0)
    distinct, beta = report["model_checks"]
    assert distinct["satisfied"] is True and distinct["value"] == 2
    assert beta["model"] == {"model": "beta_likeness", "sensitive": "disease", "beta": 0.99}
    assert beta["satisfied"] is False and beta["value"] == pytest.approx(1.0)
    assert (beta["failing_classes"], beta["failing_records"]) == (1, 5)
    assert "model_checks" not in json.loads(run(*args).stdout)
    bad = run(*args, "--beta-likeness", "disease=many")
    assert bad.returncode == 2 and "--beta-likeness: 'many' is not a number" in bad.stderr


def test_a_population_table_gives_exact_figures_and_judges_k_map_and_delta_presence(tmp_path):
    # 12 people; the table holds 5 of them: (21,1301) x2, (22,1301), (31,1402), (33,1301),
    # which the population holds 2, 1, 3 and 1 times
    people = tmp_path / "people.csv"
    people.write_text(
        "age,zip\n21,1301\n21,1302\n22,1301\n25,1401\n31,1402\n31,1402\n33,1301\n35,1302\n"
        "21,1301\n22,1401\n31,1402\n33,1302\n"
    )
    table = tmp_path / "table.csv"
    table.write_text("age,zip\n21,1301\n22,1301\n31,1402\n33,1301\n21,1301\n")
    args = [str(table), "--qi", "age,zip", "--population-table", str(people), "--format", "json"]
    p = run(*args, "--k-map", "2", "--delta-presence", "0:0.7")
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    population = report["population_table"]
    assert (population["name"], population["rows"]) == ("people.csv", 12)
    assert population["journalist_risk"]["max"] == 1.0  # (22,1301): one person
    # marketer: (2/2 + 1/1 + 1/3 + 1/1) / 5 records
    assert population["marketer_risk"] == pytest.approx((1 + 1 + 1 / 3 + 1) / 5)
    k_map, delta = report["model_checks"]
    # 2-map: (22,1301) and (33,1301) are one person each
    assert (k_map["satisfied"], k_map["value"], k_map["failing_records"]) == (False, 1.0, 2)
    # δ: 1, 1, 1/3, 1; above 0.7: three classes, four records
    assert (delta["value"], delta["failing_classes"], delta["failing_records"]) == (1.0, 3, 4)
    # a table with more of someone than the population holds is not part of it
    table.write_text("age,zip\n22,1301\n22,1301\n")
    p = run(*args, "--k-map", "2")
    assert p.returncode == 2 and "not part of the population" in p.stderr
