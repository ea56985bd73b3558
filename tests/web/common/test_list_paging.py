"""The HTML list pages (datasets, jobs, releases, audit trail) show one page of objects at a
time. Walking the pager from the first page to the last shows each object the user may see
exactly once, newest first, and nothing else: no other team's object, no unapproved release to
an analyst, whatever page is asked for. The pager's links keep the page's filters."""

import html
import re
from datetime import UTC, datetime

import pytest
from django.urls import reverse

from anonweb.accounts.models import Membership
from anonweb.audit.models import AuditEvent
from anonweb.audit.services import audit_record
from anonweb.common.paging import PAGE_SIZE
from anonweb.datasets.models import Dataset
from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.releases.models import Release, ReleaseStatus
from tests.web.factories import Role, member

pytestmark = pytest.mark.django_db

# every object made here shares one creation time (in the past): only the id orders them
SAME_TIME = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
OLDER = re.compile(r'<a href="([^"]*)"[^>]*data-testid="pager-older"')


def add_releases(dataset, n, statuses=(ReleaseStatus.PENDING,)) -> list[int]:
    """``n`` releases of ``dataset`` (statuses in turn), made at the same moment; their ids."""
    start = Release.objects.filter(dataset=dataset).count()
    made = Release.objects.bulk_create(
        Release(
            team=dataset.team,
            dataset=dataset,
            version=start + i + 1,
            title=f"r{start + i}",
            sha256="0" * 64,
            status=statuses[i % len(statuses)],
            requested_by=dataset.uploaded_by,
        )
        for i in range(n)
    )
    ids = [r.pk for r in made]
    Release.objects.filter(pk__in=ids).update(created_at=SAME_TIME)
    return ids


def add_datasets(team, user, n) -> list[int]:
    start = Dataset.objects.filter(team=team).count()
    made = Dataset.objects.bulk_create(
        Dataset(
            team=team,
            name=f"d{start + i}",
            uploaded_by=user,
            original_name=f"d{start + i}.csv",
            file_format="csv",
            size_bytes=1,
            source_sha256="0" * 64,
        )
        for i in range(n)
    )
    ids = [d.pk for d in made]
    Dataset.objects.filter(pk__in=ids).update(created_at=SAME_TIME)
    return ids


def add_jobs(team, user, n) -> list[int]:
    made = Job.objects.bulk_create(
        Job(team=team, created_by=user, kind=JobKind.PROFILE, status=JobStatus.SUCCEEDED)
        for _ in range(n)
    )
    ids = [j.pk for j in made]
    Job.objects.filter(pk__in=ids).update(created_at=SAME_TIME)
    return ids


def add_events(team, user, n, action="test.event") -> list[int]:
    return [
        audit_record(actor=user, team=team, action=action, details={"i": i}).pk for i in range(n)
    ]


def walk(client, url) -> list[list[int]]:
    """The ids on each page, from ``url`` on, following the pager's "older" links."""
    pages = []
    while url:
        response = client.get(url)
        assert response.status_code == 200, url
        pages.append([obj.pk for obj in response.context["page"]])
        found = OLDER.search(response.content.decode())
        url = response.request["PATH_INFO"] + html.unescape(found.group(1)) if found else None
        assert len(pages) < 100
    return pages


def newest_first(ids) -> list[int]:
    return sorted(ids, reverse=True)  # same creation time: the id breaks the tie


def test_every_list_page_shows_each_of_its_objects_once_newest_first(client, officer, dataset):
    releases = add_releases(dataset, 2 * PAGE_SIZE + 7)
    datasets = add_datasets(dataset.team, officer, 2 * PAGE_SIZE + 7)
    jobs = add_jobs(dataset.team, officer, 2 * PAGE_SIZE + 7)
    add_events(dataset.team, officer, 2 * PAGE_SIZE)
    client.force_login(officer)

    pages = walk(client, reverse("releases:list"))
    assert [len(p) for p in pages] == [PAGE_SIZE, PAGE_SIZE, 7]
    assert sum(pages, []) == newest_first(releases)

    pages = walk(client, reverse("datasets:list"))
    assert [len(p) for p in pages] == [PAGE_SIZE, PAGE_SIZE, 8]
    # the fixture's dataset was made after the others' (past) creation time
    assert sum(pages, []) == [dataset.pk] + newest_first(datasets)

    pages = walk(client, reverse("jobs:list"))
    assert sum(pages, []) == newest_first(
        Job.objects.exclude(pk__in=jobs).values_list("pk", flat=True)
    ) + newest_first(jobs)
    assert all(len(p) == PAGE_SIZE for p in pages[:-1])

    pages = walk(client, reverse("audit:list"))
    # every event of the team; accounts' own events (the users made for the test) have none
    team_events = AuditEvent.objects.filter(team=dataset.team)
    assert sum(pages, []) == newest_first(team_events.values_list("pk", flat=True))
    assert [len(p) for p in pages[:-1]] == [PAGE_SIZE, PAGE_SIZE]


