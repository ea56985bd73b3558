"""What each job kind does. A runner gets the job and a progress callback and returns a
JSON-safe result; it raises CoreError for bad input (shown to the user as it is)."""

from __future__ import annotations

import time
from collections.abc import Callable

from anonweb.jobs.models import Job, JobKind

Progress = Callable[[int, str], None]
RUNNERS: dict[str, Callable[[Job, Progress], dict]] = {}


def runner(kind: str):
    def register(fn):
        RUNNERS[kind] = fn
        return fn

    return register


@runner(JobKind.DEMO_SLEEP)
def run_demo_sleep(job: Job, progress: Progress) -> dict:
    steps = int(job.params.get("steps", 5))
    delay = float(job.params.get("delay", 0.5))
    for i in range(steps):
        time.sleep(delay)
        progress(int(100 * (i + 1) / steps), f"step {i + 1} of {steps}")
    return {"steps": steps}


@runner(JobKind.PROFILE)
def run_profile(job: Job, progress: Progress) -> dict:
    from anonweb.datasets.services import dataset_profile

    return dataset_profile(dataset=job.dataset, progress=progress)
