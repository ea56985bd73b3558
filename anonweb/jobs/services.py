"""Job life cycle: create, enqueue, claim, report progress, finish, cancel.

Every state change is a conditional update (``filter(status=...).update(...)``) so a redelivered
task or a second worker cannot run a job twice, and a cancelled job never turns back into a
running one.
"""

from __future__ import annotations

import logging
import uuid
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from anonweb.accounts.models import Role
from anonweb.accounts.selectors import require_role, user_has_role
from anonweb.audit.services import audit_record
from anonweb.common.files import files
from anonweb.core.errors import CoreError, ParameterError, PlanError
from anonweb.core.raw_values import Failure
from anonweb.core.release.report import public_plan
from anonweb.datasets.ingest import dataset_store
from anonweb.datasets.services import (
    dataset_parse_failed,
    dataset_set_hierarchy_spec,
    hierarchy_file_bytes,
    hierarchy_from_bytes,
    require_ready,
)
from anonweb.datasets.storage import dataset_files_remove, dataset_prefix
from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.jobs.planning import plan_privacy, unconfirmed_problems, validate_web_plan
from anonweb.jobs.queue import send_run_job
from anonweb.releases.budget import charge_refund_unspent, charge_reserve, check_budget, ledger_lock
from anonweb.releases.recipients import recipients_check
from anonweb.releases.selectors import release_get_for_user, release_is_staff

if TYPE_CHECKING:
    from collections.abc import Iterable

    from django.contrib.auth.models import User
    from django.core.files.uploadedfile import UploadedFile

    from anonweb.accounts.models import Team
    from anonweb.datasets.models import Dataset

log = logging.getLogger(__name__)

# A running job sends a heartbeat (anonweb.jobs.execution) from a side thread, whatever its
# runner is doing; one silent for STALE_AFTER lost its worker (killed, machine gone) and is
# failed by the reaper, so it never sits "running" for ever.
STALE_AFTER = timedelta(seconds=settings.ANONWEB_JOB_STALE_SECONDS)
# A queued job is sent again when no worker took it for QUEUED_RESEND_AFTER (a worker that was
# down, a message lost with a broker restart), and failed with the reason after QUEUED_FAIL_AFTER.
QUEUED_RESEND_AFTER = timedelta(seconds=settings.ANONWEB_JOB_QUEUED_RESEND_SECONDS)
QUEUED_FAIL_AFTER = timedelta(seconds=settings.ANONWEB_JOB_QUEUED_FAIL_SECONDS)


class JobCancelled(Exception):
    """Cancellation was requested while the job ran."""


class JobLost(Exception):
    """The job no longer runs under this worker's claim (the reaper failed it, or it finished)."""


def job_claim_held(*, job: Job) -> bool:
    """Whether ``job`` still runs under the claim this worker made (same worker, same attempt)."""
    return Job.objects.filter(
        id=job.pk, status=JobStatus.RUNNING, worker=job.worker, attempts=job.attempts
    ).exists()


def job_complete_claimed(*, job: Job, result: dict) -> None:
    """Mark a running job succeeded inside the transaction that publishes its output.

    The update is conditional on the claim this worker made, so output is never published for
    a job the reaper failed while this worker was paused ("nothing was published" stays true),
    and once the output is committed the job is already succeeded: the reaper cannot fail it
    afterwards. Raises JobLost, rolling the caller's transaction back, when the claim is gone."""
    if not _set_terminal(
        job_id=job.pk,
        status=JobStatus.SUCCEEDED,
        from_statuses=(JobStatus.RUNNING,),
        result=result,
        claim=(job.worker, job.attempts),
    ):
        raise JobLost(f"job {job.pk} is no longer running under this worker's claim")


