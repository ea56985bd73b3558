"""Sending work to the job queue, by task name: the services enqueue without importing the
Celery tasks, which call the services (so neither imports the other)."""

from __future__ import annotations

from anonweb.celery import app

RUN_JOB = "anonweb.jobs.run_job"
CHECK_QUEUED = "anonweb.jobs.check_queued"


def send_run_job(job_id: int) -> None:
    """Send one job to a worker; raises whatever the broker client raises when it is down."""
    app.send_task(RUN_JOB, args=[job_id], retry=False)
