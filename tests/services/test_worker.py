"""A real Celery worker process runs jobs over the file-system broker and over Redis."""

import pytest

from anonweb.audit.models import AuditEvent
from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.jobs.services import job_create
from tests.services.conftest import wait_for
from tests.web.factories import TeamFactory, member

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def officer():
    from anonweb.accounts.models import Role

    team = TeamFactory()
    return member(team, Role.PRIVACY_OFFICER)


def _launch(officer, steps=3, delay=0.2):
    team = officer.memberships.get().team
    return job_create(
        user=officer, team=team, kind=JobKind.DEMO_SLEEP, params={"steps": steps, "delay": delay}
    )


def _finished(job):
    job.refresh_from_db()
    return job.is_terminal


def _run_to_completion(officer):
    job = _launch(officer)
    wait_for(lambda: _finished(job), timeout=60)
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.progress == 100 and job.result == {"steps": 3}
    return job


def test_filesystem_broker_runs_a_job_on_a_real_worker(officer, broker, start_worker, settings):
    env = broker("filesystem://")
    start_worker(env)
    job = _run_to_completion(officer)
    assert job.worker.startswith("w1@")


@pytest.mark.services
def test_redis_broker_runs_a_job_on_a_real_worker(officer, broker, start_worker, redis_url):
    env = broker(redis_url, {"socket_connect_timeout": 3})
    start_worker(env)
    _run_to_completion(officer)


@pytest.mark.services
def test_a_redelivered_task_runs_the_job_once(officer, broker, start_worker, redis_url):
    from anonweb.jobs.tasks import run_job

    env = broker(redis_url, {"socket_connect_timeout": 3})
    start_worker(env, "w1")
    start_worker(env, "w2")
    job = _launch(officer, steps=4, delay=0.3)
    run_job.apply_async(args=[job.pk])  # the same job sent again, as a redelivery would
    run_job.apply_async(args=[job.pk])
    wait_for(lambda: _finished(job), timeout=60)
    assert job.status == JobStatus.SUCCEEDED and job.attempts == 1
    assert AuditEvent.objects.filter(action="job.succeeded", target_id=str(job.pk)).count() == 1


@pytest.mark.services
def test_a_worker_killed_mid_job_leaves_a_failed_job_and_nothing_published(
    officer, broker, start_worker, redis_url, settings, monkeypatch
):
    from anonweb.jobs import services

    env = broker(redis_url, {"socket_connect_timeout": 3})
    worker = start_worker(env)
    job = _launch(officer, steps=40, delay=0.25)
    wait_for(lambda: Job.objects.get(pk=job.pk).progress >= 10, timeout=60)
    worker.kill()
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING
    monkeypatch.setattr(services, "STALE_AFTER", services.STALE_AFTER.__class__(seconds=1))
    wait_for(lambda: services.jobs_reap_stale() or _finished(job), timeout=30)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and "worker stopped" in job.error
    assert not hasattr(job, "release") or job.release is None


def test_a_launch_with_the_broker_down_fails_visibly(officer, broker):
    # Nothing listens on port 1: the launch must fail fast and say so on the job.
    broker("redis://127.0.0.1:1/0", {"socket_connect_timeout": 1, "max_retries": 0})
    job = _launch(officer)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert "queue is unreachable" in job.error
