"""Running a job on a worker: claim it, run its kind's runner, record how it ended."""

from __future__ import annotations

import logging
import threading
import traceback
import uuid
from collections.abc import Callable

from django.db import InterfaceError, OperationalError, connection
from django.utils import timezone

from anonweb.core.errors import CoreError
from anonweb.core.raw_values import Failure, failure_of
from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.jobs.profile_page import profile_section_warm
from anonweb.jobs.runners import RUNNERS
from anonweb.jobs.services import (
    JobCancelled,
    JobLost,
    _set_terminal,
    job_claim,
    job_progress,
)

log = logging.getLogger(__name__)

# A running job updates its heartbeat this often (seconds); the reaper fails one silent for
# anonweb.jobs.services.STALE_AFTER.
HEARTBEAT_SECONDS = 5.0


def job_execute(*, job_id: int, worker: str) -> None:
    """Claim and run a job. A job someone else claimed, or one already finished, is left alone."""
    if not job_claim(job_id=job_id, worker=worker):
        log.info("job %s: not claimed (already taken, finished or cancelled)", job_id)
        return
    job = Job.objects.select_related("team", "dataset").get(id=job_id)
    running = (JobStatus.RUNNING,)
    stop_heartbeat = _start_heartbeat(job_id)
    try:
        run = RUNNERS[job.kind]

        def progress(pct: int, msg: str = "") -> None:
            job_progress(job_id=job_id, percent=pct, message=msg)

        result = run(job, progress)
    except JobLost:
        log.warning(
            "job %s: finished by someone else (reaped while this worker was stalled); "
            "its output was discarded",
            job_id,
        )
    except JobCancelled:
        _set_terminal(
            job_id=job_id,
            status=JobStatus.CANCELLED,
            from_statuses=running,
            message="cancelled; nothing was published",
        )
    except CoreError as exc:
        columns = job.dataset.column_names if job.dataset is not None else []
        _set_terminal(
            job_id=job_id,
            status=JobStatus.FAILED,
            from_statuses=running,
            failure=failure_of(
                exc, columns=columns, kind="unreadable" if job.kind == JobKind.PARSE else None
            ),
        )
    except (OperationalError, InterfaceError) as exc:
        # The database ended the connection (a restart, a failover): the failure is recorded on
        # a new one, with this reason, rather than left for the reaper to call a lost worker.
        log.error("job %s: lost its database connection: %s", job_id, exc)
        connection.close()
        _set_terminal(
            job_id=job_id,
            status=JobStatus.FAILED,
            from_statuses=running,
            failure=Failure.stated(
                "database",
                "The job lost its connection to the database while it ran (the database "
                "restarted or ended the connection); nothing was published. Launch it again.",
            ),
        )
    except Exception:
        ref = uuid.uuid4().hex[:8]
        log.error("job %s failed (ref %s):\n%s", job_id, ref, traceback.format_exc())
        _set_terminal(
            job_id=job_id,
            status=JobStatus.FAILED,
            from_statuses=running,
            failure=Failure.stated(
                "internal",
                f"An internal error stopped the job (reference {ref}); nothing was published. "
                "An administrator can find the details in the worker log under that reference.",
            ),
        )
    else:
        # Past the runner's last progress report the work is done, so a late cancellation
        # request no longer applies. A runner that published output has already marked the job
        # succeeded in the same transaction (job_complete_claimed); then this changes nothing.
        _set_terminal(
            job_id=job_id, status=JobStatus.SUCCEEDED, from_statuses=running, result=result
        )
        if job.kind == JobKind.PROFILE:
            # As a release's page parts are built at publication: the first readers of the
            # dataset page, often many at once, then find its risk section ready.
            profile_section_warm(job_id=job_id)
    finally:
        stop_heartbeat()


def _start_heartbeat(job_id: int) -> Callable[[], None]:
    stop = threading.Event()

    def beat() -> None:
        try:
            while not stop.wait(HEARTBEAT_SECONDS):
                Job.objects.filter(id=job_id, status=JobStatus.RUNNING).update(
                    heartbeat_at=timezone.now()
                )
        except Exception:  # a failed beat must never kill the job; the reaper is the backstop
            log.warning("job %s: heartbeat failed", job_id, exc_info=True)
        finally:
            connection.close()

    thread = threading.Thread(target=beat, name=f"job-{job_id}-heartbeat", daemon=True)
    thread.start()

    def halt() -> None:
        stop.set()
        thread.join(timeout=HEARTBEAT_SECONDS + 5)

    return halt
