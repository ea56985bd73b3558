"""The privacy budget: one (ε, δ) ledger per source, set by a steward, charged at launch for
central and local DP alike, refunded only when nothing was drawn, previewed before anything runs."""

import html
import json

import pytest
from django.urls import reverse

from anonweb.audit.models import AuditEvent
from anonweb.core.errors import ParameterError
from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import Job, JobStatus
from anonweb.jobs.services import (
    anonymize_launch,
    job_cancel,
    job_claim,
    jobs_reap_stale,
)
from anonweb.releases.budget import budget_set, charge_spend, ledger_for
from anonweb.releases.models import ChargeState, PrivacyCharge
from tests.web.conftest import csv_upload

pytestmark = pytest.mark.django_db


def _dp_plan(epsilon, **params):
    query = {
        "kind": "histogram",
        "epsilon": epsilon,
        "columns": ["disease"],
        "categories": {"disease": ["flu", "gastritis", "cancer"]},
        **params,
    }
    return {"version": 1, "steps": [{"kind": "dp_release", "params": query}]}


def _selection_plan(epsilon, delta):
    query = {"kind": "histogram", "epsilon": epsilon, "columns": ["disease"], "delta": delta}
    return {"version": 1, "steps": [{"kind": "dp_release", "params": query}]}


def _ldp_plan(epsilon):
    return {
        "version": 1,
        "steps": [
            {"kind": "drop", "params": {"columns": ["name"]}},
            {
                "kind": "ldp_randomized_response",
                "params": {
                    "column": "disease",
                    "epsilon": epsilon,
                    "categories": ["flu", "gastritis", "cancer"],
                },
            },
        ],
    }


def _post(client, dataset, plan, **extra):
    return client.post(
        reverse("jobs:plan", args=[dataset.pk]),
        {
            "title": "dp",
            "purpose": "testing",
            "recipient": "test team",
            "plan": json.dumps(plan),
            **extra,
        },
    )


def test_a_dp_plan_needs_a_budget(client, officer, dataset):
    client.force_login(officer)
    response = _post(client, dataset, _dp_plan(0.5))
    assert response.status_code == 400
    assert "no privacy budget is set" in response.content.decode()
    assert not Job.objects.exists()


def test_preview_shows_cost_and_accuracy_without_running(client, officer, steward, dataset):
    budget_set(user=steward, dataset=dataset, epsilon=1.0)
    client.force_login(officer)
    response = _post(client, dataset, _dp_plan(0.5), preview="1")
    assert response.status_code == 200
    assert not Job.objects.exists()
    privacy = response.context["privacy"]
    assert privacy["total"]["epsilon"] == pytest.approx(0.5)
    assert privacy["steps"][0]["preview"]["noise"]["scale"] == pytest.approx(2.0)
    statement = privacy["steps"][0]["preview"]["accuracy"]
    assert statement.startswith("With 95% confidence")
    assert html.escape(statement) in response.content.decode()


def test_launches_are_charged_and_refused_past_the_budget(
    client, officer, steward, dataset, django_capture_on_commit_callbacks
):
    budget_set(user=steward, dataset=dataset, epsilon=1.0)
    client.force_login(officer)
    with django_capture_on_commit_callbacks(execute=False):
        assert _post(client, dataset, _dp_plan(0.6)).status_code == 302
        refused = _post(client, dataset, _dp_plan(0.6))
    assert refused.status_code == 400
    assert "only ε = 0.4 of the budget ε = 1 remains" in refused.content.decode()
    assert Job.objects.count() == 1
    assert ledger_for(dataset).spent == pytest.approx(0.6)
    assert PrivacyCharge.objects.get().state == ChargeState.RESERVED


