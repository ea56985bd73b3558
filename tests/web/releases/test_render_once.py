"""What never changes is built once: a release's charts per view kind (internal for the team's
officers and stewards, published for everyone else), a profile's risk charts, a gate check that
cannot run; an analyst never receives what was built for an officer; pages cost a bounded
number of queries; API lists answer 304 to a client that holds their current version."""

from collections import Counter

import pytest
from django.core.cache import cache
from django.urls import reverse

from anonweb.common.charts import INTERNAL, PUBLISHED, builds
from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import JobKind
from anonweb.jobs.services import job_create
from anonweb.releases import fragments, gate
from anonweb.releases.fragments import ReleaseFragments, fragment_key
from anonweb.releases.services import release_review
from tests.web.api.test_api import api
from tests.web.releases.test_published_report import OVERRIDE, launch

pytestmark = pytest.mark.django_db

K_PLAN = {
    "version": 1,
    "quasi_identifiers": ["age", "sex"],
    "sensitive": ["disease"],
    "hierarchies": {"age": {"builder": "interval", "width": 10}},
    "steps": [
        {"kind": "drop", "params": {"columns": ["name", "zip"]}},
        {"kind": "generalize", "params": {"levels": {"age": 3}}},
    ],
}


@pytest.fixture(autouse=True)
def _queue_checks_off(queue_checks_off):
    """Query counts measure the page (see the fixture)."""


@pytest.fixture
def published(officer, steward, dataset):
    release = launch(officer, dataset, K_PLAN, "k")
    release_review(user=steward, release=release, decision="approve", override=OVERRIDE)
    return release


@pytest.fixture
def release(published):
    """A release whose page parts are not kept (published before they were built at
    publication, or the cache was emptied since): its first reader builds them."""
    cache.clear()
    return published


@pytest.fixture
def chart_calls(monkeypatch):
    """The reports' ``risk_after`` each release chart build drew."""
    calls = []
    real = fragments.risk_charts

    def spy(risk):
        calls.append(risk)
        return real(risk)

    monkeypatch.setattr(fragments, "risk_charts", spy)
    return calls


def _page(client, user, release):
    client.force_login(user)
    response = client.get(reverse("releases:detail", args=[release.pk]))
    assert response.status_code == 200
    return response


def test_viewing_a_release_page_twice_builds_its_charts_once(client, officer, release, chart_calls):
    before = builds["release"]
    first = _page(client, officer, release)
    second = _page(client, officer, release)
    assert len(chart_calls) == 1 and builds["release"] == before + 1
    assert first.context["charts"] and first.context["charts"] == second.context["charts"]
    assert b"chart-" in second.content or b'class="chart"' in second.content


def test_each_view_kind_is_built_from_its_own_report(
    client, officer, analyst, release, chart_calls
):
    _page(client, officer, release)
    _page(client, analyst, release)
    _page(client, analyst, release)
    assert chart_calls == [release.report["risk_after"], release.published_report["risk_after"]]


def test_an_analyst_never_receives_the_fragment_built_for_an_officer(
    client, officer, analyst, outsider, release
):
    _page(client, officer, release)
    # Mark the officer's entry: whoever is served from it shows the mark.
    mark = {"id": "chart-MARK", "data_id": "chart-MARK-data", "figure": {"data": [], "layout": {}}}
    marked = ReleaseFragments(view=INTERNAL, charts=[mark])
    cache.set(fragment_key(release=release, view=INTERNAL, part="page"), (marked,))
    assert _page(client, officer, release).context["charts"] == marked.charts  # it is read

    seen = _page(client, analyst, release)
    assert seen.context["charts"] != marked.charts and b"MARK" not in seen.content
    published = cache.get(fragment_key(release=release, view=PUBLISHED, part="page"))[0]
    assert published.view == PUBLISHED and seen.context["charts"] == published.charts
    assert seen.context["alternatives"] == []

    client.force_login(outsider)
    assert client.get(reverse("releases:detail", args=[release.pk])).status_code == 404


def test_publication_builds_every_view_kind_so_no_reader_pays(
    client, officer, steward, analyst, published, chart_calls, monkeypatch
):
    before = dict(builds)
    reads = []  # the gate's check reads the source: done at publication, not by a page
    real = gate._source
    monkeypatch.setattr(gate, "_source", lambda r: reads.append(r.pk) or real(r))
    pages = {
        who: _page(client, user, published)
        for who, user in [("officer", officer), ("steward", steward), ("analyst", analyst)]
    }
    # all read back, nothing built; but the page bodies, kept per the state each shows (a
    # template rendered once, no figure): the published readers' one and each staff reader's
    # (an officer's, a steward's), which their first reader renders
    kept_bodies = Counter({"release-body": 1, "release-staff-body": 2})
    assert chart_calls == [] and builds - kept_bodies == +Counter(before)
    assert reads == [] and pages["steward"].context["gate"].rechecked
    # What was kept is what a first reader would have built (from the same stored reports).
    cache.clear()
    fresh = {
        who: _page(client, user, published)
        for who, user in [("officer", officer), ("steward", steward), ("analyst", analyst)]
    }
    for who in pages:
        for name in ("charts", "alternatives", "disclosing", "formats", "utility"):
            assert pages[who].context[name] == fresh[who].context[name], (who, name)
        assert pages[who].content.count(b'class="chart"') == fresh[who].content.count(
            b'class="chart"'
        )
    assert chart_calls == [published.report["risk_after"], published.published_report["risk_after"]]
    assert pages["analyst"].context["utility"] is None  # the source's figures: staff only
    assert pages["officer"].context["charts"] and pages["officer"].context["utility"]


