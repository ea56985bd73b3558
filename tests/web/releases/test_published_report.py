"""What an analyst can reach after a DP release and a k-anonymous release: the published report
only (no source row count, no source risk figure, no source cell value), the purpose, and the
audit events of the releases they can download."""

import json

import pytest
from django.urls import reverse

from anonweb.audit.models import AuditEvent
from anonweb.core.release.plan import get_step
from anonweb.core.release.report import STEP_PUBLIC
from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.jobs.services import job_create
from anonweb.releases.services import release_review
from tests.web.api.test_api import api
from tests.web.conftest import small_table

pytestmark = pytest.mark.django_db

OVERRIDE = "Reviewed by the steward: accepted for the published-report test."
PURPOSE = "Seasonal flu statistics for the regional bulletin"
RECIPIENT = "Regional health office"


def launch(officer, dataset, plan, title):
    job = job_create(
        user=officer,
        team=dataset.team,
        kind=JobKind.ANONYMIZE,
        dataset=dataset,
        params={"plan": plan, "title": title, "purpose": PURPOSE, "recipient": RECIPIENT},
    )
    job_execute(job_id=job.pk, worker="test")
    job = Job.objects.get(pk=job.pk)
    assert job.status == JobStatus.SUCCEEDED, job.error
    return job.release


@pytest.fixture
def releases(officer, steward, dataset):
    from anonweb.releases.budget import budget_set

    budget_set(user=steward, dataset=dataset, epsilon=5.0)
    k_plan = {
        "version": 1,
        "quasi_identifiers": ["age", "sex"],
        "sensitive": ["disease"],
        "hierarchies": {"age": {"builder": "interval", "width": 10}},
        "steps": [
            {"kind": "drop", "params": {"columns": ["name", "zip"]}},
            {"kind": "generalize", "params": {"levels": {"age": 3}}},
        ],
    }
    dp_plan = {
        "version": 1,
        "steps": [{"kind": "dp_release", "params": {"kind": "count", "epsilon": 0.5}}],
    }
    out = [launch(officer, dataset, k_plan, "k"), launch(officer, dataset, dp_plan, "dp")]
    for release in out:
        release_review(user=steward, release=release, decision="approve", override=OVERRIDE)
    return out


def source_values() -> list[str]:
    """Cells of the source that no release publishes (names, ZIP codes, exact ages).

    An age is looked for as a cell of its own (">29<"); a page also names releases, datasets,
    jobs and audit events by number, so an age that is such a number in this run (the database's
    sequences are not reset between tests) is left out rather than mistaken for a leak."""
    from anonweb.datasets.models import Dataset
    from anonweb.releases.models import Release

    numbers = set()
    for model in (Release, Dataset, Job, AuditEvent):
        numbers |= set(model.objects.values_list("pk", flat=True))
    df = small_table()
    ages = [f">{a}<" for a in df["age"] if int(a) not in numbers]
    return [*df["name"], *df["zip"], *ages]


def analyst_answers(client, analyst, releases) -> dict[str, str]:
    client.force_login(analyst)
    pages = {"home": reverse("home"), "releases": reverse("releases:list")}
    pages["audit"] = reverse("audit:list")
    for r in releases:
        pages[f"release {r.pk}"] = reverse("releases:detail", args=[r.pk])
    out = {}
    for name, url in pages.items():
        response = client.get(url)
        assert response.status_code == 200, name
        out[name] = response.content.decode()
    rest = api(analyst)
    out["api releases"] = json.dumps(rest.get("/api/v1/releases/").json())
    out["api audit"] = json.dumps(rest.get("/api/v1/audit/").json())
    for r in releases:
        answer = rest.get(f"/api/v1/releases/{r.pk}/")
        assert answer.status_code == 200
        out[f"api release {r.pk}"] = json.dumps(answer.json())
        utility = rest.get(f"/api/v1/releases/{r.pk}/utility/")
        assert utility.status_code == 403  # computed from the source: staff only
        out[f"api utility {r.pk}"] = json.dumps(utility.json())
    return out