def test_a_cancelled_queued_job_gives_its_epsilon_back_and_a_run_one_does_not(
    officer, steward, dataset
):
    budget_set(user=steward, dataset=dataset, epsilon=1.0)
    first = anonymize_launch(
        user=officer,
        dataset=dataset,
        plan=_dp_plan(0.6),
        title="a",
        purpose="testing",
        recipient="test team",
    )
    job_cancel(user=officer, job=first)
    assert ledger_for(dataset).spent == 0
    assert AuditEvent.objects.get(action="job.cancelled").details["privacy_refunded"] is True
    second = anonymize_launch(
        user=officer,
        dataset=dataset,
        plan=_dp_plan(0.6),
        title="b",
        purpose="testing",
        recipient="test team",
    )
    job_execute(job_id=second.pk, worker="t")
    second.refresh_from_db()
    assert second.status == JobStatus.SUCCEEDED, second.error
    assert second.release.report["privacy_cost"]["epsilon"] == pytest.approx(0.6)
    ledger = ledger_for(dataset)
    assert ledger.spent == pytest.approx(0.6) and ledger.spent_epsilon == pytest.approx(0.6)
    assert [e["state"] for e in ledger.entries] == ["refunded", "spent"]


def test_a_job_cancelled_after_its_mechanisms_ran_stays_charged(officer, steward, dataset):
    """The worker marks the charge spent before the DP step reads the data; a cancellation that
    arrives afterwards stops the job but cannot give back what the noise already cost."""
    from anonweb.jobs.services import _set_terminal

    budget_set(user=steward, dataset=dataset, epsilon=1.0)
    job = anonymize_launch(
        user=officer,
        dataset=dataset,
        plan=_dp_plan(0.6),
        title="a",
        purpose="testing",
        recipient="test team",
    )
    assert job_claim(job_id=job.pk, worker="t")
    assert charge_spend(job_id=job.pk)  # what the runner does just before the DP step
    job_cancel(user=officer, job=job)  # running: only requested
    _set_terminal(  # what the worker does on its next progress report
        job_id=job.pk,
        status=JobStatus.CANCELLED,
        from_statuses=(JobStatus.RUNNING,),
    )
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED
    assert ledger_for(dataset).spent == pytest.approx(0.6)
    assert PrivacyCharge.objects.get(job=job).state == ChargeState.SPENT


def test_a_job_lost_before_it_ran_its_plan_is_refunded_and_cannot_draw_later(
    officer, steward, dataset, settings
):
    from datetime import timedelta

    from django.utils import timezone

    budget_set(user=steward, dataset=dataset, epsilon=1.0)
    job = anonymize_launch(
        user=officer,
        dataset=dataset,
        plan=_dp_plan(0.6),
        title="a",
        purpose="testing",
        recipient="test team",
    )
    assert job_claim(job_id=job.pk, worker="t")
    Job.objects.filter(pk=job.pk).update(heartbeat_at=timezone.now() - timedelta(days=1))
    assert jobs_reap_stale() == 1
    assert ledger_for(dataset).spent == 0
    # A worker that wakes up afterwards is told not to draw.
    assert charge_spend(job_id=job.pk) is False


def test_delta_is_budgeted(officer, steward, dataset):
    """Eight key selections at δ = 0.1 each were accepted; δ now has a budget of its own."""
    budget_set(user=steward, dataset=dataset, epsilon=100.0)
    with pytest.raises(ParameterError, match="allows no δ"):
        anonymize_launch(
            user=officer,
            dataset=dataset,
            plan=_selection_plan(1, 0.1),
            title="x",
            purpose="testing",
            recipient="test team",
        )
    budget_set(user=steward, dataset=dataset, epsilon=100.0, delta=0.25)
    first = anonymize_launch(
        user=officer,
        dataset=dataset,
        plan=_selection_plan(1, 0.1),
        title="x",
        purpose="testing",
        recipient="test team",
    )
    delta = first.privacy_charge.delta
    assert 0 < delta <= 0.1
    budget_set(user=steward, dataset=dataset, epsilon=100.0, delta=2.5 * delta)
    anonymize_launch(
        user=officer,
        dataset=dataset,
        plan=_selection_plan(1, 0.1),
        title="x",
        purpose="testing",
        recipient="test team",
    )
    with pytest.raises(ParameterError, match=r"only δ = \S+ of the budget δ = \S+ remains"):
        anonymize_launch(
            user=officer,
            dataset=dataset,
            plan=_selection_plan(1, 0.1),
            title="x",
            purpose="testing",
            recipient="test team",
        )
    assert ledger_for(dataset).used_delta == pytest.approx(2 * delta)
    assert Job.objects.count() == 2


