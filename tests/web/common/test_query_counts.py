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


@pytest.fixture(autouse=True)
def _queue_checks_off(queue_checks_off):
    """Query counts measure the page (see the fixture)."""


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
    # New releases are a new state for the release's gate, checked once on the next view and
    # kept: that first view may cost more, the ones after it may not.
    for url in pages.values():
        client.get(url)
    after = {name: _queries(client, url) for name, url in pages.items()}

    grown = {name: (before[name], after[name]) for name in pages if after[name] > before[name]}
    assert grown == {}, f"queries (1 item -> 11 items) grew on: {grown}"


@pytest.mark.parametrize("page", ["home", "job list", "dataset detail"])
def test_lists_read_no_json_document_of_the_rows_they_list(client, officer, dataset, page):
    """A list of links shows names and states: a job's parameters and result (a profile's is
    the whole risk profile), a dataset's column statistics and a release's reports are not
    read for it."""
    client.force_login(officer)
    (release,) = _add_releases(dataset, officer, 1)
    _add_jobs(dataset, officer, 3)
    url = _pages(dataset, release, Job.objects.filter(dataset=dataset).first())[page]
    client.get(url)
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200
    # a list is read a slice at a time; one object by its key (Django's get) is LIMIT 21
    listed = [
        q["sql"]
        for q in ctx.captured_queries
        if " LIMIT " in q["sql"] and not q["sql"].endswith(" LIMIT 21")
    ]
    assert listed  # the lists' own queries
    for sql in listed:
        selected = sql.split(" FROM ")[0]
        for document in (
            '"jobs_job"."params"',
            '"jobs_job"."result"',
            '"datasets_dataset"."columns"',
            '"releases_release"."report"',
            '"releases_release"."published_report"',
        ):
            assert document not in selected, (page, document, sql[:300])


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

    from anonweb.jobs import profile_page as chart_module
    from anonweb.jobs.execution import job_execute
    from anonweb.jobs.services import job_create

    job = job_create(user=officer, team=dataset.team, kind=JobKind.PROFILE, dataset=dataset)
    job_execute(job_id=job.pk, worker="t")
    cache.clear()  # the job built them as it finished: the first view builds them again
    built = []
    real = chart_module.risk_charts
    monkeypatch.setattr(chart_module, "risk_charts", lambda risk: built.append(1) or real(risk))
    client.force_login(officer)
    pages = [client.get(reverse("datasets:detail", args=[dataset.pk])) for _ in range(3)]
    assert all(b'class="chart"' in p.content or b"chart-" in p.content for p in pages)
    assert len(built) == 1
    cache.clear()


def _add_conflict(found_by, others, position=0):
    """A conflict finding of ``found_by`` with ``others``, linked as the release job links it."""
    from anonweb.releases.models import ConflictFinding

    finding = ConflictFinding.objects.create(
        release=found_by,
        position=position,
        type="differencing",
        records=1,
        columns=["n"],
        labels={f"release {r.version}": r.pk for r in others},
        explanation="release 1 and release 2 differ in one record",
        facts={"l_by_release": {str(r.pk): 1 for r in others}},
    )
    finding.involved.set([found_by, *others])
    return finding


def _api_queries(user, url) -> int:
    from tests.web.api.test_api_releases import api

    client = api(user)
    client.get(url)  # warm caches (content types)
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return len(ctx)


def test_the_release_list_api_costs_the_same_for_2_and_12_releases(
    client, officer, steward, analyst, dataset
):
    from anonweb.releases.services import release_approve, release_reject

    def add(n):
        releases = _add_releases(dataset, officer, n)
        # In conflict with each other (one finding naming all, one naming a pair), some
        # approved, one rejected: every kind of row the list writes.
        _add_conflict(releases[-1], releases[:-1])
        _add_conflict(releases[-1], releases[:1], position=1)
        release_approve(user=steward, release=releases[0], override="accepted for this test " * 2)
        release_reject(user=steward, release=releases[-1], note="no")
        return releases

    users = {"officer": officer, "steward": steward, "analyst": analyst}
    pages = {
        "api list": "/api/v1/releases/",
        "api list of the dataset": f"/api/v1/releases/?dataset={dataset.pk}",
    }
    add(2)
    two = {(u, p): _api_queries(user, url) for u, user in users.items() for p, url in pages.items()}
    client.force_login(officer)
    web = {"release list": reverse("releases:list")}
    web["dataset detail"] = reverse("datasets:detail", args=[dataset.pk])
    for url in web.values():
        client.get(url)
    two_web = {name: _queries(client, url) for name, url in web.items()}

    add(10)
    twelve = {
        (u, p): _api_queries(user, url) for u, user in users.items() for p, url in pages.items()
    }
    twelve_web = {name: _queries(client, url) for name, url in web.items()}
    grown = {key: (two[key], twelve[key]) for key in two if twelve[key] != two[key]}
    grown.update({k: (two_web[k], twelve_web[k]) for k in web if twelve_web[k] != two_web[k]})
    assert grown == {}, f"queries (2 releases -> 12) changed on: {grown}"


