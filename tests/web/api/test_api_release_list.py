"""Each release in ``GET /api/v1/releases/`` is what ``GET /api/v1/releases/{id}/`` gives for it,
for every reader: the list reads the conflicts of a whole page at once, and must write each
release as the detail does (officers: the values an attacker would infer; stewards: the
findings without them; analysts: the published report only, nothing of other releases)."""

from __future__ import annotations

import pandas as pd
import pytest

from anonweb.accounts.models import Membership, Role
from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.jobs.publication import release_create
from anonweb.jobs.services import anonymize_launch
from anonweb.releases.budget import budget_set
from anonweb.releases.models import ConflictFinding
from anonweb.releases.services import release_approve, release_reject
from tests.web.api.test_api_releases import PLAN, api
from tests.web.factories import member
from tests.web.releases.test_conflict_findings import (
    BMI,
    HEIGHT,
    NAMES,
    _release,
    _upload,
    bmi_plans,
)

pytestmark = pytest.mark.django_db

OVERRIDE = "Reviewed: the findings are accepted for this release."


def _dp_release(officer, steward, dataset):
    budget_set(user=steward, dataset=dataset, epsilon=2.0, delta=1e-5)
    steps = [{"kind": "histogram", "epsilon": 1.0, "columns": ["disease"], "delta": 1e-6}]
    plan = {"version": 1, "steps": [{"kind": "dp_release", "params": p} for p in steps]}
    job = anonymize_launch(
        user=officer, dataset=dataset, plan=plan, title="dp", purpose="p", recipient="r"
    )
    job_execute(job_id=job.pk, worker="t")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    return job.release


def _plain_release(user, dataset, title):
    job = Job.objects.create(
        team=dataset.team,
        dataset=dataset,
        created_by=user,
        kind=JobKind.ANONYMIZE,
        status=JobStatus.RUNNING,
    )
    frame = pd.DataFrame({"zip": ["476**", "479**"], "n": [1, 2]})
    return release_create(job=job, frame=frame, plan={"steps": []}, report={}, title=title)


def test_each_listed_release_is_its_detail_for_every_reader(
    officer, steward, analyst, team, other_team, dataset
):
    bmi = _upload(
        officer,
        team,
        pd.DataFrame({"name": NAMES, "bmi": BMI, "height": HEIGHT}),
        "bmi",
        {"name": "identifier", "bmi": "sensitive", "height": "quasi_identifier"},
    )
    first_plan, second_plan = bmi_plans()
    first = _release(officer, bmi, first_plan, "k1")
    second = _release(officer, bmi, second_plan, "k2")  # discloses a record with the first
    third = _release(officer, bmi, second_plan, "k2 again")
    assert ConflictFinding.objects.filter(release=second).exists()
    generalized = _release(officer, dataset, {k: v for k, v in PLAN.items() if k != "version"})
    dp = _dp_release(officer, steward, dataset)
    # a finding naming releases of two sources (its labels name the other source)
    cross = ConflictFinding.objects.create(
        release=generalized,
        position=0,
        type="linkage",
        records=2,
        columns=["age"],
        labels={"release 1": generalized.pk, "release 1 of bmi": first.pk},
        explanation="joined on age",
        facts={"l_by_release": {str(first.pk): 1}},
    )
    cross.involved.set([generalized, first])
    release_approve(user=steward, release=first, override=OVERRIDE)
    release_approve(user=steward, release=dp, override=OVERRIDE)
    release_approve(user=steward, release=generalized, override=OVERRIDE)
    release_reject(user=steward, release=second, note="discloses a record")
    # The analyst is a data steward of another team: staff there, an analyst here.
    Membership.objects.create(team=other_team, user=analyst, role=Role.DATA_STEWARD)
    their_officer = member(other_team, Role.PRIVACY_OFFICER)
    their_data = _upload(their_officer, other_team, pd.DataFrame({"n": [1, 2]}), "other", {})
    theirs = _plain_release(their_officer, their_data, "theirs")

    seen = {}
    for name, user in (("officer", officer), ("steward", steward), ("analyst", analyst)):
        client = api(user)
        listed = client.get("/api/v1/releases/?limit=1000")
        assert listed.status_code == 200
        items = listed.json()
        for item in items:
            detail = client.get(f"/api/v1/releases/{item['id']}/")
            assert detail.status_code == 200
            assert item == detail.json(), (name, item["id"])
        seen[name] = {item["id"]: item for item in items}

    ours = {first.pk, second.pk, third.pk, generalized.pk, dp.pk}
    assert set(seen["officer"]) == set(seen["steward"]) == ours
    # analysts: the approved releases of their team, and all of the team they steward
    assert set(seen["analyst"]) == {first.pk, generalized.pk, dp.pk, theirs.pk}
    for pk in (first.pk, generalized.pk, dp.pk):
        mine = seen["analyst"][pk]
        assert mine["conflicts"] == [] and mine["findings"] == [] and mine["recipient"] is None
        assert "findings" not in (mine["override"] or {})
    assert seen["analyst"][theirs.pk]["recipient"] is not None
    # the finding shows on both releases it names, the values to the officer only
    for pk in (first.pk, second.pk):
        officer_sees = seen["officer"][pk]["conflicts"]
        steward_sees = seen["steward"][pk]["conflicts"]
        assert officer_sees and all("private" not in c for c in steward_sees)
        assert [c["id"] for c in officer_sees] == [c["id"] for c in steward_sees]
    assert any("private" in c for c in seen["officer"][second.pk]["conflicts"])
    assert [c["id"] for c in seen["officer"][generalized.pk]["conflicts"]] == [cross.pk]
    assert cross.pk in [c["id"] for c in seen["officer"][first.pk]["conflicts"]]