def job_create(
    *,
    user: User,
    team: Team,
    kind: str,
    dataset: Dataset | None = None,
    params: dict | None = None,
    roles: tuple[str, ...] = (Role.PRIVACY_OFFICER,),
) -> Job:
    """Create a queued job and enqueue it once the transaction commits (for a member with one
    of ``roles``: privacy officers unless the caller says otherwise)."""

    if not any(user_has_role(user=user, team=team, role=r) for r in roles):
        require_role(user=user, team=team, role=roles[0])
    if dataset is not None and kind != JobKind.PARSE:
        require_ready(dataset)
        if dataset.is_purged:
            raise CoreError(
                f"The raw data of {dataset.name} has been purged; nothing can be run on it."
            )
    with transaction.atomic():
        job = Job.objects.create(
            team=team,
            created_by=user,
            dataset=dataset,
            kind=kind,
            params=params or {},
            message="waiting for a worker",
        )
        audit_record(
            actor=user,
            team=team,
            action="job.created",
            target=job,
            details={
                "kind": kind,
                "dataset_id": getattr(dataset, "pk", None),
                "params": job_public_params(params or {}),
            },
        )
        transaction.on_commit(lambda: job_enqueue(job_id=job.pk))
    return job


def dataset_upload(
    *,
    user: User,
    team: Team,
    upload: UploadedFile,
    name: str,
    description: str = "",
    sep: str | None = None,
    sheet: str | None = None,
    decimal: str | None = None,
) -> tuple[Dataset, Job]:
    """Store an upload and queue the job that reads it; returns ``(dataset, job)``.

    The one entry point of the upload page and of ``POST /api/v1/datasets/``: the request
    does no reading of the file beyond moving it into place."""
    key = None
    try:
        with transaction.atomic():
            dataset = dataset_store(
                user=user, team=team, upload=upload, name=name, description=description, sheet=sheet
            )
            key = dataset.storage_key
            options = {"sep": sep, "decimal": decimal if decimal != "." else None}
            job = job_create(
                user=user,
                team=team,
                kind=JobKind.PARSE,
                dataset=dataset,
                params={key: value for key, value in options.items() if value},
            )
    except BaseException:
        if key is not None:
            dataset_files_remove(key)
        raise
    return dataset, job


# A hierarchy file with more lines than this is read by a job (a million lines take most of a
# minute, past a web server's request timeout); a smaller one is read in the request.
HIERARCHY_IMMEDIATE_LINES = 50_000


def pending_hierarchy_name(dataset: Dataset, name: str) -> str:
    """Where an uploaded hierarchy file waits for its job in the storage (removed when the job
    ends), so that a worker on another host reads it."""
    return f"{dataset_prefix(dataset.storage_key)}/pending-hierarchies/{name}"


def hierarchy_upload(
    *, user: User, dataset: Dataset, column: str, upload: UploadedFile
) -> Job | None:
    """Attach an uploaded ARX hierarchy file to a column: at once when it is small (None), or
    through a job that reads it in the background (the job)."""
    require_role(user=user, team=dataset.team, role=Role.PRIVACY_OFFICER)
    raw = hierarchy_file_bytes(upload)
    if raw.count(b"\n") < HIERARCHY_IMMEDIATE_LINES:
        rows = hierarchy_from_bytes(raw, column=column).to_rows()
        dataset_set_hierarchy_spec(user=user, dataset=dataset, column=column, spec={"rows": rows})
        return None
    require_ready(dataset)
    if column not in dataset.column_names:
        raise CoreError(f"unknown column: {column}")
    name = f"{uuid.uuid4().hex}.txt"
    pending = pending_hierarchy_name(dataset, name)
    files().put(pending, raw)
    try:
        return job_create(
            user=user,
            team=dataset.team,
            kind=JobKind.HIERARCHY,
            dataset=dataset,
            params={"column": column, "file": name},
        )
    except BaseException:
        files().delete(pending)
        raise