def test_a_steward_reads_the_utility_without_the_officer_s_labels(
    client, officer, steward, release
):
    before = builds["utility"]
    officer_view = _page(client, officer, release).context["utility"]
    steward_view = _page(client, steward, release).context["utility"]
    _page(client, steward, release)
    assert builds["utility"] == before + 2  # one per kind of reader, then read back
    from anonweb.core.raw_values import public_utility

    assert steward_view == public_utility(officer_view)


def test_a_gate_that_cannot_recheck_reads_the_source_once(
    client, steward, officer, dataset, monkeypatch
):
    import pandas as pd

    from anonweb.jobs.models import Job, JobStatus
    from anonweb.jobs.publication import release_create

    job = Job.objects.create(
        team=dataset.team,
        dataset=dataset,
        created_by=officer,
        kind=JobKind.ANONYMIZE,
        status=JobStatus.RUNNING,
    )
    frame = pd.DataFrame({"zip": ["476**", "479**"], "n": [1, 2]})
    release = release_create(job=job, frame=frame, plan={"steps": []}, report={}, title="t")
    reads = []
    real = gate._source
    monkeypatch.setattr(gate, "_source", lambda r: reads.append(r.pk) or real(r))
    pages = [_page(client, steward, release) for _ in range(3)]
    assert reads == [release.pk]
    notes = [p.context["gate"].notes for p in pages]
    assert notes[0] and notes[0] == notes[1] == notes[2]
    assert "could not run again" in notes[0][0]


def test_profile_risk_charts_are_built_once_per_view_kind(client, officer, steward, dataset):
    before = builds["profile"]
    job = job_create(user=officer, team=dataset.team, kind=JobKind.PROFILE, dataset=dataset)
    job_execute(job_id=job.pk, worker="t")  # builds both as it finishes
    url = reverse("datasets:detail", args=[dataset.pk])
    for user in (officer, steward, officer, steward):
        client.force_login(user)
        response = client.get(url)
        assert response.status_code == 200 and response.context["risk_section"].has_charts
    assert builds["profile"] == before + 2


def test_purging_the_source_forgets_the_kept_utility(client, officer, release):
    from anonweb.releases.source_figures import release_source_figures_forget

    assert _page(client, officer, release).context["utility"]
    release_source_figures_forget(dataset=release.dataset)
    before = builds["utility"]
    _page(client, officer, release)
    assert builds["utility"] == before + 1


# Queries per page once its caches are warm: what the load test's people open. The bounds are
# the counts (the session here, where it is not read through a shared cache; the user and the
# reader's roles come from the cache; then the page's own); a page that
# asks about roles again, or queries per listed item or per chart, fails here.
@pytest.mark.parametrize(
    ("who", "page", "most"),
    [
        ("officer", "release", 7),
        ("steward", "release", 7),
        ("analyst", "release", 3),
        ("officer", "risk", 7),
        ("steward", "risk", 7),
        ("officer", "plan", 4),
        ("steward", "audit", 3),
        ("analyst", "download", 9),
        ("analyst", "release list", 3),
        ("steward", "home", 5),
        ("officer", "job list", 3),
        ("officer", "job status", 2),
    ],
)
def test_pages_cost_a_bounded_number_of_queries(
    client, request, release, dataset, who, page, most, django_assert_max_num_queries
):
    job = job_create(
        user=request.getfixturevalue("officer"),
        team=dataset.team,
        kind=JobKind.PROFILE,
        dataset=dataset,
    )
    job_execute(job_id=job.pk, worker="t")
    url = {
        "release": reverse("releases:detail", args=[release.pk]),
        "risk": reverse("datasets:detail", args=[dataset.pk]),
        "plan": reverse("jobs:plan", args=[dataset.pk]),
        "audit": reverse("audit:list"),
        "download": reverse("releases:download", args=[release.pk]),
        "release list": reverse("releases:list"),
        "home": reverse("home"),
        "job list": reverse("jobs:list"),
        "job status": reverse("jobs:status", args=[job.pk]),
    }[page]
    client.force_login(request.getfixturevalue(who))
    warm = client.get(url)  # builds what is kept
    assert warm.status_code == 200 and (not warm.streaming or b"".join(warm.streaming_content))
    with django_assert_max_num_queries(most):
        response = client.get(url)
        assert response.status_code == 200
        assert not response.streaming or b"".join(response.streaming_content)