@pytest.mark.parametrize(
    "asked, shown",
    [("", 1), ("2", 2), ("3", 3), ("4", 3), ("999999", 3), ("0", 3), ("-1", 3), ("x", 1)],
)
def test_a_page_out_of_range_or_not_a_number_shows_the_first_or_the_last(
    client, officer, dataset, asked, shown
):
    add_releases(dataset, 2 * PAGE_SIZE + 1)
    client.force_login(officer)
    response = client.get(reverse("releases:list"), {"page": asked} if asked else {})
    assert response.status_code == 200
    assert response.context["page"].number == shown
    assert f"page {shown} of 3" in response.content.decode()


def test_a_single_page_shows_no_pager(client, officer, dataset):
    add_releases(dataset, PAGE_SIZE)
    client.force_login(officer)
    response = client.get(reverse("releases:list"))
    assert len(response.context["page"]) == PAGE_SIZE
    assert b'data-testid="pager"' not in response.content
    add_releases(dataset, 1)
    assert b'data-testid="pager"' in client.get(reverse("releases:list")).content


def test_the_pager_keeps_the_filters_of_the_audit_trail(client, officer, steward, dataset):
    wanted = add_events(dataset.team, officer, PAGE_SIZE + 5, action="test.wanted")
    add_events(dataset.team, officer, PAGE_SIZE, action="test.other")
    add_events(dataset.team, steward, PAGE_SIZE, action="test.wanted")
    client.force_login(officer)
    url = reverse("audit:list") + "?" + "action=test.wanted&actor=olivia&target="
    pages = walk(client, url)
    assert sum(pages, []) == newest_first(wanted)
    first = client.get(url).content.decode()
    link = html.unescape(OLDER.search(first).group(1))
    assert "action=test.wanted" in link and "actor=olivia" in link and "page=2" in link


def test_the_pager_keeps_a_filter_that_needs_encoding(client, officer, dataset):
    odd = "test.a&page=9 #<b>"
    wanted = add_events(dataset.team, officer, PAGE_SIZE + 1, action=odd)
    add_events(dataset.team, officer, PAGE_SIZE + 1)
    client.force_login(officer)
    first = client.get(reverse("audit:list"), {"action": odd})
    assert [e.pk for e in first.context["page"]] == newest_first(wanted)[:PAGE_SIZE]
    assert "<b>" not in first.content.decode()
    older = html.unescape(OLDER.search(first.content.decode()).group(1))
    pages = walk(client, reverse("audit:list") + older)
    assert pages == [newest_first(wanted)[PAGE_SIZE:]]


def test_paging_never_shows_an_analyst_an_unapproved_release_or_another_teams(
    client, officer, analyst, outsider, team, other_team, dataset
):
    statuses = (ReleaseStatus.APPROVED, ReleaseStatus.PENDING, ReleaseStatus.REJECTED)
    elsewhere = Dataset.objects.get(pk=add_datasets(other_team, outsider, 1)[0])
    # interleaved ids: the other team's releases sit between ours on every page
    ours, theirs = [], []
    for _ in range(6):
        ours += add_releases(dataset, 25, statuses)
        theirs += add_releases(elsewhere, 25, statuses)
    approved = set(
        Release.objects.filter(pk__in=ours, status=ReleaseStatus.APPROVED).values_list(
            "pk", flat=True
        )
    )
    assert len(approved) > PAGE_SIZE  # more than one page for the analyst too

    seen = {}
    for name, user in {"officer": officer, "analyst": analyst, "outsider": outsider}.items():
        client.force_login(user)
        seen[name] = sum(walk(client, reverse("releases:list")), [])
        for asked in ("2", "3", "999", "0", "x"):
            page = client.get(reverse("releases:list"), {"page": asked}).context["page"]
            assert {r.pk for r in page} <= set(seen[name]), (name, asked)
    assert seen["officer"] == newest_first(ours)
    assert seen["analyst"] == newest_first(approved)
    assert seen["outsider"] == newest_first(theirs)

    # an analyst who is also an officer elsewhere sees the other team's every release and
    # only this team's approved ones
    both = member(team, Role.ANALYST, username="both")
    Membership.objects.create(team=other_team, user=both, role=Role.PRIVACY_OFFICER)
    client.force_login(both)
    assert sum(walk(client, reverse("releases:list")), []) == newest_first(approved | set(theirs))