def test_analysts_see_no_source_figure_or_cell(client, analyst, steward, releases):
    k_release, dp_release = releases
    answers = analyst_answers(client, analyst, releases)
    for name, text in answers.items():
        for value in source_values():
            assert value not in text, (name, value)
        for internal in ("rows_in", "risk_before", "source rows", "<th>Before</th>", RECIPIENT):
            assert internal not in text, (name, internal)
        assert 'data-testid="findings"' not in text and 'data-testid="conflicts"' not in text
        assert 'data-testid="utility' not in text
    # the staff pages do carry them: the checks above can fail
    client.force_login(steward)
    staff = client.get(reverse("releases:detail", args=[k_release.pk])).content.decode()
    assert "source rows" in staff and "<th>Before</th>" in staff and RECIPIENT in staff
    assert 'data-testid="utility"' in staff
    assert k_release.report["rows_in"] == 6 and k_release.report["risk_before"]["k"] == 1


def test_the_published_report_keeps_only_public_keys(analyst, releases):
    for release in releases:
        report = api(analyst).get(f"/api/v1/releases/{release.pk}/").json()["report"]
        public = {"steps", "privacy_cost", "rows_out", "risk_after", "row_order", "engine"}
        assert set(report) <= public
        assert report["engine"] == "pandas"  # which engine wrote it: no fact of the source
        for step, planned in zip(report["steps"], release.plan["steps"]):
            public = set(STEP_PUBLIC) | set(get_step(planned["kind"]).public_report)
            assert set(step) <= public, set(step) - public
    dp = releases[1]
    published = dp.published_report
    assert published["rows_out"] == 1 and published["risk_after"] is None
    assert "rows_in" in dp.report  # the internal report keeps the source's count


def test_the_analyst_sees_the_purpose_where_they_download(client, analyst, releases):
    client.force_login(analyst)
    page = client.get(reverse("releases:detail", args=[releases[0].pk])).content.decode()
    assert PURPOSE in page and 'data-testid="download-csv"' in page
    assert OVERRIDE in page  # the override stays visible on the release page


def test_analysts_see_only_events_of_releases_they_can_download(
    client, officer, analyst, dataset, releases
):
    pending = launch(officer, dataset, {"version": 1, "steps": []}, "pending")
    client.force_login(analyst)
    response = client.get(reverse("audit:list"))
    events = list(response.context["page"])
    assert events and {e.action for e in events} <= {"release.approved", "release.downloaded"}
    assert {e.target_id for e in events} <= {str(r.pk) for r in releases}
    assert str(pending.pk) not in {e.target_id for e in events}
    assert not any(e.target_type in ("dataset", "job") for e in events)


def test_a_failed_job_is_audited_with_facts_never_the_values_it_quotes(officer, dataset):
    """A message quoting cells in any spelling (quotes inside quotes, a NumPy repr) leaves no
    value in the audit trail: the event is built from the failure's kind and columns."""
    from anonweb.core.errors import DataError
    from anonweb.core.raw_values import failure_of
    from anonweb.jobs.services import _set_terminal

    job = job_create(
        user=officer,
        team=dataset.team,
        kind=JobKind.ANONYMIZE,
        dataset=dataset,
        params={"plan": {"version": 1, "steps": []}, "title": "t"},
    )
    message = (
        "value 'O'Brien \"Ann\" Lee' of column 'name' is not allowed; "
        "the value np.int64(39) of a int64 column age does not fit"
    )
    _set_terminal(
        job_id=job.pk,
        status=JobStatus.FAILED,
        from_statuses=[JobStatus.QUEUED],
        failure=failure_of(DataError(message), columns=dataset.column_names),
    )
    job.refresh_from_db()
    assert job.error_detail == message  # the officer's job page shows the message as it is
    event = AuditEvent.objects.get(action="job.failed")
    assert event.details == {"kind": "anonymize", "failure": "data", "columns": ["name", "age"]}
    for value in ("Brien", "Ann", "Lee", "39"):
        assert value not in event.details_text and value not in job.error
