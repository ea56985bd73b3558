"""Periodic upkeep run by the worker's embedded beat scheduler, and once when a worker starts."""

import logging

from anonweb.celery import app
from anonweb.releases.storage_sweep import sweep_storage

log = logging.getLogger(__name__)


@app.task(name="anonweb.common.sweep_storage", ignore_result=True)
def sweep_storage_task() -> None:
    removed = sweep_storage()
    if removed:
        log.info("removed %d leftover(s) of interrupted writes: %s", len(removed), removed)


@app.on_after_finalize.connect
def _connect_sweep(sender, **kwargs):
    from celery.signals import worker_ready

    @worker_ready.connect(weak=False)
    def sweep_on_start(**_kwargs):
        # What a killed worker left half-written is removed when a worker starts.
        sweep_storage_task()
