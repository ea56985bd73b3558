"""A release through the API with the engine forced (``ANONWEB_ENGINE``): upload, assess, a
search release, download. DuckDB (and Spark) give the figures and the rows the in-memory engine
gives; the job, its page and the release's page say which engine ran; a plan with a step that
needs the whole table in memory is refused at submission past the in-memory limit."""

from __future__ import annotations

import importlib.util
import io
import shutil

import numpy as np
import pandas as pd
import pytest
from django.test import Client

from anonweb.common.files import files
from anonweb.core.engine.lineage import LINEAGE_COLUMN
from anonweb.datasets.models import Dataset
from anonweb.datasets.services import dataset_set_tags
from anonweb.jobs.models import Job, JobKind
from anonweb.releases.models import Release
from anonweb.releases.storage import (
    SOURCE_ROWS_PARQUET,
    private_name,
    read_private_json,
    release_dir,
    remove_release_files,
)
from anonweb.releases.utility import UTILITY_FILE, release_utility_get, release_utility_measure
from tests.core.release.test_engine_release import close, rows
from tests.web.api.test_api import run_queued, upload
from tests.web.api.test_api_releases import api

pytestmark = pytest.mark.django_db

ZIPS = ["47677", "47602", "47678", "47905"]
PLAN = {
    "version": 1,
    "quasi_identifiers": ["age", "zip", "sex"],
    "sensitive": ["disease"],
    "hierarchies": {
        "age": {"rows": [[a, f"{a // 10 * 10}-{a // 10 * 10 + 9}", "*"] for a in range(20, 70)]},
        "zip": {"rows": [[z, z[:4] + "*", z[:3] + "**", "*"] for z in ZIPS]},
        "sex": {"rows": [["F", "*"], ["M", "*"]]},
    },
    "steps": [
        {"kind": "drop", "params": {"columns": ["name"]}},
        {
            "kind": "optimal_generalization",
            "params": {
                "k": 5,
                "suppression": 0.05,
                "models": [{"model": "distinct_l", "sensitive": "disease", "l": 2}],
            },
        },
    ],
}
TAGS = {"name": "identifier", "age": "quasi_identifier", "zip": "quasi_identifier"}
TAGS |= {"sex": "quasi_identifier", "disease": "sensitive"}
SEARCH_FIGURES = ("levels", "suppressed", "k", "classes", "information_loss", "model_checks")


def table() -> pd.DataFrame:
    rng = np.random.default_rng(21)
    n = 600
    return pd.DataFrame(
        {
            "name": [f"person {i}" for i in range(n)],
            "age": rng.integers(20, 70, n),
            "zip": rng.choice(ZIPS, n),
            "sex": rng.choice(["F", "M"], n),
            "disease": rng.choice(["flu", "ulcer", "cancer"], n, p=[0.5, 0.3, 0.2]),
        }
    )


def release_with(officer, monkeypatch, engine: str, name: str = "") -> dict:
    """Upload, tag, assess and release with ``engine`` forced; the release's figures and rows."""
    monkeypatch.setenv("ANONWEB_ENGINE", engine)
    client = api(officer)
    name = name or f"people ({engine})"
    body = upload(client, name=name, df=table(), filename="people.csv").json()
    run_queued()
    dataset = Dataset.objects.get(pk=body["id"])
    dataset_set_tags(user=officer, dataset=dataset, tags=TAGS)
    job_id = client.post(f"/api/v1/datasets/{dataset.pk}/assessments/").json()["job"]
    run_queued()
    assessed = client.get(f"/api/v1/jobs/{job_id}/").json()
    assert assessed["status"] == "succeeded", assessed
    assessed = Job.objects.get(pk=job_id).result
    launched = client.post(
        f"/api/v1/datasets/{dataset.pk}/releases/",
        {"title": engine, "purpose": "tests", "recipient": "us", "plan": PLAN},
        format="json",
    )
    assert launched.status_code == 202, launched.content
    run_queued()
    job = client.get(f"/api/v1/jobs/{launched.json()['job']}/").json()
    assert job["status"] == "succeeded", job
    stored = Job.objects.get(pk=launched.json()["job"])
    assert stored.result["engine"] == engine
    # measured at publication (by the engine on an engine's release), before anyone read it
    stored_release = Release.objects.get(pk=job["release"])
    utility = read_private_json(stored_release.storage_key, UTILITY_FILE)
    assert utility is not None and utility["utility"]["columns"], utility
    release = client.get(f"/api/v1/releases/{job['release']}/").json()
    csv = client.get(f"/api/v1/releases/{job['release']}/download/")
    assert csv.status_code == 200
    parquet = client.get(f"/api/v1/releases/{job['release']}/download/?format=parquet")
    assert parquet.status_code == 200
    page = Client()
    page.force_login(officer)
    job_page = page.get(f"/jobs/{stored.pk}/").content.decode()
    release_page = page.get(f"/releases/{job['release']}/").content.decode()
    return {
        "release": release,
        "utility": utility["utility"],
        "stored_release": stored_release,
        "assessment": assessed,
        "csv": pd.read_csv(io.BytesIO(b"".join(csv.streaming_content))),
        "parquet": pd.read_parquet(io.BytesIO(b"".join(parquet.streaming_content))),
        "job_page": job_page,
        "release_page": release_page,
    }


