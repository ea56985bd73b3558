"""Every list and detail page runs a number of queries that does not grow with what it lists:
a page with eleven jobs, releases or events costs what it costs with one."""

import pandas as pd
import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from anonweb.audit.services import audit_record
from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.jobs.publication import release_create

pytestmark = pytest.mark.django_db


def _queries(client, url) -> int:
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return len(ctx)


def _add_jobs(dataset, officer, n):
    for i in range(n):
        Job.objects.create(
            team=dataset.team,
            dataset=dataset,
            created_by=officer,
            kind=JobKind.PROFILE if i % 2 else JobKind.ANONYMIZE,
            status=JobStatus.SUCCEEDED if i % 3 else JobStatus.FAILED,
            params={"plan": {"steps": []}} if i % 2 == 0 else {},
        )


def _add_releases(dataset, officer, n):
    releases = []
    for i in range(n):
        job = Job.objects.create(
            team=dataset.team,
            dataset=dataset,
            created_by=officer,
            kind=JobKind.ANONYMIZE,
            status=JobStatus.RUNNING,
        )
        frame = pd.DataFrame({"zip": ["476**", "479**"], "n": [i, i + 1]})
        releases.append(
            release_create(job=job, frame=frame, plan={"steps": []}, report={}, title=f"r{i}")
        )
    return releases


def _pages(dataset, release, job):
    return {
        "home": reverse("home"),
        "dataset list": reverse("datasets:list"),
        "dataset detail": reverse("datasets:detail", args=[dataset.pk]),
        "plan page": reverse("jobs:plan", args=[dataset.pk]),
        "job list": reverse("jobs:list"),
        "job detail": reverse("jobs:detail", args=[job.pk]),
        "release list": reverse("releases:list"),
        "release detail": reverse("releases:detail", args=[release.pk]),
        "audit list": reverse("audit:list"),
    }


def test_no_page_costs_a_query_per_listed_item(client, officer, dataset):
    client.force_login(officer)
    (release,) = _add_releases(dataset, officer, 1)
    _add_jobs(dataset, officer, 1)
    job = Job.objects.filter(dataset=dataset).first()
    pages = _pages(dataset, release, job)
    for url in pages.values():  # warm caches (content types, sessions)
        client.get(url)
    before = {name: _queries(client, url) for name, url in pages.items()}

    _add_jobs(dataset, officer, 10)
    _add_releases(dataset, officer, 10)
    for i in range(10):
        audit_record(actor=officer, team=dataset.team, action="test.event", details={"i": i})
    after = {name: _queries(client, url) for name, url in pages.items()}

    grown = {name: (before[name], after[name]) for name in pages if after[name] > before[name]}
    assert grown == {}, f"queries (1 item -> 11 items) grew on: {grown}"


@pytest.fixture
def parquet_reads(monkeypatch):
    """The columns each read of a dataset's Parquet file asked for (None: all of them)."""
    import pyarrow.parquet as pq

    reads = []
    real_table, real_pandas = pq.read_table, pd.read_parquet

    def read_table(source, *args, columns=None, **kwargs):
        reads.append(columns)
        return real_table(source, *args, columns=columns, **kwargs)

    def read_parquet(path, *args, columns=None, **kwargs):
        reads.append(columns)
        return real_pandas(path, *args, columns=columns, **kwargs)

    monkeypatch.setattr(pq, "read_table", read_table)
    monkeypatch.setattr(pd, "read_parquet", read_parquet)
    return reads


def test_the_plan_page_reads_only_the_tagged_columns(client, officer, dataset, parquet_reads):
    client.force_login(officer)
    response = client.get(reverse("jobs:plan", args=[dataset.pk]))
    assert response.status_code == 200
    assert parquet_reads and None not in parquet_reads
    assert all(len(columns) == 1 for columns in parquet_reads)
    read = {c for columns in parquet_reads for c in columns}
    assert "name" not in read and read <= {"zip", "age", "sex", "disease"}


def test_setting_a_hierarchy_reads_only_its_column(officer, dataset, parquet_reads):
    from anonweb.datasets.services import dataset_set_hierarchy_spec

    zips = ["47677", "47602", "47678", "47905", "47909", "47906"]
    dataset_set_hierarchy_spec(
        user=officer,
        dataset=dataset,
        column="zip",
        spec={"rows": [[z, z[:4] + "*", "*"] for z in zips]},
    )
    assert parquet_reads == [["zip"]]


def test_risk_charts_are_built_once_per_report(client, officer, dataset, monkeypatch):
    from django.core.cache import cache

    from anonweb.common import charts as chart_module
    from anonweb.jobs.services import job_create, job_execute

    cache.clear()
    job = job_create(user=officer, team=dataset.team, kind=JobKind.PROFILE, dataset=dataset)
    job_execute(job_id=job.pk, worker="t")
    built = []
    real = chart_module.risk_charts
    monkeypatch.setattr(chart_module, "risk_charts", lambda risk: built.append(1) or real(risk))
    client.force_login(officer)
    pages = [client.get(reverse("datasets:detail", args=[dataset.pk])) for _ in range(3)]
    assert all(b'class="chart"' in p.content or b"chart-" in p.content for p in pages)
    assert len(built) == 1
    cache.clear()
