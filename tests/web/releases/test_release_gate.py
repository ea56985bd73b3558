"""The release gate in the app: findings computed when the job finishes, stored with the release
and shown to the steward; purpose and recipient required at launch; the team's thresholds."""

import json

import pytest
from django.urls import reverse

from anonweb.audit.models import AuditEvent
from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import Job, JobKind
from anonweb.jobs.services import anonymize_launch, job_create
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


JUSTIFICATION = "The recipient is bound by contract and the name column is needed for linkage."


def test_a_blocked_release_needs_a_written_override(client, officer, steward, analyst, dataset):
    from anonweb.releases.services import ReleaseBlocked, ReviewError, release_review

    release = run(officer, dataset, plan([]))
    with pytest.raises(ReleaseBlocked) as refused:
        release_review(user=steward, release=release, decision="approve")
    assert {f["code"] for f in refused.value.findings} >= {"identifier_released", "risk_k"}
    with pytest.raises(ReviewError, match="20 characters"):
        release_review(user=steward, release=release, decision="approve", override="ok")
    release.refresh_from_db()
    assert release.status == "pending" and not release.override
    release = release_review(
        user=steward, release=release, decision="approve", note="see", override=JUSTIFICATION
    )
    assert release.status == "approved"
    assert release.override["justification"] == JUSTIFICATION
    assert {f["code"] for f in release.override["findings"]} == {
        f["code"] for f in release.blocking_findings
    }
    event = AuditEvent.objects.get(action="release.approved")
    details = json.loads(event.details_text)
    assert details["override"] == JUSTIFICATION
    assert {f["code"] for f in details["overridden"]} >= {"identifier_released", "risk_k"}
    # no cell value in the trail: the names stay out
    assert "Ann Lee" not in event.details_text
    for user in (steward, analyst):
        client.force_login(user)
        page = client.get(reverse("releases:detail", args=[release.pk])).content.decode()
        assert JUSTIFICATION in page and 'data-testid="override"' in page


def test_rejecting_needs_no_override(officer, steward, dataset):
    from anonweb.releases.services import release_review

    release = run(officer, dataset, plan([]))
    assert release_review(user=steward, release=release, decision="reject").status == "rejected"


def test_warn_findings_need_no_override(officer, steward, team):
    from anonweb.core.release.policy import PolicyThresholds
    from anonweb.datasets.services import dataset_create, dataset_set_tags
    from anonweb.releases.gate import release_policy_update
    from anonweb.releases.services import release_review
    from tests.web.conftest import csv_upload, small_table

    # a long free-text note per patient, reviewed and kept as is
    df = small_table().assign(
        note=[
            f"Patient reported mild symptoms, follow-up number {i} in two weeks" for i in range(6)
        ]
    )
    ds = dataset_create(user=officer, team=team, upload=csv_upload(df), name="notes")
    tags = {"name": "identifier", "zip": "other", "age": "quasi_identifier"}
    tags |= {"sex": "quasi_identifier", "disease": "sensitive", "note": "keep"}
    dataset_set_tags(user=officer, dataset=ds, tags=tags)
    release_policy_update(
        user=steward, team=team, thresholds=PolicyThresholds(k=3, max_prosecutor_risk=0.34)
    )
    steps = [
        {"kind": "drop", "params": {"columns": ["name", "zip"]}},
        {"kind": "generalize", "params": {"levels": {"age": 3, "sex": 0}}},
    ]
    release = run(officer, ds, plan(steps))
    assert [(f["code"], f["severity"]) for f in release.findings] == [("free_text_kept", "warn")]
    assert release_review(user=steward, release=release, decision="approve").status == "approved"
    assert not release.override


def test_the_review_page_refuses_then_accepts_with_a_justification(
    client, officer, steward, dataset
):
    release = run(officer, dataset, plan([]))
    client.force_login(steward)
    url = reverse("releases:review", args=[release.pk])
    page = client.post(url, {"decision": "approve", "note": ""}, follow=True).content.decode()
    assert "blocking finding" in page
    release.refresh_from_db()
    assert release.status == "pending"
    client.post(url, {"decision": "approve", "note": "", "override": JUSTIFICATION})
    release.refresh_from_db()
    assert release.status == "approved" and release.override["justification"] == JUSTIFICATION
    trail = client.get(reverse("audit:list")).content.decode()
    assert JUSTIFICATION in trail


def test_the_api_answers_409_with_the_findings(client, officer, steward, dataset):
    from tests.web.api.test_api_releases import api as api_for

    release = run(officer, dataset, plan([]))
    api = api_for(steward)
    url = f"/api/v1/releases/{release.pk}/review/"
    refused = api.post(url, {"decision": "approve"}, format="json")
    assert refused.status_code == 409
    assert "identifier_released" in {f["code"] for f in refused.json()["findings"]}
    accepted = api.post(url, {"decision": "approve", "override": JUSTIFICATION}, format="json")
    assert accepted.status_code == 200, accepted.json()
    assert accepted.json()["override"]["justification"] == JUSTIFICATION