def same_figures(memory: dict, ours: dict, engine: str) -> None:
    a, b = memory["release"], ours["release"]
    search_a = next(s for s in a["report"]["steps"] if s["kind"] == "optimal_generalization")
    search_b = next(s for s in b["report"]["steps"] if s["kind"] == "optimal_generalization")
    for key in SEARCH_FIGURES:
        close(search_a[key], search_b[key], key)
    for key in ("risk_before", "risk_after", "rows_in", "rows_out"):
        close(a["report"][key], b["report"][key], key)
    assert (a["report"]["engine"], b["report"]["engine"]) == ("pandas", engine)
    assert a["rows"] == b["rows"] == 600
    for fmt in ("csv", "parquet"):
        assert list(memory[fmt].columns) == list(ours[fmt].columns)
        assert rows(memory[fmt]) == rows(ours[fmt])
    # the assessment (in memory) measured what the release's risk before says
    risk = ours["assessment"]["risk"]
    before = b["report"]["risk_before"]
    assert (risk["k"], risk["classes"]) == (before["k"], before["classes"])
    assert f'data-testid="job-engine">{engine}<' in ours["job_page"]
    assert f'data-testid="release-engine">{engine}<' in ours["release_page"]
    same_utility(memory["utility"], ours["utility"])


def same_utility(memory: dict, ours: dict) -> None:
    """The engine's release measures the utility the in-memory one does (its rows are the
    same multiset), the cells changed too: its rows are matched to source rows through its
    lineage."""
    assert memory["matched"] and ours["matched"]
    for key in ("rows_original", "rows_released", "records_suppressed", "information_loss"):
        close(memory[key], ours[key], key)
    assert [c["column"] for c in memory["columns"]] == [c["column"] for c in ours["columns"]]
    for a, b in zip(memory["columns"], ours["columns"], strict=True):
        assert b["changed"] is not None
        close(a, b)


def test_a_release_on_duckdb_has_the_figures_and_rows_of_pandas(officer, monkeypatch):
    memory = release_with(officer, monkeypatch, "pandas")
    ours = release_with(officer, monkeypatch, "duckdb")
    same_figures(memory, ours, "duckdb")
    # the evidence the in-memory release has, computed out of core or said not to have run
    report = ours["release"]["report"]
    assert set(memory["release"]["report"]["attacks"]) <= set(report["attacks"])
    assert report["reconstruction"]["determined"] == 0
    assert len(report["lineage"]["release_sha256"]) == 64
    # the same file's release in memory is live: the engine release was checked against it out
    # of core, by its lineage (the same node on both: nothing is found)
    first = Release.objects.get(pk=memory["release"]["id"])
    second = Release.objects.get(pk=ours["release"]["id"])
    assert report["conflicts"]["run"] is True and report["conflicts"]["out_of_core"] is True
    assert report["conflicts"]["checked"] == [first.pk] == second.conflicts_checked
    codes = {f["code"] for f in ours["release"]["findings"]}
    assert not {c for c in codes if c.startswith("conflict")}
    # its lineage is kept privately (the source row of each row, as written) and never offered
    lineage = pd.read_parquet(release_dir(second.storage_key) / "private" / SOURCE_ROWS_PARQUET)
    assert sorted(lineage[LINEAGE_COLUMN]) == list(range(600))
    assert LINEAGE_COLUMN not in ours["parquet"].columns
    written = pd.read_parquet(release_dir(second.storage_key) / "data.parquet")
    source = table().iloc[lineage[LINEAGE_COLUMN].to_numpy()].reset_index(drop=True)
    assert written["disease"].tolist() == source["disease"].tolist()
    # a later release made in memory reads it and is checked against both
    later = release_with(officer, monkeypatch, "pandas", name="people (again)")
    third = Release.objects.get(pk=later["release"]["id"])
    assert third.conflicts_checked == [first.pk, second.pk]
    # the engine release's gate now: its check run again out of core
    client = api(officer)
    gate = client.get(f"/api/v1/releases/{second.pk}/gate/").json()
    assert gate["rechecked"] is True, gate
    assert [c["id"] for c in gate["checked"]] == [first.pk, third.pk]
    assert not [f for f in gate["findings"] if f["code"].startswith("conflict")]
    # a release without its stored utility has it measured again by a job (never by the page),
    # by DuckDB for a source it streams (ANONWEB_ENGINE names it here): the same figures (sums
    # of floats in another order: means and standard deviations to 1e-9)
    stored = ours["stored_release"]
    files().delete(private_name(stored.storage_key, UTILITY_FILE))
    assert release_utility_get(release=stored) is None
    assert release_utility_measure(release=stored)
    assert_same_figures(release_utility_get(release=stored), ours["utility"])
    # removing the release's files removes its lineage too
    remove_release_files(second.storage_key)
    assert not files().exists(private_name(second.storage_key, SOURCE_ROWS_PARQUET))