def anonymize_launch(
    *,
    user: User,
    dataset: Dataset,
    plan: dict,
    title: str,
    purpose: str = "",
    recipient: str = "",
    recipients: object = None,
) -> Job:
    """Queue a release plan after reserving its privacy cost on the source's ledger.

    ``purpose`` (why the data goes out) and ``recipient`` (to whom) are required: the steward
    reads them beside the findings, and analysts see the purpose where they download.
    ``recipients`` names who receives the release (analysts of the team and ``group:NAME``
    groups of the team; none: every analyst of the team); a name that is neither is refused.

    The ledger is locked while it is read and the charge written (one transaction), so two
    launches cannot both fit into the same remaining budget (see ``anonweb.releases.budget``)."""

    purpose, recipient = (purpose or "").strip(), (recipient or "").strip()
    missing = [n for n, v in (("purpose", purpose), ("recipient", recipient)) if not v]
    if missing:
        raise ParameterError(
            f"state the release's {' and '.join(missing)}: why the data goes out and to whom"
        )
    names = recipients_check(team=dataset.team, names=recipients)
    parsed = validate_web_plan(dataset, plan)
    unconfirmed = unconfirmed_problems(plan)
    if unconfirmed:
        raise PlanError(unconfirmed)
    cost = plan_privacy(parsed)["total"]
    params = {
        "plan": plan,
        "title": title,
        "purpose": purpose[:2000],
        "recipient": recipient[:200],
    }
    if names:
        params["recipients"] = list(names)
    charged = any(float(v) > 0 for v in cost.values())
    if charged:
        params["privacy_cost"] = cost
    with transaction.atomic():
        if charged:
            check_budget(ledger_lock(dataset), cost, name=dataset.name)
        job = job_create(
            user=user, team=dataset.team, kind=JobKind.ANONYMIZE, dataset=dataset, params=params
        )
        if charged:
            charge_reserve(dataset=dataset, job=job, cost=cost)
        return job


def job_public_params(params: dict) -> dict:
    """Parameters as recorded in the audit trail, which every team member can read: a plan as
    it is published with a release (hierarchy tables and codebooks, which hold source values,
    summarised); secrets and seeds never."""

    out = {k: v for k, v in params.items() if k not in ("secrets", "seed")}
    if isinstance(out.get("plan"), dict):
        out["plan"] = public_plan(out["plan"])
    return out


def job_enqueue(*, job_id: int) -> None:
    """Send the task; a broker that is down fails the job visibly instead of hanging."""
    Job.objects.filter(id=job_id, status=JobStatus.QUEUED).update(sent_at=timezone.now())
    try:
        send_run_job(job_id)
    except Exception as exc:  # kombu raises OperationalError, OSError, TimeoutError...
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        log.warning("job %s: could not reach the broker: %s", job_id, reason)
        _set_terminal(
            job_id=job_id,
            status=JobStatus.FAILED,
            from_statuses=(JobStatus.QUEUED,),
            failure=Failure.stated(
                "queue_unreachable",
                f"The job queue is unreachable, so the job was not started ({reason}). "
                "Check that the broker (CELERY_BROKER_URL) and a worker are running, then launch "
                "it again.",
            ),
        )


def job_claim(*, job_id: int, worker: str) -> bool:
    now = timezone.now()
    return bool(
        Job.objects.filter(id=job_id, status=JobStatus.QUEUED, cancel_requested=False).update(
            status=JobStatus.RUNNING,
            started_at=now,
            heartbeat_at=now,
            worker=worker[:200],
            progress=0,
            message="started",
            attempts=F("attempts") + 1,
        )
    )


def job_progress(*, job_id: int, percent: int, message: str = "") -> None:
    """Record progress; raise JobCancelled if cancellation was requested."""
    percent = max(0, min(100, int(percent)))
    updated = Job.objects.filter(
        id=job_id, status=JobStatus.RUNNING, cancel_requested=False
    ).update(progress=percent, message=message[:300], heartbeat_at=timezone.now())
    if not updated:
        raise JobCancelled()


