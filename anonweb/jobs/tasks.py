"""Celery tasks: take ids, call one service, nothing else."""

from anonweb.celery import app


@app.task(
    name="anonweb.jobs.run_job", acks_late=True, reject_on_worker_lost=True, ignore_result=True
)
def run_job(job_id: int) -> None:
    from anonweb.jobs.services import job_execute

    job_execute(job_id=job_id, worker=run_job.request.hostname or "worker")


@app.on_after_finalize.connect
def _connect_reaper(sender, **kwargs):
    from celery.signals import worker_ready

    @worker_ready.connect(weak=False)
    def reap_on_start(**_kwargs):
        # Jobs left "running" by a worker that was killed are failed when a worker starts.
        from anonweb.jobs.services import jobs_reap_stale

        jobs_reap_stale()
