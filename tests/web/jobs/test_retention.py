"""Data expiration: raw tables are purged on request or after their retention date; the
metadata, the audit trail and releases stay."""

import datetime as dt

import pytest
from django.core.management import call_command
from django.urls import reverse

from anonweb.audit.models import AuditEvent
from anonweb.core.errors import DataError
from anonweb.datasets.services import dataset_set_retention
from anonweb.datasets.storage import dataset_dir, load_frame
from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.jobs.retention import dataset_purge, datasets_purge_expired
from anonweb.jobs.services import job_create, release_attacks_start
from anonweb.releases.attacks import ON_DEMAND_FILE, release_attacks_run
from anonweb.releases.source_figures import SOURCE_FIGURES_FILES
from anonweb.releases.storage import PRIVATE_DIR, release_dir, write_private_json
from tests.web.conftest import small_table
from tests.web.releases.test_conflict_findings import _release, _upload, bmi, bmi_plans  # noqa: F401
from tests.web.releases.test_published_report import launch

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
    assert job.status == JobStatus.FAILED and "purged" in job.error_detail


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


RAW_VALUES = ("47677", "47602", "47905", "gastritis", "flu")


def _stored_text(dataset) -> str:
    import json

    from anonweb.datasets.models import Hierarchy
    from anonweb.releases.models import Release

    parts = [json.dumps([j.params, j.result]) for j in Job.objects.filter(dataset=dataset)]
    parts += [json.dumps(h.spec) for h in Hierarchy.objects.filter(dataset=dataset)]
    parts += [json.dumps(r.plan) for r in Release.objects.filter(dataset=dataset)]
    return "\n".join(parts)


def test_purge_removes_raw_values_from_results_hierarchies_and_plans_keeping_counts(
    officer, dataset, django_capture_on_commit_callbacks
):
    from anonweb.datasets.models import Hierarchy
    from anonweb.datasets.services import dataset_set_hierarchy_spec
    from anonweb.releases.models import Release

    profile = job_create(user=officer, team=dataset.team, kind=JobKind.PROFILE, dataset=dataset)
    job_execute(job_id=profile.pk, worker="t")
    profile.refresh_from_db()
    disclosing = profile.result["risk"]["sensitive"]["disease"]["disclosing_classes"]
    assert disclosing, "the profile lists disclosing classes with raw values"
    zips = ["47677", "47602", "47678", "47905", "47909", "47906"]
    dataset_set_hierarchy_spec(
        user=officer,
        dataset=dataset,
        column="zip",
        spec={"rows": [[z, z[:4] + "*", "*"] for z in zips]},
    )
    plan = {
        "version": 1,
        "quasi_identifiers": ["zip", "age"],
        "hierarchies": {"zip": {"rows": [["47905", "4790*", "*"]]}, "age": {"builder": "interval"}},
        "steps": [
            {"kind": "drop", "params": {"columns": ["name"]}},
            {"kind": "suppress", "params": {"columns": ["zip"], "values": ["47677", "47602"]}},
            {"kind": "codebook", "params": {"columns": ["disease"], "codebook": {"flu": 1}}},
            {"kind": "generalize", "params": {"levels": {"age": 1}, "k": 2}},
        ],
    }
    Job.objects.create(
        team=dataset.team,
        created_by=officer,
        dataset=dataset,
        kind=JobKind.ANONYMIZE,
        params={"plan": plan},
        status=JobStatus.SUCCEEDED,
    )
    Release.objects.create(
        team=dataset.team, dataset=dataset, version=1, title="v1", plan=plan, sha256="0" * 64
    )
    before = _stored_text(dataset)
    assert all(value in before for value in RAW_VALUES)

    with django_capture_on_commit_callbacks(execute=True):
        dataset_purge(user=officer, dataset=dataset, reason="study closed")

    after = _stored_text(dataset)
    assert [value for value in RAW_VALUES if value in after] == []
    profile.refresh_from_db()
    disease = profile.result["risk"]["sensitive"]["disease"]
    # Counts and figures stay.
    assert disease["disclosing_classes_count"] == len(disclosing)
    assert profile.result["risk"]["k"] == 1 and profile.result["rows"] == 6
    hierarchy = Hierarchy.objects.get(dataset=dataset, column="zip")
    assert hierarchy.spec == {"purged": True, "builder": "uploaded", "values": 6}
    assert hierarchy.levels == 3
    stored = Job.objects.get(kind=JobKind.ANONYMIZE).params["plan"]
    assert stored["quasi_identifiers"] == ["zip", "age"]
    assert stored["hierarchies"] == {"zip": {"purged": 1}, "age": {"builder": "interval"}}
    kept = stored["steps"]
    assert kept[0] == {"kind": "drop", "params": {"columns": ["name"]}}
    assert kept[1]["params"] == {"columns": ["zip"], "values": {"purged": 2}}
    assert kept[2]["params"]["codebook"] == {"purged": 1}
    assert kept[3]["params"] == {"levels": {"age": 1}, "k": 2}
    event = AuditEvent.objects.get(action="dataset.purged")
    assert event.details["hierarchies_scrubbed"] == 1 and event.details["jobs_scrubbed"] == 2
    assert event.details["release_plans_scrubbed"] == 1