def _set_terminal(
    *,
    job_id: int,
    status: str,
    from_statuses: Iterable[str],
    failure: Failure | None = None,
    result: dict[str, Any] | None = None,
    message: str = "",
    claim: tuple[str, int] | None = None,
) -> bool:
    """End a job. A failure is stored twice: ``error``, the summary built from facts (the kind
    of failure, the columns concerned) that every reader of the job sees, and ``error_detail``,
    the message as written, which may quote the source (privacy officers only; a purge removes
    it). The audit event records the facts alone."""
    with transaction.atomic():
        fields = {
            "status": status,
            "finished_at": timezone.now(),
            "error": failure.summary if failure else "",
            "error_detail": failure.detail if failure else "",
        }
        if status == JobStatus.SUCCEEDED:
            fields.update(progress=100, result=result or {}, message=message or "done")
        else:
            fields.update(message=message or status)
        rows = Job.objects.filter(id=job_id, status__in=from_statuses)
        if claim is not None:
            rows = rows.filter(worker=claim[0], attempts=claim[1])
        changed = rows.update(**fields)
        if changed:
            job = Job.objects.select_related("team").get(id=job_id)
            details: dict[str, object] = {"kind": job.kind}
            if failure is not None:
                details.update(failure.facts())
            # A job that never reached its privacy-spending steps gives its reservation back.
            if status != JobStatus.SUCCEEDED and charge_refund_unspent(job_id=job_id):
                details["privacy_refunded"] = True
            audit_record(
                actor=None, team=job.team, action=f"job.{status}", target=job, details=details
            )
            if status != JobStatus.SUCCEEDED:
                _after_unsuccessful(job, failure.detail if failure else (message or status))
    return bool(changed)


def _after_unsuccessful(job: Job, reason: str) -> None:
    """A job that reads an upload and ends without success leaves a failed dataset with the
    reason, and none of its files (whether it failed, was cancelled or lost its worker)."""

    if job.kind == JobKind.PARSE and job.dataset_id is not None:
        if job.status == JobStatus.CANCELLED:
            reason = "the upload was cancelled before it was read"
        dataset_parse_failed(dataset_id=job.dataset_id, error=reason)
    if job.kind == JobKind.HIERARCHY and job.dataset is not None:
        files().delete(pending_hierarchy_name(job.dataset, str(job.params.get("file", ""))))


def job_cancel(*, user: User, job: Job) -> Job:
    require_role(user=user, team=job.team, role=Role.PRIVACY_OFFICER)
    with transaction.atomic():
        if Job.objects.filter(id=job.pk, status=JobStatus.QUEUED).update(
            status=JobStatus.CANCELLED,
            finished_at=timezone.now(),
            message="cancelled before it started",
            cancel_requested=True,
        ):
            details: dict[str, object] = {"kind": job.kind}
            if charge_refund_unspent(job_id=job.pk):
                details["privacy_refunded"] = True
            audit_record(
                actor=user, team=job.team, action="job.cancelled", target=job, details=details
            )
            job.status = JobStatus.CANCELLED
            _after_unsuccessful(job, "cancelled")
        elif Job.objects.filter(id=job.pk, status=JobStatus.RUNNING).update(
            cancel_requested=True, message="cancellation requested"
        ):
            audit_record(
                actor=user,
                team=job.team,
                action="job.cancel_requested",
                target=job,
                details={"kind": job.kind},
            )
    job.refresh_from_db()
    return job


def jobs_reap_stale() -> int:
    """Fail running jobs whose worker stopped sending heartbeats."""
    cutoff = timezone.now() - STALE_AFTER
    ids = list(
        Job.objects.filter(status=JobStatus.RUNNING, heartbeat_at__lt=cutoff).values_list(
            "id", flat=True
        )
    )
    for job_id in ids:
        _set_terminal(
            job_id=job_id,
            status=JobStatus.FAILED,
            from_statuses=(JobStatus.RUNNING,),
            failure=Failure.stated(
                "worker_lost",
                "The worker stopped while running this job (it was killed or lost); nothing "
                "was published. Launch it again.",
            ),
        )
    return len(ids)


# Pages run the queue's checks as they show jobs (the beat task runs them too): at most once in
# this many seconds across every web process, through a flag in the shared cache. A job is sent
# again after minutes and reaped after a minute of silence, so a few seconds change nothing a
# reader sees; running both on every view of the job list and of every job's status did.
PAGE_CHECK_SECONDS = 5


