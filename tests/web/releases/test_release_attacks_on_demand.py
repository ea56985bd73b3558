"""Attacks run again on an existing release, from its page or the API, as a job: the figures
are kept beside the release (its files unchanged), shown to officers and stewards, never to
analysts. Every release's figures include what all the live releases of its source reconstruct
together: counts and columns for stewards, which records for officers."""

import hashlib

import pytest
from django.urls import reverse

from anonweb.core.attacks.run import NO_CONTROL
from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.releases.storage import release_dir
from tests.web.api.test_api import api
from tests.web.releases.test_conflict_findings import _release, bmi, bmi_plans  # noqa: F401
from tests.web.releases.test_published_report import launch
from tests.web.releases.test_release_attacks import K_PLAN, patients  # noqa: F401

pytestmark = pytest.mark.django_db


def files_digest(release) -> dict[str, str]:
    folder = release_dir(release.storage_key)
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.iterdir() if p.is_file()
    }


def run(job_id: int) -> Job:
    job_execute(job_id=job_id, worker="test")
    job = Job.objects.get(pk=job_id)
    assert job.status == JobStatus.SUCCEEDED, job.error
    return job


def test_a_steward_runs_the_attacks_again_against_the_control_held_out_at_release(
    client,
    officer,
    steward,
    patients,  # noqa: F811
):
    release = launch(officer, patients, {**K_PLAN, "attacks": {"holdout": 0.2}}, "attacked")
    before = files_digest(release)
    client.force_login(steward)
    answer = client.post(reverse("releases:attack", args=[release.pk]))
    job = Job.objects.get(kind=JobKind.ATTACK)
    assert answer.status_code == 302 and answer.url == reverse("jobs:detail", args=[job.pk])
    assert job.params == {"release_id": release.pk} and job.dataset_id == patients.pk
    assert job.status == JobStatus.QUEUED  # the request read nothing of the source
    run(job.pk)
    assert files_digest(release) == before  # the release's files are as they were

    body = api(steward).get(f"/api/v1/releases/{release.pk}/attacks/").json()
    assert body["run_at"]
    # the same 60 people held out when the release was made are the control again
    assert body["linkage"]["targets"] == 240 and body["linkage"]["control_targets"] == 60
    assert body["linkage"]["excess"] is not None and body["note"] is None
    page = client.get(reverse("releases:detail", args=[release.pk])).content.decode()
    assert "Last run on demand" in page
    assert "An attacker who knows age and sex of someone in the release can link them" in page


def test_without_a_control_the_run_says_the_excess_cannot_be_measured(
    officer,
    patients,  # noqa: F811
):
    release = launch(officer, patients, K_PLAN, "no control")
    answer = api(officer).post(f"/api/v1/releases/{release.pk}/attacks/")
    assert answer.status_code == 202
    run(answer.json()["job"])
    body = api(officer).get(f"/api/v1/releases/{release.pk}/attacks/").json()
    assert body["linkage"]["excess"] is None and body["note"] == NO_CONTROL


def test_analysts_cannot_run_the_attacks(client, officer, steward, analyst, patients):  # noqa: F811
    from anonweb.releases.services import release_review

    release = launch(officer, patients, K_PLAN, "approved")
    release_review(
        user=steward, release=release, decision="approve", override="Reviewed for the test."
    )
    assert api(analyst).post(f"/api/v1/releases/{release.pk}/attacks/").status_code == 403
    client.force_login(analyst)
    assert client.post(reverse("releases:attack", args=[release.pk])).status_code == 403
    assert not Job.objects.filter(kind=JobKind.ATTACK).exists()


def test_two_microaggregations_reconstruct_doug_fultons_bmi_across_releases(
    client,
    officer,
    steward,
    bmi,  # noqa: F811
):
    first_plan, second_plan = bmi_plans()
    first = _release(officer, bmi, first_plan, "k1")
    alone = first.report["reconstruction"]
    assert alone["determined"] == 0 and alone["releases"] == ["this release"]
    second = _release(officer, bmi, second_plan, "k2")
    together = second.report["reconstruction"]
    assert together["determined"] == 1
    assert together["releases"] == ["this release", "release 1"]
    (bmi_col,) = [c for c in together["columns"] if c["column"] == "bmi"]
    assert bmi_col["records"] == [3] and bmi_col["values"] == {"3": 43.0}  # Doug Fulton

    # stewards: counts and columns; officers: which records
    steward_view = api(steward).get(f"/api/v1/releases/{second.pk}/attacks/").json()
    (col,) = [c for c in steward_view["reconstruction"]["columns"] if c["column"] == "bmi"]
    assert col["determined"] == 1 and "records" not in col and "values" not in col
    officer_view = api(officer).get(f"/api/v1/releases/{second.pk}/attacks/").json()
    (col,) = [c for c in officer_view["reconstruction"]["columns"] if c["column"] == "bmi"]
    assert col["records"] == [3]
    client.force_login(steward)
    page = client.get(reverse("releases:detail", args=[second.pk])).content.decode()
    assert "determine the exact bmi of 1 record(s)" in page
    assert 'data-testid="reconstructed-records"' not in page
    client.force_login(officer)
    page = client.get(reverse("releases:detail", args=[second.pk])).content.decode()
    assert 'data-testid="reconstructed-records">3<' in page

    # run on demand on the first release, the second now beside it
    job = Job.objects.get(
        pk=api(officer).post(f"/api/v1/releases/{first.pk}/attacks/").json()["job"]
    )
    run(job.pk)
    again = api(officer).get(f"/api/v1/releases/{first.pk}/attacks/").json()["reconstruction"]
    assert again["determined"] == 1 and set(again["releases"]) == {"release 1", "release 2"}


def test_a_dp_release_determines_nothing(officer, steward, patients):  # noqa: F811
    from anonweb.releases.budget import budget_set

    budget_set(user=steward, dataset=patients, epsilon=5.0)
    plan = {
        "version": 1,
        "steps": [{"kind": "dp_release", "params": {"kind": "count", "epsilon": 0.5}}],
    }
    release = launch(officer, patients, plan, "dp counts")
    rec = release.report["reconstruction"]
    assert rec["determined"] == 0 and rec["columns"] == []
    job = Job.objects.get(
        pk=api(officer).post(f"/api/v1/releases/{release.pk}/attacks/").json()["job"]
    )
    run(job.pk)
    body = api(officer).get(f"/api/v1/releases/{release.pk}/attacks/").json()
    assert body["reconstruction"]["determined"] == 0
    assert body["skipped"] == "the release publishes aggregates, not records"
