import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from anonweb.audit.models import AuditEvent
from anonweb.jobs import execution, services
from anonweb.jobs.models import Job, JobKind, JobStatus

pytestmark = pytest.mark.django_db


@pytest.fixture
def job(officer, team):
    return Job.objects.create(
        team=team, created_by=officer, kind=JobKind.DEMO_SLEEP, params={"steps": 2, "delay": 0}
    )


@pytest.fixture
def run_with(job):
    """Run ``job`` with a stand-in runner (registered under a kind of its own for the test)."""
    from anonweb.jobs import runners

    def run(func):
        runners.RUNNERS["test_kind"] = func
        try:
            Job.objects.filter(pk=job.pk).update(kind="test_kind")
            execution.job_execute(job_id=job.pk, worker="w1")
        finally:
            del runners.RUNNERS["test_kind"]
        job.refresh_from_db()
        return job

    return run


def test_job_page_works(client, officer, job):
    client.force_login(officer)
    page = client.get(reverse("jobs:detail", args=[job.pk]))
    assert page.status_code == 200
    assert b'data-testid="progress"' in page.content
    status = client.get(reverse("jobs:status", args=[job.pk])).json()
    assert status["status"] == "queued" and status["progress"] == 0 and status["terminal"] is False


def test_job_pages_hide_other_teams(client, outsider, job):
    client.force_login(outsider)
    assert client.get(reverse("jobs:detail", args=[job.pk])).status_code == 404
    assert client.get(reverse("jobs:status", args=[job.pk])).status_code == 404
    assert client.post(reverse("jobs:cancel", args=[job.pk])).status_code == 404


def test_analysts_see_no_jobs(client, analyst, job):
    client.force_login(analyst)
    assert client.get(reverse("jobs:detail", args=[job.pk])).status_code == 404


def test_execute_runs_and_records(job):
    execution.job_execute(job_id=job.pk, worker="w1")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED
    assert job.progress == 100
    assert job.result == {"steps": 2}
    assert job.started_at and job.finished_at and job.worker == "w1"
    assert AuditEvent.objects.filter(action="job.succeeded", target_id=str(job.pk)).exists()


def test_a_second_claim_does_nothing(job):
    assert services.job_claim(job_id=job.pk, worker="w1") is True
    assert services.job_claim(job_id=job.pk, worker="w2") is False
    execution.job_execute(job_id=job.pk, worker="w2")  # redelivered task
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING and job.worker == "w1" and job.attempts == 1


def test_a_finished_job_is_never_run_again(job):
    execution.job_execute(job_id=job.pk, worker="w1")
    finished = Job.objects.get(pk=job.pk).finished_at
    execution.job_execute(job_id=job.pk, worker="w2")
    job.refresh_from_db()
    assert job.worker == "w1" and job.finished_at == finished
    assert AuditEvent.objects.filter(action="job.succeeded").count() == 1


def test_a_running_job_whose_worker_went_silent_is_failed_by_the_reaper(client, officer, job):
    assert services.job_claim(job_id=job.pk, worker="dead")
    assert not services.job_claim(job_id=job.pk, worker="w2")  # running: nobody else takes it
    assert services.jobs_reap_stale() == 0  # heartbeat still fresh
    Job.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - services.STALE_AFTER * 2)
    client.force_login(officer)
    status = client.get(reverse("jobs:status", args=[job.pk])).json()  # viewing it reaps it
    assert status["status"] == "failed" and "worker stopped" in status["error"]
    execution.job_execute(job_id=job.pk, worker="w3")  # a late redelivery does nothing
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.worker == "dead"


@pytest.mark.django_db(transaction=True)
def test_the_heartbeat_keeps_a_long_quiet_job_alive(job, monkeypatch, run_with):
    # Committed rows: the heartbeat thread has its own database connection.
    import time

    monkeypatch.setattr(execution, "HEARTBEAT_SECONDS", 0.05)
    beats = []

    def quiet(j, progress):
        first = Job.objects.get(pk=j.pk).heartbeat_at
        time.sleep(0.5)
        beats.append(Job.objects.get(pk=j.pk).heartbeat_at > first)
        return {}

    run_with(quiet)
    assert beats == [True]


def test_cancel_a_queued_job(client, officer, job):
    client.force_login(officer)
    client.post(reverse("jobs:cancel", args=[job.pk]))
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED
    execution.job_execute(job_id=job.pk, worker="w1")
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED and job.started_at is None


def test_cancel_a_running_job_is_honoured_at_the_next_progress_report(officer, job, run_with):

    def runner(j, progress):
        services.job_cancel(user=officer, job=j)
        progress(50, "half")
        raise AssertionError("progress must raise after a cancel")

    run_with(runner)
    assert job.status == JobStatus.CANCELLED
    assert "nothing was published" in job.message


def test_cancel_needs_the_officer_role(client, steward, job):
    client.force_login(steward)
    assert client.post(reverse("jobs:cancel", args=[job.pk])).status_code == 403
    job.refresh_from_db()
    assert job.status == JobStatus.QUEUED


def test_bad_input_fails_the_job_with_the_core_message_for_officers(job, run_with):
    from anonweb.core.errors import DataError

    def runner(j, progress):
        raise DataError("unknown column: zipcode")

    run_with(runner)
    assert job.status == JobStatus.FAILED and job.error_detail == "unknown column: zipcode"
    # everyone else reads what failed, in words built from facts
    assert "does not hold what the job needs" in job.error and "zipcode" not in job.error


def test_an_internal_error_gives_a_reference_not_a_traceback(job, run_with):

    def runner(j, progress):
        raise KeyError("secret-internal-detail")

    run_with(runner)
    assert job.status == JobStatus.FAILED
    assert "reference" in job.error and "secret-internal-detail" not in job.error


def test_a_broker_that_is_down_fails_the_launch_visibly(officer, team, settings, monkeypatch):
    from anonweb.jobs import queue

    def down(*args, **kwargs):
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(queue.app, "send_task", down)
    job = Job.objects.create(team=team, created_by=officer, kind=JobKind.DEMO_SLEEP)
    services.job_enqueue(job_id=job.pk)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert "queue is unreachable" in job.error


def test_queue_check_launch(client, officer, django_capture_on_commit_callbacks):
    client.force_login(officer)
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(reverse("jobs:queue_check"))
    job = Job.objects.get()
    assert response.url == reverse("jobs:detail", args=[job.pk])
    assert job.kind == JobKind.DEMO_SLEEP


def test_the_queue_sends_jobs_to_the_task_the_worker_runs():
    """The services enqueue by task name (anonweb.jobs.queue), without importing the tasks."""
    from anonweb.celery import app
    from anonweb.jobs import queue, tasks

    assert app.tasks[queue.RUN_JOB].name == tasks.run_job.name == queue.RUN_JOB
    assert app.tasks[queue.CHECK_QUEUED].name == tasks.check_queued.name == queue.CHECK_QUEUED


def test_the_queue_check_button_is_for_privacy_officers_only(client, officer, steward):
    """Read from the roles every page reads: the job list asks the database for its jobs alone."""
    client.force_login(officer)
    client.get(reverse("jobs:list"))  # the roles are kept from here on
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(reverse("jobs:list"))
    assert b'data-testid="queue-check"' in response.content
    assert [q["sql"] for q in ctx if "accounts_" in q["sql"]] == []
    client.force_login(steward)
    assert b'data-testid="queue-check"' not in client.get(reverse("jobs:list")).content