def _due(check: str) -> bool:
    return bool(cache.add(f"anonweb:jobs:{check}:checked", 1, PAGE_CHECK_SECONDS))


def jobs_check_queued_from_page() -> bool:
    """:func:`jobs_check_queued`, unless a page ran it in the last PAGE_CHECK_SECONDS; whether
    it ran (only then may it have changed a job the page read)."""
    if _due("queued"):
        jobs_check_queued()
        return True
    return False


def jobs_reap_stale_from_page() -> bool:
    """:func:`jobs_reap_stale`, unless a page ran it in the last PAGE_CHECK_SECONDS; whether
    it ran (only then may it have changed a job the page read)."""
    if _due("stale"):
        jobs_reap_stale()
        return True
    return False


def jobs_check_queued() -> tuple[int, int]:
    """Queued jobs no worker took: send each again every QUEUED_RESEND_AFTER, and fail it with
    the reason once it has waited QUEUED_FAIL_AFTER. Returns (sent again, failed)."""
    now = timezone.now()
    queued = Job.objects.filter(status=JobStatus.QUEUED, cancel_requested=False)
    late = list(queued.filter(created_at__lt=now - QUEUED_FAIL_AFTER).values_list("id", flat=True))
    minutes = max(1, round(QUEUED_FAIL_AFTER.total_seconds() / 60))
    for job_id in late:
        _set_terminal(
            job_id=job_id,
            status=JobStatus.FAILED,
            from_statuses=(JobStatus.QUEUED,),
            failure=Failure.stated(
                "not_taken",
                f"No worker took this job within {minutes} minute(s) of its launch, so it "
                "was stopped before it started; nothing was run. Check that a worker is running "
                "(./run.sh or the worker service starts one), then launch it again.",
            ),
        )
    cutoff = now - QUEUED_RESEND_AFTER
    waiting = list(
        queued.filter(created_at__lt=cutoff)
        .filter(Q(sent_at__isnull=True) | Q(sent_at__lt=cutoff))
        .values_list("id", flat=True)
    )
    sent = 0
    for job_id in waiting:
        marked = Job.objects.filter(id=job_id, status=JobStatus.QUEUED).update(
            message=f"no worker has taken this job yet; sent to the queue again at "
            f"{now:%H:%M} UTC (it is stopped if none takes it within {minutes} minute(s))"
        )
        if marked:
            job_enqueue(job_id=job_id)
            sent += 1
    return sent, len(late)


def release_utility_start(*, user: User, release_id: int) -> Job:
    """Queue a job that measures the utility of a release an engine made (officers and
    stewards): the worker reads the source on the engine, the request never does. A job
    already queued or running for the release is the one returned."""
    release = release_get_for_user(user=user, release_id=release_id)
    if not release_is_staff(user=user, release=release):
        raise PermissionDenied("The utility is measured on the source: officers and stewards only.")
    waiting = Job.objects.filter(
        kind=JobKind.UTILITY,
        params__release_id=release.pk,
        status__in=[JobStatus.QUEUED, JobStatus.RUNNING],
    ).first()
    if waiting is not None:
        return waiting
    return job_create(
        user=user,
        team=release.team,
        kind=JobKind.UTILITY,
        dataset=release.dataset,
        params={"release_id": release.pk},
        roles=(Role.PRIVACY_OFFICER, Role.DATA_STEWARD),
    )


def release_attacks_start(*, user: User, release_id: int) -> Job:
    """Queue a job that attacks the release again (officers and stewards): the worker reads
    the source, the request never does."""
    release = release_get_for_user(user=user, release_id=release_id)
    if not release_is_staff(user=user, release=release):
        raise PermissionDenied("The attacks are run on the source: officers and stewards only.")
    return job_create(
        user=user,
        team=release.team,
        kind=JobKind.ATTACK,
        dataset=release.dataset,
        params={"release_id": release.pk},
        roles=(Role.PRIVACY_OFFICER, Role.DATA_STEWARD),
    )