def test_local_dp_releases_are_charged(officer, steward, dataset):
    """ε = 50 of randomized response was accepted with the budget spent: the server holds the
    raw table, so its locally randomized copy is a release about the same people."""
    budget_set(user=steward, dataset=dataset, epsilon=2.0)
    job = anonymize_launch(
        user=officer,
        dataset=dataset,
        plan=_ldp_plan(1.5),
        title="ldp",
        purpose="testing",
        recipient="test team",
    )
    assert job.privacy_charge.epsilon == pytest.approx(1.5)
    # (local ε above 30 is refused by the step's schema before the budget is looked at)
    with pytest.raises(ParameterError, match="only ε = 0.5 of the budget ε = 2 remains"):
        anonymize_launch(
            user=officer,
            dataset=dataset,
            plan=_ldp_plan(20),
            title="ldp",
            purpose="testing",
            recipient="test team",
        )
    with pytest.raises(ParameterError, match="only ε = 0.5"):
        anonymize_launch(
            user=officer,
            dataset=dataset,
            plan=_dp_plan(0.6),
            title="dp",
            purpose="testing",
            recipient="test team",
        )
    job_execute(job_id=job.pk, worker="t")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    entry = ledger_for(dataset).entries[0]
    assert entry["state"] == "spent" and entry["local_epsilon"] == pytest.approx(1.5)


def test_an_identical_reupload_shares_the_ledger(officer, steward, team, dataset):
    from anonweb.datasets.services import dataset_create

    budget_set(user=steward, dataset=dataset, epsilon=1.0)
    anonymize_launch(
        user=officer,
        dataset=dataset,
        plan=_dp_plan(0.8),
        title="first",
        purpose="testing",
        recipient="test team",
    )
    again = dataset_create(user=officer, team=team, upload=csv_upload(), name="patients again")
    assert again.source_sha256 == dataset.source_sha256
    ledger = ledger_for(again)
    assert ledger.epsilon == 1.0 and ledger.spent == pytest.approx(0.8)
    assert [d["name"] for d in ledger.datasets] == ["patients", "patients again"]
    with pytest.raises(ParameterError, match="only ε = 0.2"):
        anonymize_launch(
            user=officer,
            dataset=again,
            plan=_dp_plan(0.8),
            title="second",
            purpose="testing",
            recipient="test team",
        )
    # A different file is another source, with a budget of its own.
    from tests.web.conftest import small_table

    other = dataset_create(
        user=officer, team=team, upload=csv_upload(small_table().iloc[:5]), name="other"
    )
    assert ledger_for(other).epsilon is None


def test_an_exact_split_fits_a_budget_of_exactly_its_total(officer, steward, dataset):
    budget_set(user=steward, dataset=dataset, epsilon=2.0)
    from anonweb.core.dp.accounting import split_epsilon

    shares = split_epsilon(2.0, 3)
    plan = {
        "version": 1,
        "steps": [
            {"kind": "dp_release", "params": _dp_plan(s)["steps"][0]["params"]} for s in shares
        ],
    }
    anonymize_launch(
        user=officer,
        dataset=dataset,
        plan=plan,
        title="three",
        purpose="testing",
        recipient="test team",
    )
    assert ledger_for(dataset).remaining == pytest.approx(0.0, abs=1e-12)