def test_assess_without_a_quasi_identifier_is_refused_with_a_reason(client, officer, dataset):
    from anonweb.datasets.services import dataset_set_tags

    dataset_set_tags(
        user=officer, dataset=dataset, tags={"zip": "other", "age": "other", "sex": "other"}
    )
    client.force_login(officer)
    response = client.post(reverse("datasets:assess", args=[dataset.pk]), follow=True)
    assert "No column is tagged quasi-identifier" in response.content.decode()
    assert not Job.objects.filter(kind=JobKind.PROFILE).exists()
    page = client.get(reverse("datasets:detail", args=[dataset.pk])).content.decode()
    assert "js/tags.js" in page


def test_the_policy_is_a_list_of_models_on_the_page(client, officer, steward, team):
    url = reverse("releases:policy")
    client.force_login(steward)
    page = client.get(url).content.decode()
    assert 'name="beta_likeness__beta"' in page  # one field per registered model's parameter
    form = {"k": 4, "l": 2, "t": "", "max_prosecutor_risk": 0.25, "beta_likeness__beta": 1.5}
    assert client.post(url, form).status_code == 302
    row = ReleasePolicy.objects.get(team=team)
    assert row.model_specs == [
        {"model": "k_anonymity", "k": 4},
        {"model": "distinct_l", "l": 2},
        {"model": "beta_likeness", "beta": 1.5},
    ]
    assert (row.k, row.l, row.t) == (4, 2, None)  # the columns kept in step
    assert 'value="1.5"' in client.get(url).content.decode()
    client.force_login(officer)
    assert "enhanced 1.5-likeness on every sensitive column" in client.get(url).content.decode()
    # half a model (recursive diversity's c without its l) is refused with the core's reason
    client.force_login(steward)
    bad = {**form, "recursive_cl__c": 2}
    response = client.post(url, bad)
    assert response.status_code == 400 and "needs l" in response.content.decode()


def test_a_policy_row_from_before_the_list_reads_from_its_columns(team):
    import importlib

    from django.apps import apps

    from anonweb.releases.gate import thresholds_for

    ReleasePolicy.objects.create(team=team, k=7, l=3, t=0.4, max_prosecutor_risk=0.5)
    policy = thresholds_for(team=team)
    assert (policy.k, policy.l, policy.t) == (7, 3, 0.4)
    assert policy.models == (
        {"model": "k_anonymity", "k": 7},
        {"model": "distinct_l", "l": 3},
        {"model": "t_closeness", "t": 0.4},
    )
    # the data migration writes the same list into the row
    migration = importlib.import_module("anonweb.releases.migrations.0007_release_policy_models")
    migration.models_from_columns(apps, None)
    assert ReleasePolicy.objects.get(team=team).model_specs == list(policy.models)
    assert thresholds_for(team=team) == policy


def test_a_release_breaking_the_policys_beta_is_blocked(officer, steward, dataset):
    from anonweb.core.release.policy import PolicyThresholds
    from anonweb.releases.gate import release_policy_update

    release_policy_update(
        user=steward,
        team=dataset.team,
        thresholds=PolicyThresholds(
            max_prosecutor_risk=1.0,
            models=[
                {"model": "k_anonymity", "k": 1},
                {"model": "distinct_l", "l": 1},
                {"model": "beta_likeness", "beta": 0.01},
            ],
        ),
    )
    steps = [
        {"kind": "drop", "params": {"columns": ["name"]}},
        {"kind": "generalize", "params": {"levels": {"age": 1}}},
    ]
    release = run(officer, dataset, plan(steps))
    found = [f for f in release.findings if f["code"] == "risk_model"]
    assert found and found[0]["severity"] == "block" and found[0]["columns"] == ["disease"]
    assert "likeness on disease" in found[0]["message"]


def test_the_policy_form_sets_global_and_household_risk_ceilings(client, steward, team):
    url = reverse("releases:policy")
    client.force_login(steward)
    page = client.get(url).content.decode()
    assert 'name="global_risk__max"' in page and 'name="household_risk__household"' in page
    # a model that needs a population table cannot be a policy for every dataset of the team
    assert "delta_presence__" not in page
    form = {
        "k": 3,
        "l": 1,
        "t": "",
        "max_prosecutor_risk": 0.5,
        "global_risk__max": 0.05,
        "global_risk__weights": "weight",
        "household_risk__max": 0.1,
        "household_risk__household": "hh",
    }
    assert client.post(url, form).status_code == 302
    specs = ReleasePolicy.objects.get(team=team).model_specs
    assert {"model": "global_risk", "max": 0.05, "weights": "weight"} in specs
    assert {"model": "household_risk", "max": 0.1, "household": "hh"} in specs
    # a household ceiling without its column is refused with the core's reason
    bad = {**form, "household_risk__household": ""}
    response = client.post(url, bad)
    assert response.status_code == 400 and "needs household" in response.content.decode()