def test_paging_never_shows_another_teams_dataset_job_or_event(
    client, officer, outsider, other_team, dataset
):
    ours = add_datasets(dataset.team, officer, PAGE_SIZE + 3)
    theirs = add_datasets(other_team, outsider, PAGE_SIZE + 3)
    our_jobs = add_jobs(dataset.team, officer, PAGE_SIZE + 3)
    their_jobs = add_jobs(other_team, outsider, PAGE_SIZE + 3)
    our_events = add_events(dataset.team, officer, PAGE_SIZE + 3)
    their_events = add_events(other_team, outsider, PAGE_SIZE + 3)

    client.force_login(officer)
    assert sum(walk(client, reverse("datasets:list")), []) == [dataset.pk] + newest_first(ours)
    assert set(sum(walk(client, reverse("jobs:list")), [])).isdisjoint(their_jobs)
    events = sum(walk(client, reverse("audit:list")), [])
    assert set(our_events) <= set(events) and set(events).isdisjoint(their_events)

    client.force_login(outsider)
    assert sum(walk(client, reverse("datasets:list")), []) == newest_first(theirs)
    assert sum(walk(client, reverse("jobs:list")), []) == newest_first(their_jobs)
    assert set(sum(walk(client, reverse("audit:list")), [])).isdisjoint(our_events)
    assert set(their_events) <= set(sum(walk(client, reverse("audit:list")), []))
    assert set(our_jobs).isdisjoint(sum(walk(client, reverse("jobs:list")), []))


def test_the_release_list_filters_by_state_and_dataset_on_every_page(
    client, officer, analyst, dataset
):
    statuses = (ReleaseStatus.APPROVED, ReleaseStatus.PENDING)
    other = Dataset.objects.get(pk=add_datasets(dataset.team, officer, 1)[0])
    ours = add_releases(dataset, 2 * PAGE_SIZE + 10, statuses)
    add_releases(other, 2 * PAGE_SIZE + 10, statuses)
    pending = newest_first(
        Release.objects.filter(pk__in=ours, status=ReleaseStatus.PENDING).values_list(
            "pk", flat=True
        )
    )
    url = reverse("releases:list")
    client.force_login(officer)
    pages = walk(client, f"{url}?status=pending&dataset={dataset.pk}")
    assert sum(pages, []) == pending and len(pages) == 2
    page = client.get(url, {"dataset": dataset.pk}).content.decode()
    assert f'<option value="{dataset.pk}" selected>patients (Clinic)' in page
    assert f'<option value="{other.pk}" >{other.name} (Clinic)' in page
    # a value that names nothing is no filter
    everything = sum(walk(client, url), [])
    assert sum(walk(client, f"{url}?status=bogus&dataset=x"), []) == everything

    client.force_login(analyst)
    assert sum(walk(client, f"{url}?status=pending"), []) == []
    assert sum(walk(client, f"{url}?status=rejected&dataset={dataset.pk}"), []) == []
    approved = sum(walk(client, f"{url}?dataset={dataset.pk}"), [])
    assert approved == newest_first(set(ours) - set(pending))


@pytest.mark.parametrize("n, counts", [(3, 0), (PAGE_SIZE, 0), (PAGE_SIZE + 1, 1)])
def test_the_first_page_of_a_list_that_fits_on_it_costs_no_count(
    client, officer, dataset, n, counts
):
    """Its rows, read with one past the page, are the count; a longer list is counted."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    add_releases(dataset, n)
    client.force_login(officer)
    client.get(reverse("releases:list"))
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(reverse("releases:list"))
    page = response.context["page"]
    assert len(page) == min(n, PAGE_SIZE) and page.paginator.count == n
    assert page.paginator.num_pages == (2 if n > PAGE_SIZE else 1)
    count_queries = [q for q in ctx.captured_queries if "COUNT(*)" in q["sql"]]
    assert len(count_queries) == counts
