"""Purging a dataset's raw data, by a privacy officer or once its retention date has passed.

A purge reaches past the dataset: the results and plans of its jobs and the plans of its
releases can quote source values (:mod:`anonweb.datasets.purge` says what goes), so it is a
use case of this app, which sits above datasets and releases."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from anonweb.accounts.models import Role
from anonweb.accounts.selectors import require_role
from anonweb.audit.services import audit_record
from anonweb.core.errors import DataError
from anonweb.datasets.models import Dataset, Hierarchy
from anonweb.datasets.purge import scrub_hierarchy_spec, scrub_plan, scrub_result
from anonweb.datasets.storage import dataset_files_remove
from anonweb.jobs.models import Job
from anonweb.jobs.profile_page import profile_sections_forget
from anonweb.releases.models import Release
from anonweb.releases.source_figures import release_source_figures_forget


def dataset_purge(*, user, dataset: Dataset, reason: str) -> Dataset:
    """Delete the raw table (original upload and its Parquet copy) for good. The dataset's
    metadata, audit trail and releases stay; nothing can be run on it afterwards.

    ``user`` is None when the retention policy purges an expired dataset."""
    if user is not None:
        require_role(user=user, team=dataset.team, role=Role.PRIVACY_OFFICER)
    with transaction.atomic():
        changed = Dataset.objects.filter(pk=dataset.pk, purged_at__isnull=True).update(
            purged_at=timezone.now()
        )
        if not changed:
            raise DataError(f"the raw data of {dataset.name} was already purged")
        removed = _purge_stored_values(dataset)
        audit_record(
            actor=user,
            team=dataset.team,
            action="dataset.purged",
            target=dataset,
            details={
                "reason": reason[:300],
                "rows": dataset.rows,
                "sha256": dataset.source_sha256,
                **removed,
            },
        )
        # Files go only once the row says so: a crash in between leaves files of a purged
        # dataset (removed by the next purge run), never a live dataset without its data.
        transaction.on_commit(lambda: _remove_files(dataset))
    dataset.refresh_from_db()
    return dataset


def _remove_files(dataset: Dataset) -> None:
    """The raw table, and what was computed from it and kept beside its releases (their
    utility, attack figures and conflict findings' detail)."""
    dataset_files_remove(dataset.storage_key)
    release_source_figures_forget(dataset=dataset)
    profile_sections_forget(dataset=dataset)


def _purge_stored_values(dataset: Dataset) -> dict:
    """Remove the source's values kept in the database (job results, hierarchies, plans of jobs
    and releases), keeping counts; see :mod:`anonweb.datasets.purge`. Returns what was done."""
    columns = dataset.column_names
    jobs = 0
    rows = Job.objects.filter(dataset=dataset).only("pk", "params", "result", "error_detail")
    for job in rows.iterator():
        params = dict(job.params or {})
        if "plan" in params:
            params["plan"] = scrub_plan(params["plan"], columns=columns)
        result = scrub_result(job.result or {})
        # a failure's message as written may quote cells; its summary (facts) stays
        if params != job.params or result != job.result or job.error_detail:
            Job.objects.filter(pk=job.pk).update(params=params, result=result, error_detail="")
            jobs += 1
    hierarchies = 0
    for hierarchy in Hierarchy.objects.filter(dataset=dataset).only("pk", "spec").iterator():
        Hierarchy.objects.filter(pk=hierarchy.pk).update(spec=scrub_hierarchy_spec(hierarchy.spec))
        hierarchies += 1
    releases = 0
    for release in Release.objects.filter(dataset=dataset).only("pk", "plan").iterator():
        plan = scrub_plan(release.plan, columns=columns)
        if plan != release.plan:
            Release.objects.filter(pk=release.pk).update(plan=plan)
            releases += 1
    return {
        "jobs_scrubbed": jobs,
        "hierarchies_scrubbed": hierarchies,
        "release_plans_scrubbed": releases,
    }


def datasets_purge_expired(*, today=None) -> list[int]:
    """Purge every dataset whose retention date has passed; returns their ids."""
    today = today or timezone.localdate()
    purged = []
    for dataset in Dataset.objects.filter(retain_until__lt=today, purged_at__isnull=True):
        dataset_purge(
            user=None,
            dataset=dataset,
            reason=f"retention period ended on {dataset.retain_until}",
        )
        purged.append(dataset.pk)
    # Leftovers of purges interrupted between the database and the file system, and figures
    # written by a job that read the source just before it was purged.
    for dataset in Dataset.objects.filter(purged_at__isnull=False):
        _remove_files(dataset)
    return purged
