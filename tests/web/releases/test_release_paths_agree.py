"""The command line and the web job make the same release: for the same plan, table, seed and
key, ``anonymize`` reports the gate findings, intruder figures, lineage, attacks, risk after
and reconstruction that the web's release report records."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command

from anonweb.core.release.make import lineage_summary
from anonweb.datasets.services import dataset_create, dataset_set_tags
from anonweb.datasets.storage import load_frame
from anonweb.jobs.models import Job, JobStatus
from anonweb.jobs.runners import run_anonymize
from anonweb.jobs.services import anonymize_launch, job_claim
from anonweb.releases.models import Release
from anonweb.releases.storage import load_lineage

pytestmark = pytest.mark.django_db

SEED = 20261127
KEY = b"k" * 32
TAGS = {
    "name": "identifier",
    "zip": "quasi_identifier",
    "age": "quasi_identifier",
    "sex": "quasi_identifier",
    "income": "sensitive",
    "weight": "other",
    "disease": "sensitive",
}
PLAN = {
    "version": 1,
    "quasi_identifiers": ["zip", "age", "sex"],
    "sensitive": ["disease", "income"],
    "hierarchies": {
        "age": {"builder": "interval", "width": 10},
        "zip": {"builder": "mask"},
        "sex": {"rows": [["F", "*"], ["M", "*"]]},
    },
    "attacks": {"holdout": 0.2, "targets": 100},
    "steps": [
        {"kind": "tokenize", "params": {"columns": ["name"], "key": "release-key"}},
        {"kind": "microaggregation", "params": {"columns": ["income"], "k": 3}},
        {"kind": "add_noise", "params": {"columns": ["weight"], "scale": 0.2}},
        {"kind": "optimal_generalization", "params": {"k": 3, "suppression": 0.0}},
    ],
}
# What both paths must agree on (the internal report's keys, and the gate).
REPORT_KEYS = ("intruder", "attacks", "reconstruction", "risk_after", "steps")
TIMINGS = {"seconds", "elapsed", "elapsed_seconds"}


def _table(n: int = 240) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    return pd.DataFrame(
        {
            "name": [f"person {i}" for i in range(n)],
            "zip": rng.choice(["47677", "47602", "47678", "47905", "47909"], n),
            "age": rng.integers(18, 80, n),
            "sex": rng.choice(["F", "M"], n),
            "income": rng.integers(1000, 9000, n),
            "weight": np.round(rng.normal(70, 12, n), 1),
            "disease": rng.choice(["flu", "asthma", "gastritis", "none"], n),
        }
    )


def _web_release(officer, team, csv: bytes) -> tuple[Release, pd.DataFrame]:
    ds = dataset_create(
        user=officer, team=team, upload=SimpleUploadedFile("p.csv", csv), name="patients"
    )
    ds = dataset_set_tags(user=officer, dataset=ds, tags=TAGS)
    job = anonymize_launch(
        user=officer, dataset=ds, plan=PLAN, title="same", purpose="testing", recipient="team"
    )
    assert job_claim(job_id=job.pk, worker="t")
    job = Job.objects.select_related("team", "dataset").get(pk=job.pk)
    run_anonymize(
        job,
        lambda pct, msg="": None,
        rng=np.random.default_rng(SEED),
        secrets={"release-key": KEY},
    )
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    return Release.objects.get(job=job), load_frame(ds.storage_key)


def _cli_report(tmp_path, csv: bytes) -> tuple[dict, pd.DataFrame]:
    source, plan, key = tmp_path / "p.csv", tmp_path / "plan.json", tmp_path / "key"
    out, report = tmp_path / "out.csv", tmp_path / "report.json"
    source.write_bytes(csv)
    plan.write_text(json.dumps(PLAN))
    key.write_bytes(KEY)
    call_command(
        "anonymize",
        str(source),
        "--plan",
        str(plan),
        "--out",
        str(out),
        "--report",
        str(report),
        "--seed",
        str(SEED),
        "--secret",
        f"release-key={key}",
        "--purpose",
        "testing",
        "--recipient",
        "team",
        *[f"--tag={column}={role}" for column, role in TAGS.items()],
    )
    return json.loads(report.read_text()), pd.read_csv(out)


def _json(value):
    """As stored, without the time each step took (the only figure that may differ)."""
    return _untimed(json.loads(json.dumps(value)))


def _untimed(value):
    if isinstance(value, dict):
        return {k: _untimed(v) for k, v in value.items() if k not in TIMINGS}
    if isinstance(value, list):
        return [_untimed(v) for v in value]
    return value


def test_the_command_line_and_the_web_job_make_the_same_release(officer, team, tmp_path):
    csv = _table().to_csv(index=False).encode()
    release, web_table = _web_release(officer, team, csv)
    cli, cli_out = _cli_report(tmp_path, csv)

    web = release.report
    for key in REPORT_KEYS:
        assert key in web, key
        assert _json(cli[key]) == _json(web[key]), key
    # the plan exercised every part: a perturbed column, a control, microaggregated means
    assert web["intruder"]["columns"] == ["income", "weight"]
    assert web["attacks"]["control_records"] == 48
    assert _json(cli["gate"]) == _json(release.gate)
    assert _json(cli["published"]) == _json(release.published_report)
    lineage = load_lineage(release.storage_key, label="this release")
    web_lineage = lineage_summary(lineage.rows, lineage.aggregates, dp=lineage.dp)
    assert cli["lineage"] == web_lineage
    assert web_lineage["aggregates"][0]["column"] == "income"
    assert web_lineage["records"] == release.rows == len(cli_out) == 192
    # no earlier release: nothing conflicts on either path
    assert cli["conflicts"] == [] and not release.conflict_findings.exists()
    # the same rows come out (the published order and the tokens included)
    released = pd.read_parquet(release.storage_key and _data_path(release))
    assert list(cli_out.columns) == list(released.columns)
    assert cli_out["name"].tolist() == released["name"].tolist()
    assert len(web_table) == 240


def _data_path(release: Release):
    from anonweb.releases.storage import release_dir

    return release_dir(release.storage_key) / "data.parquet"