def test_only_stewards_set_the_budget(client, officer, steward, dataset):
    client.force_login(officer)
    response = client.post(reverse("datasets:budget", args=[dataset.pk]), {"epsilon": "5"})
    assert response.status_code == 403
    assert ledger_for(dataset).epsilon is None
    client.force_login(steward)
    response = client.post(
        reverse("datasets:budget", args=[dataset.pk]), {"epsilon": "-1"}, follow=True
    )
    assert "positive, finite number" in response.content.decode()
    response = client.post(
        reverse("datasets:budget", args=[dataset.pk]), {"epsilon": "1", "delta": "2"}, follow=True
    )
    assert "below 1" in response.content.decode()
    client.post(reverse("datasets:budget", args=[dataset.pk]), {"epsilon": "2.5", "delta": "1e-6"})
    ledger = ledger_for(dataset)
    assert (ledger.epsilon, ledger.delta) == (2.5, 1e-6)
    details = AuditEvent.objects.get(action="dataset.budget_set").details
    assert details["epsilon"] == 2.5 and details["delta"] == 1e-6
    assert details["previous"] == {"epsilon": None, "delta": None}
    assert details["composition"] == "basic"


def test_dataset_page_shows_the_ledger(client, steward, dataset):
    budget_set(user=steward, dataset=dataset, epsilon=3.0, delta=1e-5)
    client.force_login(steward)
    page = client.get(reverse("datasets:detail", args=[dataset.pk])).content.decode()
    assert "Budget ε = 3, δ = 1e-5" in page
    assert "Composition: basic" in page
    assert 'name="delta"' in page


def test_the_ledger_selector_is_scoped_to_the_team(officer, outsider, dataset):
    from django.http import Http404

    from anonweb.releases.budget import budget_get_for_user

    assert budget_get_for_user(user=officer, dataset_id=dataset.pk).to_dict()["epsilon"] is None
    with pytest.raises(Http404):
        budget_get_for_user(user=outsider, dataset_id=dataset.pk)


def test_a_steward_cannot_lower_the_budget_below_what_is_already_used(
    client, officer, steward, dataset
):
    """ε = 0.6 spent by a release and 0.3 reserved by a queued job: a budget of 0.5 would read as
    if that loss had not happened. It is refused, naming the amount used, on the page and in the
    API; the budget stays as it was. Raising it, or removing it, still works."""
    budget_set(user=steward, dataset=dataset, epsilon=2.0)
    spent = anonymize_launch(
        user=officer,
        dataset=dataset,
        plan=_dp_plan(0.6),
        title="a",
        purpose="testing",
        recipient="test team",
    )
    job_execute(job_id=spent.pk, worker="t")
    anonymize_launch(
        user=officer,
        dataset=dataset,
        plan=_dp_plan(0.3),
        title="b",
        purpose="testing",
        recipient="test team",
    )
    assert ledger_for(dataset).spent == pytest.approx(0.9)

    client.force_login(steward)
    page = client.post(
        reverse("datasets:budget", args=[dataset.pk]), {"epsilon": "0.5"}, follow=True
    ).content.decode()
    assert "the ε budget cannot be lowered to 0.5: this source has already used ε = 0.9" in page
    assert "of which 0.3 is reserved by jobs still running" in page
    assert ledger_for(dataset).epsilon == 2.0

    api = client.put(
        f"/api/v1/datasets/{dataset.pk}/budget/",
        json.dumps({"epsilon": 0.8, "delta": None}),
        content_type="application/json",
    )
    assert api.status_code == 400
    assert "already used ε = 0.9" in " ".join(api.json()["errors"])
    assert ledger_for(dataset).epsilon == 2.0
    assert AuditEvent.objects.filter(action="dataset.budget_set").count() == 1

    assert budget_set(user=steward, dataset=dataset, epsilon=0.9).epsilon == 0.9  # exactly used
    assert budget_set(user=steward, dataset=dataset, epsilon=None).epsilon is None
