"""Periodic work on datasets (run by the worker's embedded beat scheduler)."""

from anonweb.celery import app
from anonweb.jobs.retention import datasets_purge_expired


@app.task(name="anonweb.datasets.purge_expired", ignore_result=True)
def purge_expired_datasets() -> None:
    datasets_purge_expired()