def assert_same_figures(got, want, where="utility"):
    """Equal, floats to 1e-9 (relative and absolute): engines sum in their own order."""
    if isinstance(want, float) and isinstance(got, float):
        assert got == pytest.approx(want, rel=1e-9, abs=1e-9), where
    elif isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), where
        for key in want:
            assert_same_figures(got[key], want[key], f"{where}.{key}")
    elif isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), where
        for i, (a, b) in enumerate(zip(got, want, strict=True)):
            assert_same_figures(a, b, f"{where}[{i}]")
    else:
        assert got == want, where


@pytest.mark.slow
@pytest.mark.skipif(
    importlib.util.find_spec("pyspark") is None or shutil.which("java") is None,
    reason="Spark needs pyspark and a Java runtime",
)
def test_a_release_on_spark_has_the_figures_and_rows_of_pandas(officer, monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    monkeypatch.setenv("ANONWEB_SPARK_MASTER", "local[2]")
    memory = release_with(officer, monkeypatch, "pandas")
    ours = release_with(officer, monkeypatch, "spark")
    same_figures(memory, ours, "spark")
    # the attacks on a sample Spark drew, the digests of the folder it wrote
    report = ours["release"]["report"]
    assert report["attacks"]["sample"] == {"records": 600, "of": 600}
    assert set(memory["release"]["report"]["attacks"]) <= set(report["attacks"])
    assert len(report["lineage"]["release_sha256"]) == 64


def test_an_in_memory_step_past_the_limit_is_refused_at_submission(officer, monkeypatch):
    monkeypatch.delenv("ANONWEB_ENGINE", raising=False)
    client = api(officer)
    body = upload(client, name="people", df=table(), filename="people.csv").json()
    run_queued()
    dataset = Dataset.objects.get(pk=body["id"])
    dataset_set_tags(user=officer, dataset=dataset, tags=TAGS)
    plan = {
        **PLAN,
        "steps": [*PLAN["steps"], {"kind": "shuffle", "params": {"columns": ["disease"]}}],
    }
    monkeypatch.setenv("ANONWEB_ENGINE_AUTO_ROWS", "500")
    body = {"title": "t", "purpose": "tests", "recipient": "us", "plan": plan}
    response = client.post(f"/api/v1/datasets/{dataset.pk}/releases/", body, format="json")
    assert response.status_code == 400
    assert response.json()["errors"] == [
        "step 3 (shuffle) runs in memory only (its output for one row depends on the other "
        "rows), and the table has 600 rows, more than the 500 an in-memory step may read "
        "(ANONWEB_ENGINE_AUTO_ROWS): remove the step, or reach the goal with steps an "
        "out-of-core engine runs (dropping columns, the generalization search with record "
        "suppression)"
    ]
    assert not Job.objects.filter(kind=JobKind.ANONYMIZE).exists()
    # with the pandas engine chosen by name, the same plan is accepted
    monkeypatch.setenv("ANONWEB_ENGINE", "pandas")
    response = client.post(f"/api/v1/datasets/{dataset.pk}/releases/", body, format="json")
    assert response.status_code == 202, response.content
    # and under the limit with DuckDB chosen by name: the steps DuckDB cannot run keep the
    # job in memory, and it says so
    monkeypatch.delenv("ANONWEB_ENGINE_AUTO_ROWS")
    monkeypatch.setenv("ANONWEB_ENGINE", "duckdb")
    response = client.post(f"/api/v1/datasets/{dataset.pk}/releases/", body, format="json")
    assert response.status_code == 202, response.content
    run_queued()
    job = Job.objects.get(pk=response.json()["job"])
    assert job.status == "succeeded", job.error
    assert job.result["engine"] == "pandas"
