"""The release gate in the app: findings computed when the job finishes, stored with the release
and shown to the steward; purpose and recipient required at launch; the team's thresholds."""

import json

import pytest
from django.urls import reverse

from anonweb.audit.models import AuditEvent
from anonweb.jobs.models import Job, JobKind
from anonweb.jobs.services import anonymize_launch, job_create, job_execute
from anonweb.releases.models import Release, ReleasePolicy

pytestmark = pytest.mark.django_db

HIERARCHIES = {
    "age": {"builder": "interval", "width": 10},
    "sex": {"rows": [["F", "*"], ["M", "*"]]},
    "zip": {"builder": "mask"},
}


def plan(steps, qis=("age", "sex")):
    return {
        "version": 1,
        "quasi_identifiers": list(qis),
        "sensitive": ["disease"],
        "hierarchies": {q: HIERARCHIES[q] for q in qis},
        "steps": steps,
    }


def run(officer, dataset, the_plan, **params) -> Release:
    job = job_create(
        user=officer,
        team=dataset.team,
        kind=JobKind.ANONYMIZE,
        dataset=dataset,
        params={"plan": the_plan, "title": "t", "purpose": "study", "recipient": "lab", **params},
    )
    job_execute(job_id=job.pk, worker="test")
    return Job.objects.get(pk=job.pk).release


def codes(release) -> set[str]:
    return {f["code"] for f in release.findings}


def test_a_plan_without_drop_is_blocked_for_the_identifier(officer, dataset):
    release = run(officer, dataset, plan([]))
    found = [f for f in release.findings if f["code"] == "identifier_released"]
    assert found and found[0]["columns"] == ["name"] and found[0]["severity"] == "block"
    assert found[0]["records"] == 6
    # no quasi-identifier is generalized: the tagged zip, age and sex single everyone out
    assert "risk_k" in codes(release)
    assert sorted(release.gate["risk"]["quasi_identifiers"]) == ["age", "sex", "zip"]


def test_findings_are_computed_with_the_teams_thresholds(officer, steward, dataset):
    from anonweb.core.release.policy import PolicyThresholds
    from anonweb.releases.gate import release_policy_update

    steps = [
        {"kind": "drop", "params": {"columns": ["name", "zip"]}},
        {"kind": "generalize", "params": {"levels": {"age": 3, "sex": 0}}},
    ]
    # two classes, the three women and the three men: k = 3 < 5, prosecutor risk 1/3 > 0.2
    strict = run(officer, dataset, plan(steps))
    assert codes(strict) == {"risk_k", "risk_prosecutor"} and strict.gate["risk"]["k"] == 3
    release_policy_update(
        user=steward, team=dataset.team, thresholds=PolicyThresholds(k=3, max_prosecutor_risk=0.34)
    )
    assert codes(run(officer, dataset, plan(steps))) == set()
    event = AuditEvent.objects.filter(action="policy.updated").get()
    assert json.loads(event.details_text)["after"]["k"] == 3


def test_purpose_and_recipient_are_required_at_launch(client, officer, dataset):
    client.force_login(officer)
    body = {"title": "x", "plan": json.dumps(plan([]))}
    response = client.post(reverse("jobs:plan", args=[dataset.pk]), body)
    assert response.status_code == 400 and not Job.objects.exists()
    assert "purpose" in response.context["form"].errors
    assert "recipient" in response.context["form"].errors
    with pytest.raises(ValueError, match="purpose and recipient"):
        anonymize_launch(user=officer, dataset=dataset, plan=plan([]), title="x")


def test_purpose_recipient_and_findings_are_recorded(client, officer, steward, dataset):
    client.force_login(officer)
    body = {
        "title": "x",
        "purpose": "Readmission study 2026",
        "recipient": "University hospital",
        "plan": json.dumps(plan([])),
    }
    response = client.post(reverse("jobs:plan", args=[dataset.pk]), body)
    assert response.status_code == 302
    job = Job.objects.get()
    job_execute(job_id=job.pk, worker="test")
    release = Release.objects.get()
    assert (release.purpose, release.recipient) == ("Readmission study 2026", "University hospital")
    created = AuditEvent.objects.get(action="release.created")
    details = json.loads(created.details_text)
    assert details["purpose"] == "Readmission study 2026"
    assert {
        "code": "identifier_released",
        "severity": "block",
        "columns": ["name"],
        "records": 6,
    } in details["findings"]
    client.force_login(steward)
    page = client.get(reverse("releases:detail", args=[release.pk])).content.decode()
    assert "Readmission study 2026" in page and "University hospital" in page
    assert 'data-code="identifier_released"' in page


def test_the_policy_page(client, officer, steward, analyst, team):
    url = reverse("releases:policy")
    client.force_login(steward)
    assert 'name="k"' in client.get(url).content.decode()
    response = client.post(url, {"k": 10, "l": 3, "t": "", "max_prosecutor_risk": 0.1})
    assert response.status_code == 302
    row = ReleasePolicy.objects.get(team=team)
    assert (row.k, row.l, row.t, row.max_prosecutor_risk) == (10, 3, None, 0.1)
    assert client.post(url, {"k": 0, "l": 2, "max_prosecutor_risk": 0.2}).status_code == 400
    client.force_login(officer)
    page = client.get(url).content.decode()
    assert "k ≥ 10" in page and 'name="k"' not in page
    assert client.post(url, {"k": 1, "l": 1, "max_prosecutor_risk": 1}).status_code == 403
    assert ReleasePolicy.objects.get(team=team).k == 10


def test_the_policy_page_hides_other_teams(client, outsider, team):
    client.force_login(outsider)
    assert client.get(reverse("releases:policy_team", args=[team.pk])).status_code == 404


def test_an_untagged_column_is_blocked(officer, dataset):
    from anonweb.datasets.services import dataset_set_tags

    dataset_set_tags(user=officer, dataset=dataset, tags={"zip": ""})
    assert "zip" not in dataset.tags
    steps = [{"kind": "drop", "params": {"columns": ["name"]}}]
    release = run(officer, dataset, plan(steps))
    (f,) = [f for f in release.findings if f["code"] == "column_untagged"]
    assert f["columns"] == ["zip"]
