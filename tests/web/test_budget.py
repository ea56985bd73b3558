"""The privacy budget: set by a steward, charged at launch, previewed before anything runs."""

import json

import pytest
from django.urls import reverse

from anonweb.audit.models import AuditEvent
from anonweb.datasets.services import dataset_set_budget
from anonweb.jobs.models import Job, JobStatus
from anonweb.jobs.services import job_cancel, job_execute
from anonweb.releases.budget import ledger_for

pytestmark = pytest.mark.django_db


def _dp_plan(epsilon):
    return {
        "version": 1,
        "steps": [
            {
                "kind": "dp_release",
                "params": {
                    "kind": "histogram",
                    "epsilon": epsilon,
                    "columns": ["disease"],
                    "categories": {"disease": ["flu", "gastritis", "cancer"]},
                },
            }
        ],
    }


def _post(client, dataset, plan, **extra):
    return client.post(
        reverse("jobs:plan", args=[dataset.pk]), {"title": "dp", "plan": json.dumps(plan), **extra}
    )


def test_a_dp_plan_needs_a_budget(client, officer, dataset):
    client.force_login(officer)
    response = _post(client, dataset, _dp_plan(0.5))
    assert response.status_code == 400
    assert "no privacy budget is set" in response.content.decode()
    assert not Job.objects.exists()


def test_preview_shows_cost_and_accuracy_without_running(client, officer, steward, dataset):
    dataset_set_budget(user=steward, dataset=dataset, epsilon=1.0)
    client.force_login(officer)
    response = _post(client, dataset, _dp_plan(0.5), preview="1")
    assert response.status_code == 200
    assert not Job.objects.exists()
    privacy = response.context["privacy"]
    assert privacy["total"]["epsilon"] == pytest.approx(0.5)
    assert privacy["steps"][0]["preview"]["noise"]["scale"] == pytest.approx(2.0)
    assert "95% of released values lie within" in response.content.decode()


def test_launches_are_charged_and_refused_past_the_budget(
    client, officer, steward, dataset, django_capture_on_commit_callbacks
):
    dataset_set_budget(user=steward, dataset=dataset, epsilon=1.0)
    client.force_login(officer)
    with django_capture_on_commit_callbacks(execute=False):
        assert _post(client, dataset, _dp_plan(0.6)).status_code == 302
        refused = _post(client, dataset, _dp_plan(0.6))
    assert refused.status_code == 400
    assert "only ε = 0.4 of the budget ε = 1 remains" in refused.content.decode()
    assert Job.objects.count() == 1
    assert ledger_for(dataset).spent == pytest.approx(0.6)


def test_a_cancelled_queued_job_gives_its_epsilon_back_and_a_run_one_does_not(
    officer, steward, dataset
):
    from anonweb.jobs.services import anonymize_launch

    dataset_set_budget(user=steward, dataset=dataset, epsilon=1.0)
    first = anonymize_launch(user=officer, dataset=dataset, plan=_dp_plan(0.6), title="a")
    job_cancel(user=officer, job=first)
    assert ledger_for(dataset).spent == 0
    second = anonymize_launch(user=officer, dataset=dataset, plan=_dp_plan(0.6), title="b")
    job_execute(job_id=second.pk, worker="t")
    second.refresh_from_db()
    assert second.status == JobStatus.SUCCEEDED, second.error
    release = second.release
    assert release.report["privacy_cost"]["epsilon"] == pytest.approx(0.6)
    assert ledger_for(dataset).spent == pytest.approx(0.6)


def test_only_stewards_set_the_budget(client, officer, steward, dataset):
    client.force_login(officer)
    client.post(reverse("datasets:budget", args=[dataset.pk]), {"epsilon": "5"})
    dataset.refresh_from_db()
    assert dataset.epsilon_budget is None
    client.force_login(steward)
    response = client.post(
        reverse("datasets:budget", args=[dataset.pk]), {"epsilon": "-1"}, follow=True
    )
    assert "positive, finite epsilon" in response.content.decode()
    client.post(reverse("datasets:budget", args=[dataset.pk]), {"epsilon": "2.5"})
    dataset.refresh_from_db()
    assert dataset.epsilon_budget == 2.5
    assert AuditEvent.objects.get(action="dataset.budget_set").details == {
        "epsilon_budget": 2.5,
        "previous": None,
    }


def test_dataset_page_shows_the_ledger(client, steward, dataset):
    dataset_set_budget(user=steward, dataset=dataset, epsilon=3.0)
    client.force_login(steward)
    page = client.get(reverse("datasets:detail", args=[dataset.pk]))
    assert "Budget ε = 3.0" in page.content.decode()
