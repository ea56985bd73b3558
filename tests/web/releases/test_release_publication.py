"""A release exists only for a job that succeeded: a worker stalled past the stale limit while
writing the release publishes nothing, and what interrupted writes leave on disk is swept."""

import os
import time
import uuid

import pytest
from django.utils import timezone

from anonweb.audit.models import AuditEvent
from anonweb.jobs import publication, runners
from anonweb.jobs import services as job_services
from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.releases.models import Release
from anonweb.releases.storage import release_dir
from anonweb.releases.storage_sweep import LEFTOVER_AGE, sweep_storage

pytestmark = pytest.mark.django_db

PLAN = {
    "version": 1,
    "quasi_identifiers": ["age", "sex"],
    "sensitive": ["disease"],
    "hierarchies": {
        "age": {"builder": "interval", "width": 10},
        "sex": {"rows": [["F", "*"], ["M", "*"]]},
    },
    "steps": [
        {"kind": "drop", "params": {"columns": ["name"]}},
        {"kind": "optimal_generalization", "params": {"k": 2, "suppression": 0.0}},
    ],
}


def _job(officer, dataset):
    return Job.objects.create(
        team=dataset.team,
        dataset=dataset,
        created_by=officer,
        kind=JobKind.ANONYMIZE,
        params={"plan": PLAN, "title": "k2"},
    )


def _reap_as_if_silent(job_id):
    """What the reaper does once the worker has been silent past the stale limit."""
    Job.objects.filter(pk=job_id).update(heartbeat_at=timezone.now() - job_services.STALE_AFTER * 2)
    return job_services.jobs_reap_stale()


def test_a_job_reaped_while_writing_its_release_publishes_nothing(
    officer, dataset, settings, monkeypatch
):
    job = _job(officer, dataset)
    real_write = publication.write_release_objects

    def stalled_write(storage_key, frame, **kwargs):
        stored = real_write(storage_key, frame, **kwargs)
        # The worker pauses here (SIGSTOP, swap, a long GC) past the stale limit.
        assert _reap_as_if_silent(job.pk) == 1
        return stored

    monkeypatch.setattr(publication, "write_release_objects", stalled_write)
    job_execute(job_id=job.pk, worker="w1")

    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and "nothing was published" in job.error
    assert not Release.objects.exists()
    assert not AuditEvent.objects.filter(action="release.created").exists()
    assert not AuditEvent.objects.filter(action="job.succeeded").exists()
    root = settings.MEDIA_ROOT / "releases"
    assert not root.exists() or list(root.iterdir()) == []


def test_once_the_release_is_committed_the_reaper_cannot_fail_its_job(
    officer, dataset, monkeypatch
):
    job = _job(officer, dataset)
    real_create = publication.release_create
    reaped = []

    def stalled_after_publishing(**kwargs):
        release = real_create(**kwargs)
        # The worker pauses between committing the release and reporting success.
        reaped.append(_reap_as_if_silent(job.pk))
        return release

    monkeypatch.setattr(runners, "release_create", stalled_after_publishing)
    job_execute(job_id=job.pk, worker="w1")

    job.refresh_from_db()
    assert reaped == [0]
    assert job.status == JobStatus.SUCCEEDED and job.error == ""
    release = Release.objects.get()
    assert job.result == {
        "release_id": release.pk,
        "version": 1,
        "rows": release.rows,
        "engine": "pandas",
    }
    assert AuditEvent.objects.filter(action="job.succeeded").count() == 1
    assert not AuditEvent.objects.filter(action="job.failed").exists()


def test_a_release_is_not_written_for_a_job_claimed_by_another_attempt(officer, dataset):
    job = _job(officer, dataset)
    Job.objects.filter(pk=job.pk).update(status=JobStatus.RUNNING, worker="w2", attempts=2)
    job.refresh_from_db()
    stale_view = Job.objects.get(pk=job.pk)
    stale_view.worker, stale_view.attempts = "w1", 1  # what the first claimant holds
    import pandas as pd

    with pytest.raises(job_services.JobLost):
        publication.release_create(
            job=stale_view, frame=pd.DataFrame({"a": [1]}), plan={}, report={}, title="x"
        )
    assert not Release.objects.exists()


def test_a_release_is_not_published_without_its_conflict_details(
    officer, dataset, settings, monkeypatch
):
    # The conflict findings' records and values are written before the release's row commits:
    # if they cannot be, nothing is published (no release, no files, the job failed).
    written = []

    def failing_write(storage_key, name, data):
        written.append(name)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(publication, "write_private_json", failing_write)
    job = _job(officer, dataset)
    job_execute(job_id=job.pk, worker="w1")

    job.refresh_from_db()
    assert written == ["conflicts.json"]
    assert job.status == JobStatus.FAILED
    assert not Release.objects.exists()
    assert not AuditEvent.objects.filter(action="release.created").exists()
    root = settings.MEDIA_ROOT / "releases"
    assert not root.exists() or list(root.iterdir()) == []


def test_a_published_release_has_its_conflict_details(officer, dataset):
    job = _job(officer, dataset)
    job_execute(job_id=job.pk, worker="w1")
    release = Release.objects.get()
    assert (release_dir(release.storage_key) / "private" / "conflicts.json").exists()


def _age(path, seconds):
    past = time.time() - seconds
    os.utime(path, (past, past))


def test_leftovers_of_interrupted_writes_are_swept_once_old(officer, dataset, settings):
    media = settings.MEDIA_ROOT
    old = LEFTOVER_AGE.total_seconds() + 60
    stale_tmp = media / "releases" / ".tmp-abandoned"
    fresh_tmp = media / "releases" / ".tmp-in-progress"
    orphan = release_dir(uuid.uuid4())
    for folder in (stale_tmp, fresh_tmp, orphan):
        folder.mkdir(parents=True)
        (folder / "data.csv").write_text("a\n1\n")
    stale_parquet = media / "datasets" / str(dataset.storage_key) / ".tmp-x.parquet"
    stale_parquet.write_bytes(b"PAR1")
    for path in (stale_tmp, orphan, stale_parquet):
        _age(path, old)
    live_dataset = media / "datasets" / str(dataset.storage_key)
    _age(live_dataset, old)

    removed = sweep_storage()

    assert not stale_tmp.exists() and not orphan.exists() and not stale_parquet.exists()
    assert fresh_tmp.exists(), "a write that may still be under way is left alone"
    assert (live_dataset / "data.parquet").exists(), "a dataset's own files stay"
    assert len(removed) == 3 and all(".." not in r for r in removed)
