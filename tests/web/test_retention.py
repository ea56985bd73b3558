"""Data expiration: raw tables are purged on request or after their retention date; the
metadata, the audit trail and releases stay."""

import datetime as dt

import pytest
from django.core.management import call_command
from django.urls import reverse

from anonweb.audit.models import AuditEvent
from anonweb.datasets.services import dataset_purge, dataset_set_retention, datasets_purge_expired
from anonweb.datasets.storage import dataset_dir
from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.jobs.services import job_create, job_execute

pytestmark = pytest.mark.django_db


def test_purge_deletes_the_raw_files_and_keeps_the_rest(
    client, officer, dataset, django_capture_on_commit_callbacks
):
    folder = dataset_dir(dataset.storage_key)
    assert folder.exists()
    client.force_login(officer)
    with django_capture_on_commit_callbacks(execute=True):
        client.post(
            reverse("datasets:purge", args=[dataset.pk]),
            {"confirm": "patients", "reason": "study closed"},
        )
    dataset.refresh_from_db()
    assert dataset.is_purged and not folder.exists()
    event = AuditEvent.objects.get(action="dataset.purged")
    assert event.details["reason"] == "study closed" and event.details["rows"] == 6
    page = client.get(reverse("datasets:detail", args=[dataset.pk])).content.decode()
    assert 'data-testid="purged"' in page and "Ann Lee" not in page
    assert client.post(reverse("datasets:assess", args=[dataset.pk])).status_code == 302
    assert not Job.objects.exists()
    assert client.get(reverse("jobs:plan", args=[dataset.pk])).status_code == 302


def test_purge_needs_the_name_typed_and_the_officer_role(client, officer, steward, dataset):
    client.force_login(officer)
    client.post(reverse("datasets:purge", args=[dataset.pk]), {"confirm": "wrong"})
    client.force_login(steward)
    client.post(reverse("datasets:purge", args=[dataset.pk]), {"confirm": "patients"})
    dataset.refresh_from_db()
    assert not dataset.is_purged


def test_a_job_on_purged_data_fails_with_a_clear_message(
    officer, dataset, django_capture_on_commit_callbacks
):
    job = job_create(user=officer, team=dataset.team, kind=JobKind.PROFILE, dataset=dataset)
    with django_capture_on_commit_callbacks(execute=True):
        dataset_purge(user=officer, dataset=dataset, reason="test")
    job_execute(job_id=job.pk, worker="t")
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and "purged" in job.error


def test_expired_datasets_are_purged_by_the_retention_run(
    officer, steward, dataset, django_capture_on_commit_callbacks, capsys
):
    today = dt.date(2030, 1, 10)
    dataset_set_retention(user=steward, dataset=dataset, retain_until=dt.date(2030, 1, 10))
    assert datasets_purge_expired(today=today) == []  # kept through its last day
    with django_capture_on_commit_callbacks(execute=True):
        assert datasets_purge_expired(today=today + dt.timedelta(days=1)) == [dataset.pk]
    dataset.refresh_from_db()
    assert dataset.is_purged and not dataset_dir(dataset.storage_key).exists()
    assert AuditEvent.objects.get(action="dataset.purged").actor_name == "system"
    call_command("purge_expired")
    assert "purged 0 dataset(s)" in capsys.readouterr().out


def test_retention_is_set_by_officers_or_stewards_only(client, analyst, steward, dataset):
    client.force_login(steward)
    client.post(reverse("datasets:retention", args=[dataset.pk]), {"retain_until": "2031-05-01"})
    dataset.refresh_from_db()
    assert dataset.retain_until == dt.date(2031, 5, 1)
    response = client.post(
        reverse("datasets:retention", args=[dataset.pk]), {"retain_until": "someday"}, follow=True
    )
    assert "is not a date" in response.content.decode()
    client.force_login(analyst)
    assert (
        client.post(
            reverse("datasets:retention", args=[dataset.pk]), {"retain_until": "2040-01-01"}
        ).status_code
        == 404
    )
