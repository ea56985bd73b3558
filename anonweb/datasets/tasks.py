"""Periodic work on datasets (run by the worker's embedded beat scheduler)."""

from anonweb.celery import app


@app.task(name="anonweb.datasets.purge_expired", ignore_result=True)
def purge_expired_datasets() -> None:
    from anonweb.datasets.services import datasets_purge_expired

    datasets_purge_expired()
