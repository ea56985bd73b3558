"""Periodic upkeep run by the worker's embedded beat scheduler."""

import logging

from anonweb.celery import app

log = logging.getLogger(__name__)


@app.task(name="anonweb.common.sweep_storage", ignore_result=True)
def sweep_storage_task() -> None:
    from anonweb.common.storage_sweep import sweep_storage

    removed = sweep_storage()
    if removed:
        log.info("removed %d leftover(s) of interrupted writes: %s", len(removed), removed)
