"""A large hierarchy file uploaded on the dataset page is read by a job, not in the request: a
million lines took 45-52 s, past the web server's 30 s timeout. A small one is still saved at
once."""

from __future__ import annotations

import time

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import TestCase
from django.urls import reverse

from anonweb.datasets.models import Hierarchy
from anonweb.datasets.selectors import hierarchy_spec
from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.jobs.services import HIERARCHY_IMMEDIATE_LINES, job_cancel

pytestmark = pytest.mark.django_db

AGES = [29, 22, 27, 43, 52, 47]  # the dataset fixture's ages


def age_hierarchy(lines: int) -> bytes:
    """The dataset's ages and, after them, other values up to ``lines`` lines."""
    rows = [f"{a};{a // 10 * 10}s;*" for a in AGES]
    rows += [f"{1000 + i};big;*" for i in range(lines - len(rows))]
    return ("\n".join(rows) + "\n").encode()


def upload(client, dataset, content: bytes, column="age"):
    return client.post(
        reverse("datasets:hierarchy", args=[dataset.pk]),
        {"column": column, "file": SimpleUploadedFile("h.csv", content)},
    )


def run(job: Job) -> Job:
    with TestCase.captureOnCommitCallbacks(execute=False):
        job_execute(job_id=job.pk, worker="test")
    job.refresh_from_db()
    return job


def pending_files(dataset) -> list:
    from anonweb.datasets.storage import dataset_dir

    folder = dataset_dir(dataset.storage_key) / "pending-hierarchies"
    return sorted(folder.iterdir()) if folder.exists() else []


def test_a_small_hierarchy_is_saved_in_the_request(client, officer, dataset):
    client.force_login(officer)
    response = upload(client, dataset, age_hierarchy(100))
    assert response.status_code == 302
    assert response["Location"] == reverse("datasets:detail", args=[dataset.pk])
    assert not Job.objects.filter(kind=JobKind.HIERARCHY).exists()
    assert hierarchy_spec(dataset=dataset, column="age")["rows"][0] == ["29", "20s", "*"]


def test_a_large_hierarchy_is_read_by_a_job_with_progress(client, officer, dataset):
    client.force_login(officer)
    started = time.perf_counter()
    response = upload(client, dataset, age_hierarchy(HIERARCHY_IMMEDIATE_LINES + 1))
    answered = time.perf_counter() - started
    job = Job.objects.get(kind=JobKind.HIERARCHY)
    assert response["Location"] == reverse("jobs:detail", args=[job.pk])
    assert job.status == JobStatus.QUEUED and job.params["column"] == "age"
    assert not Hierarchy.objects.exists() and len(pending_files(dataset)) == 1
    assert answered < 5

    job = run(job)
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.progress == 100
    assert job.result == {"column": "age", "levels": 3, "values": HIERARCHY_IMMEDIATE_LINES + 1}
    rows = hierarchy_spec(dataset=dataset, column="age")["rows"]
    assert len(rows) == HIERARCHY_IMMEDIATE_LINES + 1 and rows[0] == ["29", "20s", "*"]
    assert pending_files(dataset) == []


def test_a_large_hierarchy_that_misses_values_fails_its_job_with_the_reason(
    client, officer, dataset
):
    client.force_login(officer)
    content = age_hierarchy(HIERARCHY_IMMEDIATE_LINES + 10).replace(b"52;50s;*\n", b"")
    upload(client, dataset, content)
    job = run(Job.objects.get(kind=JobKind.HIERARCHY))
    assert job.status == JobStatus.FAILED
    assert "does not cover 1 value(s)" in job.error_detail
    assert not Hierarchy.objects.exists() and pending_files(dataset) == []


def test_a_cancelled_hierarchy_job_leaves_no_file(client, officer, dataset):
    client.force_login(officer)
    upload(client, dataset, age_hierarchy(HIERARCHY_IMMEDIATE_LINES + 1))
    job = Job.objects.get(kind=JobKind.HIERARCHY)
    job_cancel(user=officer, job=job)
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED
    assert not Hierarchy.objects.exists() and pending_files(dataset) == []


def test_only_officers_queue_a_hierarchy_job(client, steward, dataset):
    client.force_login(steward)
    upload(client, dataset, age_hierarchy(HIERARCHY_IMMEDIATE_LINES + 1))
    assert not Job.objects.exists() and pending_files(dataset) == []
