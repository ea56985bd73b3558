"""``anonymize --earlier``: a release made on the command line is checked against earlier
releases of its source, as the web checks one against the live releases."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

# Seed 000's BMI example (as the web's conflict tests run it): the earlier release published
# each record's BMI as the mean of its group of MDAV on BMI and height (the lower four, the
# upper three); the new one microaggregates BMI alone (the lower three, the upper four).
NAMES = ["Bob", "Kate", "Jane", "Doug", "Louis", "John", "Susane"]
BMI = [24, 35, 41, 43, 44, 48, 50]
HEIGHT = [171, 171, 165, 174, 174, 198, 184]
TAGS = ("name=identifier", "bmi=sensitive", "height=quasi_identifier")
PLAN = {
    "version": 1,
    "quasi_identifiers": ["height"],
    "steps": [
        {"kind": "drop", "params": {"columns": ["name", "height"]}},
        {"kind": "microaggregation", "params": {"columns": ["bmi"], "k": 3}},
    ],
}


@pytest.fixture
def files(tmp_path):
    source = pd.DataFrame({"name": NAMES, "bmi": BMI, "height": HEIGHT})
    source.to_csv(tmp_path / "source.csv", index=False)
    lower, upper = np.mean(BMI[:4]), np.mean(BMI[4:])
    # the earlier release in lineage form: its published column plus the source's id column
    earlier = pd.DataFrame({"name": NAMES, "bmi": [lower] * 4 + [upper] * 3})
    earlier.to_csv(tmp_path / "earlier.csv", index=False)
    (tmp_path / "plan.json").write_text(json.dumps(PLAN))
    return tmp_path


def _anonymize(folder, *extra):
    call_command(
        "anonymize",
        str(folder / "source.csv"),
        "--plan",
        str(folder / "plan.json"),
        "--out",
        str(folder / "out.csv"),
        "--report",
        str(folder / "report.json"),
        "--seed",
        "1",
        "--purpose",
        "testing",
        "--recipient",
        "team",
        *[f"--tag={t}" for t in TAGS],
        *extra,
    )
    return json.loads((folder / "report.json").read_text())


def test_alone_the_release_has_no_conflicts(files):
    report = _anonymize(files)
    assert report["conflicts"] == []
    assert not [f for f in report["gate"]["findings"] if f["code"].startswith("conflict_")]


def test_an_earlier_release_it_combines_with_is_a_blocking_conflict(files):
    report = _anonymize(files, "--earlier", str(files / "earlier.csv"), "--id", "name")
    # 4 x the earlier lower mean less the new lower group's three: Doug's BMI, exactly
    (found,) = [c for c in report["conflicts"] if c["type"] == "exact_inference"]
    assert found["records"] == 1 and found["columns"] == ["bmi"]
    assert set(found["releases"]) == {"earlier.csv", "release \u27e8new\u27e9"}
    assert "43" not in found["explanation"]
    (gate,) = [f for f in report["gate"]["findings"] if f["code"] == "conflict_exact_inference"]
    assert gate["severity"] == "block" and gate["records"] == 1
    assert set(gate["facts"]["releases"]) == {"earlier.csv", "this release"}
    assert report["gate"]["blocking"] >= 1


def test_a_blocking_conflict_fails_the_command_when_asked(files):
    with pytest.raises(CommandError, match="conflict_exact_inference") as caught:
        _anonymize(
            files, "--earlier", str(files / "earlier.csv"), "--id", "name", "--fail-on-block"
        )
    assert caught.value.returncode == 1


def test_earlier_needs_the_id_column(files):
    with pytest.raises(CommandError, match="--earlier needs --id"):
        _anonymize(files, "--earlier", str(files / "earlier.csv"))
    with pytest.raises(CommandError, match="id column"):
        _anonymize(files, "--earlier", str(files / "earlier.csv"), "--id", "nope")
