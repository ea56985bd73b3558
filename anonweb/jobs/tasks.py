"""Celery tasks: take ids, call one service, nothing else."""

from anonweb.celery import app


# Acknowledged when a worker starts it, not when it ends: the Job row is the truth and claims
# are conditional, so a late acknowledgement bought nothing, and acknowledging a message of a
# broker connection that was reset meanwhile (Redis restarted during the job) crashed the worker
# (kombu: AttributeError 'NoneType' object has no attribute 'hostname'). A job whose message is
# lost before a worker claims it stays queued and is sent again (jobs_check_queued).
@app.task(name="anonweb.jobs.run_job", acks_late=False, ignore_result=True)
def run_job(job_id: int) -> None:
    from anonweb.jobs.services import job_execute

    job_execute(job_id=job_id, worker=run_job.request.hostname or "worker")


@app.task(name="anonweb.jobs.check_queued", ignore_result=True)
def check_queued() -> None:
    from anonweb.jobs.services import jobs_check_queued

    jobs_check_queued()


@app.on_after_finalize.connect
def _connect_reaper(sender, **kwargs):
    from celery.signals import worker_ready

    @worker_ready.connect(weak=False)
    def reap_on_start(**_kwargs):
        # Jobs left "running" by a worker that was killed are failed when a worker starts.
        from anonweb.jobs.services import jobs_reap_stale

        jobs_reap_stale()
