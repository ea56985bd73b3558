"""Celery tasks: take ids, call one service, nothing else."""

from celery.signals import worker_ready

from anonweb.celery import app
from anonweb.jobs.execution import job_execute
from anonweb.jobs.queue import CHECK_QUEUED, RUN_JOB
from anonweb.jobs.services import jobs_check_queued, jobs_reap_stale


# Acknowledged when a worker starts it, not when it ends: the Job row is the truth and claims
# are conditional, so a late acknowledgement bought nothing, and acknowledging a message of a
# broker connection that was reset meanwhile (Redis restarted during the job) crashed the worker
# (kombu: AttributeError 'NoneType' object has no attribute 'hostname'). A job whose message is
# lost before a worker claims it stays queued and is sent again (jobs_check_queued).
@app.task(name=RUN_JOB, acks_late=False, ignore_result=True)
def run_job(job_id: int) -> None:
    job_execute(job_id=job_id, worker=run_job.request.hostname or "worker")


@app.task(name=CHECK_QUEUED, ignore_result=True)
def check_queued() -> None:
    jobs_check_queued()


@app.on_after_finalize.connect
def _connect_reaper(sender, **kwargs):
    @worker_ready.connect(weak=False)
    def reap_on_start(**_kwargs):
        # Jobs left "running" by a worker that was killed are failed when a worker starts.
        jobs_reap_stale()
