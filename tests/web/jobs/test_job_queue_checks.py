"""Queued jobs no worker takes are sent again, then failed visibly; a job that loses its database
connection records that reason itself."""

from datetime import timedelta

import pytest
from django.db import connection
from django.urls import reverse
from django.utils import timezone

from anonweb.audit.models import AuditEvent
from anonweb.jobs import execution, services
from anonweb.jobs.models import Job, JobKind, JobStatus
from tests.conftest import REQUIRE_SERVICES, unavailable


@pytest.fixture
def queued(officer, team):
    return Job.objects.create(
        team=team, created_by=officer, kind=JobKind.DEMO_SLEEP, params={"steps": 1, "delay": 0}
    )


def _age(job: Job, *, created: timedelta, sent: timedelta | None = None) -> None:
    now = timezone.now()
    Job.objects.filter(pk=job.pk).update(
        created_at=now - created, sent_at=None if sent is None else now - sent
    )


@pytest.mark.django_db
def test_a_job_no_worker_took_is_sent_again_and_says_so(queued):
    _age(queued, created=services.QUEUED_RESEND_AFTER * 2, sent=services.QUEUED_RESEND_AFTER * 2)
    assert services.jobs_check_queued() == (1, 0)
    queued.refresh_from_db()
    assert queued.status == JobStatus.QUEUED
    assert "no worker has taken this job yet; sent to the queue again" in queued.message
    assert timezone.now() - queued.sent_at < timedelta(minutes=1)
    # Sent a moment ago: not again until another QUEUED_RESEND_AFTER has passed.
    assert services.jobs_check_queued() == (0, 0)


@pytest.mark.django_db
def test_a_fresh_queued_job_is_left_alone(queued):
    assert services.jobs_check_queued() == (0, 0)
    queued.refresh_from_db()
    assert queued.status == JobStatus.QUEUED and queued.message == ""


@pytest.mark.django_db
def test_a_job_no_worker_took_in_time_fails_visibly_on_its_page(client, officer, queued):
    _age(queued, created=services.QUEUED_FAIL_AFTER + timedelta(minutes=1))
    client.force_login(officer)
    status = client.get(reverse("jobs:status", args=[queued.pk])).json()
    assert status["status"] == "failed"
    assert "No worker took this job within 30 minute(s) of its launch" in status["error"]
    page = client.get(reverse("jobs:detail", args=[queued.pk]))
    assert b"No worker took this job" in page.content
    assert AuditEvent.objects.filter(action="job.failed", target_id=str(queued.pk)).exists()


@pytest.mark.django_db
def test_the_api_fails_a_job_no_worker_took_in_time(client, officer, queued):
    _age(queued, created=services.QUEUED_FAIL_AFTER + timedelta(minutes=1))
    client.force_login(officer)
    body = client.get(f"/api/v1/jobs/{queued.pk}/").json()
    assert body["status"] == "failed" and "No worker took this job" in body["error"]


@pytest.mark.django_db(transaction=True)
def test_a_job_that_loses_its_database_connection_records_why(queued):
    if connection.vendor != "postgresql":
        unavailable(
            "ends the job's own PostgreSQL connection (set DATABASE_URL to PostgreSQL)",
            required=REQUIRE_SERVICES,
        )
    from anonweb.jobs import runners

    def lose_connection(job, progress):
        progress(10, "working")
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_terminate_backend(pg_backend_pid())")
        progress(20, "still working")  # the connection is gone
        return {}

    runners.RUNNERS["test_kind"] = lose_connection
    try:
        Job.objects.filter(pk=queued.pk).update(kind="test_kind")
        execution.job_execute(job_id=queued.pk, worker="w1")
    finally:
        del runners.RUNNERS["test_kind"]
    queued.refresh_from_db()
    assert queued.status == JobStatus.FAILED
    assert "lost its connection to the database" in queued.error
    assert services.jobs_reap_stale() == 0


@pytest.mark.django_db
def test_the_job_lists_show_a_job_no_worker_took_in_time_as_failed(client, officer, queued):
    _age(queued, created=services.QUEUED_FAIL_AFTER + timedelta(minutes=1))
    client.force_login(officer)
    (item,) = client.get("/api/v1/jobs/").json()
    assert item["status"] == "failed" and "No worker took this job" in item["error"]
    queued.refresh_from_db()
    assert queued.status == JobStatus.FAILED


@pytest.mark.django_db
def test_a_running_jobs_poll_reads_it_once_unless_a_check_ran(client, officer, queued):
    """A running job's page polls its status every few seconds: the row is read again only
    when the reaping ran in this request (and may have failed it), and then shows it."""
    from django.core.cache import cache
    from django.test.utils import CaptureQueriesContext

    Job.objects.filter(pk=queued.pk).update(
        status=JobStatus.RUNNING, started_at=timezone.now(), heartbeat_at=timezone.now()
    )
    client.force_login(officer)
    url = reverse("jobs:status", args=[queued.pk])
    client.get(url)  # runs the check (due) and keeps its flag for PAGE_CHECK_SECONDS
    with CaptureQueriesContext(connection) as ctx:
        body = client.get(url).json()
    assert body["status"] == "running"
    reads = [q for q in ctx.captured_queries if 'FROM "jobs_job"' in q["sql"]]
    assert len(reads) == 1

    # the worker went silent: the next check (due again) reaps it, and the poll says so
    Job.objects.filter(pk=queued.pk).update(heartbeat_at=timezone.now() - services.STALE_AFTER * 2)
    cache.delete("anonweb:jobs:stale:checked")
    assert client.get(url).json()["status"] == "failed"
