"""A source is its file: a release made from a second upload of the same file is checked against
the releases of the first (as the privacy budget is shared), and nothing is shared across teams."""

import pandas as pd
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from anonweb.datasets.services import dataset_create, dataset_set_tags
from anonweb.releases.models import ConflictFinding
from tests.web.factories import member
from tests.web.releases.test_conflict_findings import BMI, HEIGHT, NAMES, _release, bmi_plans

pytestmark = pytest.mark.django_db

TAGS = {"name": "identifier", "bmi": "sensitive", "height": "quasi_identifier"}


def _upload(user, team, name):
    csv = pd.DataFrame({"name": NAMES, "bmi": BMI, "height": HEIGHT}).to_csv(index=False)
    ds = dataset_create(
        user=user, team=team, upload=SimpleUploadedFile(f"{name}.csv", csv.encode()), name=name
    )
    return dataset_set_tags(user=user, dataset=ds, tags=TAGS)


def test_a_second_upload_of_the_same_file_is_the_same_source(client, officer, steward, team):
    first_plan, second_plan = bmi_plans()
    one = _upload(officer, team, "bmi")
    again = _upload(officer, team, "bmi-again")
    assert one.source_sha256 == again.source_sha256
    first = _release(officer, one, first_plan)
    second = _release(officer, again, second_plan)
    assert second.conflicts_checked == [first.pk]
    (finding,) = ConflictFinding.objects.filter(release=second, type="exact_inference")
    assert "release 1 of bmi" in finding.explanation
    client.force_login(steward)
    page = client.get(reverse("releases:detail", args=[first.pk])).content.decode()
    assert "release 1 of bmi-again" in page and 'data-type="exact_inference"' in page


def test_another_teams_upload_of_the_same_file_is_not_compared(officer, team, other_team):
    first_plan, second_plan = bmi_plans()
    from anonweb.accounts.models import Role

    elsewhere = member(other_team, Role.PRIVACY_OFFICER, username="otto")
    _release(officer, _upload(officer, team, "bmi"), first_plan)
    theirs = _release(elsewhere, _upload(elsewhere, other_team, "bmi"), second_plan)
    assert theirs.conflicts_checked == [] and not theirs.conflict_findings.exists()


def test_a_plan_listing_no_quasi_identifier_is_checked_on_the_tagged_ones(officer, team):
    """Issue 8: a plan without quasi-identifiers got no conflict check at all."""
    df = pd.DataFrame(
        {
            "h": list("PPQQRR"),
            "g": list("XYYZZX"),
            "disease": ["flu", "hiv", "cancer", "flu", "hiv", "cancer"],
        }
    )
    ds = dataset_create(
        user=officer,
        team=team,
        upload=SimpleUploadedFile("c.csv", df.to_csv(index=False).encode()),
        name="c",
    )
    ds = dataset_set_tags(
        user=officer,
        dataset=ds,
        tags={"h": "quasi_identifier", "g": "quasi_identifier", "disease": "sensitive"},
    )
    for drop in ("g", "h"):
        plan = {
            "sensitive": ["disease"],
            "steps": [{"kind": "drop", "params": {"columns": [drop]}}],
        }
        second = _release(officer, ds, plan)
    (finding,) = second.conflict_findings.all()
    assert finding.type == "intersection" and finding.records == 6


def test_a_dp_release_is_left_to_the_budget_and_does_not_hide_the_others(
    client, officer, steward, dataset, django_capture_on_commit_callbacks
):
    from anonweb.jobs.execution import job_execute
    from anonweb.jobs.models import Job
    from anonweb.jobs.services import anonymize_launch
    from anonweb.releases.budget import budget_set

    budget_set(user=steward, dataset=dataset, epsilon=1.0)
    query = {
        "kind": "histogram",
        "epsilon": 0.5,
        "columns": ["disease"],
        "categories": {"disease": ["flu", "gastritis", "cancer"]},
    }
    with django_capture_on_commit_callbacks(execute=False):
        job = anonymize_launch(
            user=officer,
            dataset=dataset,
            plan={"version": 1, "steps": [{"kind": "dp_release", "params": query}]},
            title="dp",
            purpose="counts",
            recipient="public",
        )
    job_execute(job_id=job.pk, worker="t")
    dp = Job.objects.get(pk=job.pk).release
    assert dp.conflicts_checked is None and not dp.conflict_findings.exists()
    client.force_login(steward)
    page = client.get(reverse("releases:detail", args=[dp.pk])).content.decode()
    assert 'data-testid="no-conflicts"' not in page
    # A record-level release after it is checked against it (the DP one adds no equation).
    plan = {
        "quasi_identifiers": ["age"],
        "steps": [{"kind": "drop", "params": {"columns": ["name"]}}],
    }
    rows = _release(officer, dataset, plan)
    assert rows.conflicts_checked == [dp.pk] and not rows.conflict_findings.exists()
