"""The release gate reads the newest attack figures (issue "Attack every release"): attacks run
again from the release page replace those the publishing job measured, they are checked
against the team policy's caps as they stand at the decision, and a new run is a new state of
the gate, so an override written before it is refused."""

from __future__ import annotations

import pytest
from django.urls import reverse

from anonweb.core.attacks.gate import ATTACK_CODES
from anonweb.core.release.policy import PolicyThresholds
from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.releases.attacks import ON_DEMAND_FILE, release_attacks_get
from anonweb.releases.gate import release_gate_now, release_policy_update
from anonweb.releases.models import ReleaseStatus
from anonweb.releases.services import FindingsChanged, release_approve
from anonweb.releases.storage import read_private_json, write_private_json
from tests.web.releases.test_published_report import launch
from tests.web.releases.test_release_attacks import K_PLAN, patients  # noqa: F401

pytestmark = pytest.mark.django_db

JUSTIFICATION = "Accepted: the recipient is bound by contract not to link records."


def attack_codes(gate) -> list[str]:
    return [f["code"] for f in gate.findings if f["code"] in ATTACK_CODES]


def figures(*, linkage_excess: float | None) -> dict:
    """Attack figures as an on-demand run writes them (the keys the gate reads)."""
    return {
        "known": ["age", "sex"],
        "linkage": {"excess": linkage_excess, "ci": [0.0, 0.5]},
        "singling_out": {"excess": None},
        "inference": {},
        "membership": {"auc": 0.5, "ci": [0.4, 0.6]},
        "reconstruction": {"determined": 0, "releases": [], "columns": [], "sentence": ""},
        "run_at": "2026-01-01T00:00:00+00:00",
    }


@pytest.fixture
def release(officer, patients):  # noqa: F811
    return launch(officer, patients, {**K_PLAN, "attacks": {"holdout": 0.2}}, "attacked")


def test_the_gate_checks_the_newest_figures_against_the_policy_caps(client, steward, team, release):
    before = release_gate_now(release=release)
    assert attack_codes(before) == []  # the policy caps nothing yet
    release_policy_update(
        user=steward, team=team, thresholds=PolicyThresholds(max_attack_excess=0.25)
    )
    capped = release_gate_now(release=release)
    assert capped.version != before.version  # the caps are part of the state

    # attacks run again from the release page: a job whose figures the gate reads
    client.force_login(steward)
    client.post(reverse("releases:attack", args=[release.pk]))
    job = Job.objects.get(kind=JobKind.ATTACK)
    job_execute(job_id=job.pk, worker="test")
    assert Job.objects.get(pk=job.pk).status == JobStatus.SUCCEEDED
    rerun = release_gate_now(release=release)
    assert rerun.version != capped.version
    assert release_attacks_get(release=release) == read_private_json(
        release.storage_key, ON_DEMAND_FILE
    )

    # a newer run that succeeds far above the cap blocks the release...
    write_private_json(release.storage_key, ON_DEMAND_FILE, figures(linkage_excess=0.4))
    high = release_gate_now(release=release)
    assert high.version != rerun.version
    blocking = [f for f in high.blocking if f["code"] == "attack_excess"]
    assert [f["facts"]["excess"] for f in blocking] == [0.4]
    assert blocking[0]["facts"]["max_attack_excess"] == 0.25

    # ...and one within it does not, whatever was recorded when the release was written
    write_private_json(release.storage_key, ON_DEMAND_FILE, figures(linkage_excess=0.1))
    low = release_gate_now(release=release)
    assert attack_codes(low) == [] and low.version != high.version
    # the same figures and policy are the same state (the cached check is reused)
    assert release_gate_now(release=release).version == low.version


def test_an_override_written_before_a_new_attack_run_is_refused(steward, team, release):
    release_policy_update(
        user=steward, team=team, thresholds=PolicyThresholds(max_attack_excess=0.25)
    )
    write_private_json(release.storage_key, ON_DEMAND_FILE, figures(linkage_excess=0.4))
    read = release_gate_now(release=release)
    assert "attack_excess" in {f["code"] for f in read.blocking}
    write_private_json(release.storage_key, ON_DEMAND_FILE, figures(linkage_excess=0.6))
    with pytest.raises(FindingsChanged):
        release_approve(user=steward, release=release, override=JUSTIFICATION, seen=read.version)
    release.refresh_from_db()
    assert release.status == ReleaseStatus.PENDING
    approved = release_approve(
        user=steward,
        release=release,
        override=JUSTIFICATION,
        seen=release_gate_now(release=release).version,
    )
    assert approved.status == ReleaseStatus.APPROVED
    overridden = approved.override["findings"]
    assert any(f["code"] == "attack_excess" for f in overridden)
