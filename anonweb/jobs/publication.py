"""A release job's output becomes a release: the files, the row, its conflict findings, its
audit event and the job's success, committed together under the job's claim. This finishes a
job, so it belongs to the jobs app; what a release is stays in :mod:`anonweb.releases`."""

from __future__ import annotations

from pathlib import Path

from django.db import IntegrityError, transaction
from django.db.models import Max

from anonweb.audit.services import audit_record
from anonweb.jobs.services import JobLost, job_claim_held, job_complete_claimed
from anonweb.releases.conflicts import FINDINGS_FILE
from anonweb.releases.models import Release
from anonweb.releases.recipients import recipients_assign
from anonweb.releases.services import finding_summary, save_conflict_findings
from anonweb.releases.storage import (
    parquet_shape,
    remove_release_files,
    write_private_json,
    write_release_objects,
)
from anonweb.releases.utility import utility_measure_at_publication, utility_measure_on_engine


def release_create(
    *,
    job,
    frame,
    plan: dict,
    report: dict,
    title: str,
    source_rows=None,
    aggregates=(),
    dp: bool = False,
    conflicts=None,
    published_report: dict | None = None,
    gate: dict | None = None,
    purpose: str = "",
    recipient: str = "",
    recipients=(),
    source=None,
    engine: str = "pandas",
    lineage_file: Path | None = None,
    measured_by=None,
) -> Release:
    """Files first (atomically renamed into place), then the row, its conflict findings, its
    audit event and the job's success in one transaction; if the row cannot be written the
    files are removed again.

    ``source`` is the table the job read: given, the release's utility is measured from it and
    stored with the files before the row is committed, so the release is never visible without
    it (if that fails, the release is published all the same and its first staff reader
    computes it).

    ``source_rows``, ``aggregates`` and ``dp`` are the release's lineage (kept privately);
    ``conflicts`` the :class:`~anonweb.core.conflicts.release.ConflictCheck` of the new release
    against the earlier ones. ``recipients`` the names the launch checked (none: every analyst
    of the team receives it).

    ``frame`` is the released table, or the Parquet file an out-of-core ``engine`` wrote it to
    (its rows are then never held in memory here), with ``lineage_file``, the source row of
    each of its rows (kept privately). ``measured_by`` is then that engine and the local path of
    the source it read: the utility is measured by the engine from the columns' counts, stored
    as ``source``'s is.

    ``job`` must be running under the claim of the worker calling this: a job that the reaper
    failed meanwhile publishes nothing (JobLost), so no release ever belongs to a failed job."""
    if not job_claim_held(job=job):
        raise JobLost(f"job {job.pk} is no longer running under this worker's claim")
    if isinstance(frame, Path):
        rows, columns = parquet_shape(frame)
    else:
        rows, columns = len(frame), [str(c) for c in frame.columns]
    release = Release(
        team=job.team,
        dataset=job.dataset,
        job=job,
        title=title,
        plan=plan,
        report=report,
        rows=rows,
        columns=columns,
        requested_by=job.created_by,
        published_report=published_report or {},
        gate=gate or {},
        purpose=purpose,
        recipient=recipient,
    )
    stored = write_release_objects(
        release.storage_key,
        frame,
        source_rows=source_rows,
        aggregates=aggregates,
        dp=dp,
        lineage_file=lineage_file,
    )
    release.sha256 = stored.sha256
    found = None
    try:
        if source is not None:
            utility_measure_at_publication(release=release, source=source)
        elif measured_by is not None and isinstance(frame, Path):
            engine_used, source_path = measured_by
            utility_measure_on_engine(
                release=release,
                engine=engine_used,
                source=source_path,
                released=frame,
                lineage=lineage_file,
            )
        for _attempt in range(3):
            try:
                with transaction.atomic():
                    last = Release.objects.filter(dataset=job.dataset).aggregate(v=Max("version"))[
                        "v"
                    ]
                    release.version = (last or 0) + 1
                    release.conflicts_checked = (
                        list(conflicts.checked)
                        if conflicts is not None and not conflicts.skipped
                        else None
                    )
                    release.save()
                    recipients_assign(release=release, names=list(recipients))
                    found = conflicts.relabelled(release.version) if conflicts else None
                    if found is not None:
                        save_conflict_findings(release, found)
                        # the findings' records and values (officers only) are written before
                        # the row commits: a release is never visible without them
                        write_private_json(release.storage_key, FINDINGS_FILE, found.private)
                    audit_record(
                        actor=job.created_by,
                        team=job.team,
                        action="release.created",
                        target=release,
                        details={
                            "dataset_id": job.dataset_id,
                            "version": release.version,
                            "job_id": job.pk,
                            "rows": release.rows,
                            "sha256": release.sha256,
                            # each published object as stored (written once): what
                            # audit_verify checks the storage against
                            "objects": stored.to_audit(),
                            "plan": plan,
                            **({"conflicts": found.summary()} if found is not None else {}),
                            "purpose": purpose,
                            "recipient": recipient,
                            "recipients": release.recipients,
                            "findings": finding_summary(release.findings),
                        },
                    )
                    job_complete_claimed(
                        job=job,
                        result={
                            "release_id": release.pk,
                            "version": release.version,
                            "rows": release.rows,
                            "engine": engine,
                        },
                    )
                break
            except IntegrityError:
                release.pk = None
                continue
        else:
            raise IntegrityError("could not allocate a release version")
    except BaseException:
        remove_release_files(release.storage_key)
        raise
    return release