def test_a_retention_date_in_the_past_needs_the_officer_and_the_typed_name(
    client, officer, steward, dataset
):
    from django.utils import timezone

    yesterday = (timezone.localdate() - dt.timedelta(days=1)).isoformat()
    url = reverse("datasets:retention", args=[dataset.pk])
    client.force_login(steward)
    page = client.post(url, {"retain_until": yesterday, "confirm": "patients"}, follow=True)
    assert "only a privacy officer can confirm" in page.content.decode()
    client.force_login(officer)
    page = client.post(url, {"retain_until": yesterday}, follow=True)
    assert "type the dataset&#x27;s name to confirm" in page.content.decode()
    dataset.refresh_from_db()
    assert dataset.retain_until is None
    assert datasets_purge_expired() == []
    client.post(url, {"retain_until": yesterday, "confirm": "patients"})
    dataset.refresh_from_db()
    assert dataset.retain_until.isoformat() == yesterday
    event = AuditEvent.objects.filter(action="dataset.retention_set").latest("seq")
    assert event.details["in_the_past_confirmed"] is True and event.actor_name == "olivia"
    # A future date needs no confirmation, from a steward either.
    client.force_login(steward)
    client.post(url, {"retain_until": "2099-01-01"})
    dataset.refresh_from_db()
    assert dataset.retain_until == dt.date(2099, 1, 1)


def test_a_purge_removes_every_figure_computed_from_the_source_kept_beside_its_releases(
    officer,
    steward,
    team,
    bmi,  # noqa: F811
    django_capture_on_commit_callbacks,
):
    """The utility, the attack figures of an on-demand run and the conflict findings' detail
    quote the source: they go with it. The published files and the lineage stay."""
    first_plan, second_plan = bmi_plans()
    first = _release(officer, bmi, first_plan, "k1")
    second = _release(officer, bmi, second_plan, "k2")
    job = release_attacks_start(user=steward, release_id=second.pk)
    job_execute(job_id=job.pk, worker="t")
    assert Job.objects.get(pk=job.pk).status == JobStatus.SUCCEEDED
    private = release_dir(second.storage_key) / PRIVATE_DIR
    kept_before = {p.name for p in private.iterdir()} - set(SOURCE_FIGURES_FILES)
    # the check below is void unless each kind of file was there
    assert {p.name for p in private.iterdir()} >= set(SOURCE_FIGURES_FILES)
    assert (release_dir(first.storage_key) / PRIVATE_DIR / "utility.json").exists()

    other = _upload(officer, team, small_table(), "unrelated", {"name": "identifier"})
    with django_capture_on_commit_callbacks(execute=True):
        dataset_purge(user=officer, dataset=bmi, reason="study closed")
    for release in (first, second):
        folder = release_dir(release.storage_key)
        assert not any((folder / PRIVATE_DIR / n).exists() for n in SOURCE_FIGURES_FILES)
        assert (folder / "data.csv").exists() and (folder / "data.parquet").exists()
    assert {p.name for p in private.iterdir()} == kept_before  # the lineage stays
    assert dataset_dir(other.storage_key).exists()


def test_figures_written_after_a_purge_go_with_the_next_retention_run(
    officer, dataset, django_capture_on_commit_callbacks
):
    release = launch(officer, dataset, {"version": 1, "steps": []}, "r")
    with django_capture_on_commit_callbacks(execute=True):
        dataset_purge(user=officer, dataset=dataset, reason="test")
    # a job that read the source before the purge writes its figures after it
    write_private_json(release.storage_key, ON_DEMAND_FILE, {"skipped": "late"})
    path = release_dir(release.storage_key) / PRIVATE_DIR / ON_DEMAND_FILE
    assert path.exists()
    datasets_purge_expired()
    assert not path.exists()


def test_attacks_that_read_the_source_before_a_purge_keep_no_figures(
    officer, dataset, django_capture_on_commit_callbacks
):
    release = launch(officer, dataset, {"version": 1, "steps": []}, "r")
    source = load_frame(dataset.storage_key)  # read by the worker, then the source is purged
    with django_capture_on_commit_callbacks(execute=True):
        dataset_purge(user=officer, dataset=dataset, reason="test")
    with pytest.raises(DataError, match="purged while the attacks ran"):
        release_attacks_run(release=release, source=source, progress=lambda *_: None)
    assert not (release_dir(release.storage_key) / PRIVATE_DIR / ON_DEMAND_FILE).exists()