@pytest.mark.parametrize(
    ("who", "page"),
    [
        ("analyst", "release list"),
        ("analyst", "release"),
        ("analyst", "download"),
        ("steward", "home"),
        ("steward", "audit"),
        ("officer", "release"),
        ("officer", "job list"),
        ("officer", "risk"),
    ],
)
def test_pages_filter_on_the_readers_teams_without_reading_the_memberships_again(
    client, request, release, dataset, who, page
):
    """The lists and pages scope their queries by the ids of the reader's teams, from the
    roles read once (and kept across requests): no query of theirs reads the memberships."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    url = {
        "release": reverse("releases:detail", args=[release.pk]),
        "risk": reverse("datasets:detail", args=[dataset.pk]),
        "audit": reverse("audit:list"),
        "download": reverse("releases:download", args=[release.pk]),
        "release list": reverse("releases:list"),
        "home": reverse("home"),
        "job list": reverse("jobs:list"),
    }[page]
    client.force_login(request.getfixturevalue(who))
    first = client.get(url)
    assert first.status_code == 200
    assert not first.streaming or b"".join(first.streaming_content)
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
        assert response.status_code == 200
        assert not response.streaming or b"".join(response.streaming_content)
    # the home page lists the user's teams (a membership query of its own, joined to teams)
    reads = [
        q["sql"]
        for q in ctx.captured_queries
        if '"accounts_membership"' in q["sql"] and '"accounts_team"."name"' not in q["sql"]
    ]
    assert reads == []


def test_an_api_list_carries_an_etag_and_answers_304_while_it_is_unchanged(
    analyst, steward, officer, dataset, release
):
    client = api(analyst)
    url = "/api/v1/releases/"
    first = client.get(url)
    assert first.status_code == 200 and first["ETag"]
    again = client.get(url, HTTP_IF_NONE_MATCH=first["ETag"])
    assert again.status_code == 304 and not again.content
    # A new approved release is a new list: a new ETag, the whole body.
    other = launch(officer, dataset, K_PLAN, "k2")
    release_review(user=steward, release=other, decision="approve", override=OVERRIDE)
    changed = client.get(url, HTTP_IF_NONE_MATCH=first["ETag"])
    assert changed.status_code == 200 and changed["ETag"] != first["ETag"]


def test_the_report_section_is_rendered_once_per_view_and_never_crosses_views(
    client, officer, steward, analyst, release
):
    internal = _page(client, officer, release)
    assert b"source rows" in internal.content  # the internal report's figures
    kept = cache.get(fragment_key(release=release, view=INTERNAL, part="page"))[0]
    assert kept.report_html and "source rows" in kept.report_html
    # Mark the officer's section: its readers show it, an analyst never does.
    import dataclasses

    marked = dataclasses.replace(kept, report_html="<p>MARK-REPORT</p>", steps_html="MARK-STEPS")
    cache.set(fragment_key(release=release, view=INTERNAL, part="page"), (marked,))
    assert b"MARK-REPORT" in _page(client, steward, release).content
    seen = _page(client, analyst, release)
    assert b"MARK" not in seen.content and b"source rows" not in seen.content
    assert b'data-testid="release-steps"' in seen.content and b"released rows" in seen.content


def test_the_compare_with_list_reads_the_versions_numbers_titles_and_states_only(
    officer, dataset, published
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from anonweb.accounts.selectors import roles_read_once
    from anonweb.releases.selectors import release_versions_for_user

    other = launch(officer, dataset, K_PLAN, "k again")
    with roles_read_once():
        release_versions_for_user(user=officer, release=other)  # the roles, read once
        with CaptureQueriesContext(connection) as ctx:
            versions = list(release_versions_for_user(user=officer, release=other))
    assert [(v.pk, v.version, v.title, v.get_status_display()) for v in versions] == [
        (published.pk, published.version, published.title, published.get_status_display())
    ]
    (sql,) = [q["sql"] for q in ctx.captured_queries]
    assert " JOIN " not in sql and '"report"' not in sql and '"requested_by_id"' not in sql


@pytest.mark.parametrize(("who", "page"), [("analyst", "release list"), ("steward", "home")])
def test_release_lists_read_only_the_names_of_the_rows_they_join(
    client, request, release, who, page
):
    """A list shows the dataset's and the people's names: not the dataset's column profiles and
    tags, nor the users' password hashes, read and built for every row."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client.force_login(request.getfixturevalue(who))
    url = reverse({"release list": "releases:list", "home": "home"}[page])
    client.get(url)
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(url)
    assert response.status_code == 200 and f"v{release.version}".encode() in response.content
    listed = [q["sql"] for q in ctx.captured_queries if 'FROM "releases_release"' in q["sql"]]
    assert listed
    for sql in listed:
        assert '"datasets_dataset"."columns"' not in sql and '"auth_user"."password"' not in sql