def test_a_page_of_a_list_costs_the_same_for_60_and_600_objects(
    client, officer, steward, analyst, dataset
):
    from anonweb.releases.models import ReleaseStatus
    from tests.web.common.test_list_paging import add_datasets, add_events, add_jobs, add_releases

    statuses = (ReleaseStatus.APPROVED, ReleaseStatus.PENDING, ReleaseStatus.REJECTED)

    def add(n):  # n of each kind that each user sees (an analyst: one release in three)
        add_releases(dataset, 3 * n, statuses)
        add_datasets(dataset.team, officer, n)
        add_jobs(dataset.team, officer, n)
        add_events(dataset.team, officer, n)

    lists = ("releases:list", "datasets:list", "jobs:list", "audit:list")
    urls = [reverse(name) + query for name in lists for query in ("", "?page=2", "?page=x")]
    urls.append(reverse("audit:list") + "?action=test.event&page=2")
    urls.append(reverse("releases:list") + f"?status=approved&dataset={dataset.pk}&page=2")

    def costs():
        counts = {}
        for user in (officer, steward, analyst):
            client.force_login(user)
            for url in urls:
                response = client.get(url)  # warm caches (content types, sessions)
                if response.status_code == 200:
                    counts[(user.username, url)] = _queries(client, url)
        return counts

    add(60)
    few = costs()
    add(540)
    many = costs()
    assert few.keys() == many.keys() and len(few) > 2 * len(urls), sorted(few)
    grown = {key: (few[key], many[key]) for key in few if many[key] != few[key]}
    assert grown == {}, f"queries (60 objects -> 600) changed on: {grown}"


def test_the_plan_and_dataset_pages_read_the_stored_table_once(
    client, officer, dataset, parquet_reads, django_capture_on_commit_callbacks
):
    """The distinct values a suggestion needs and the preview rows are read on the first view
    and kept; a purge forgets them with the files (they are the source's values)."""
    from django.core.cache import cache

    from anonweb.datasets.storage import _kept_key
    from anonweb.jobs.retention import dataset_purge

    client.force_login(officer)
    plan = reverse("jobs:plan", args=[dataset.pk])
    detail = reverse("datasets:detail", args=[dataset.pk])
    first = client.get(plan)
    read_once = list(parquet_reads)
    assert read_once and client.get(detail).status_code == 200
    assert b"47677" in client.get(detail).content  # the preview, for the officer
    again = client.get(plan)
    assert again.status_code == first.status_code == 200
    assert again.context["form"].initial == first.context["form"].initial
    assert parquet_reads == read_once  # the plan page's columns, once; no further read
    kept = [_kept_key(dataset.storage_key, part) for part in ("distinct", "head")]
    assert all(cache.get(key) is not None for key in kept)

    with django_capture_on_commit_callbacks(execute=True):
        dataset_purge(user=officer, dataset=dataset, reason="study closed")
    assert all(cache.get(key) is None for key in kept)
    assert b"47677" not in client.get(detail).content


def test_release_lists_read_no_release_documents(client, officer, dataset):
    """The list and the home page show no report, plan or gate: they do not read them."""
    releases = _add_releases(dataset, officer, 3)
    client.force_login(officer)
    for url in (reverse("releases:list"), reverse("home")):
        client.get(url)
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(url)
        assert response.status_code == 200
        assert reverse("releases:detail", args=[releases[-1].pk]).encode() in response.content
        release_reads = [q["sql"] for q in ctx.captured_queries if '"releases_release"' in q["sql"]]
        assert release_reads, url
        for column in ("report", "published_report", "plan", "gate"):
            assert not any(f'"releases_release"."{column}"' in sql for sql in release_reads), (
                url,
                column,
            )
