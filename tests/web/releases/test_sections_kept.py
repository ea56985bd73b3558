"""Sections of the release page rendered once and kept: the utility section (its tables and
charts) is rendered with the utility it shows, once per release and kind of staff reader, and
a repeat view renders none of it. A section kept for a privacy officer (who reads the source's
labels) is never what a steward receives, and an analyst receives none."""

from __future__ import annotations

import pytest
from django.core.cache import cache

from anonweb.releases.services import release_review
from anonweb.releases.utility import _utility_key
from tests.web.releases.test_published_report import OVERRIDE, launch
from tests.web.releases.test_render_once import K_PLAN, _page


@pytest.fixture(autouse=True)
def _queue_checks_off(queue_checks_off):
    """Query counts measure the page (see the fixture)."""


@pytest.fixture
def release(officer, steward, dataset):
    """An approved release whose kept parts were dropped: its first reader builds them."""
    made = launch(officer, dataset, K_PLAN, "k")
    release_review(user=steward, release=made, decision="approve", override=OVERRIDE)
    cache.clear()
    return made


pytestmark = pytest.mark.django_db

UTILITY = "releases/_utility.html"


def _rendered(response) -> list[str]:
    return [t.name for t in response.templates]


def test_a_repeat_view_renders_no_utility_section(client, officer, release):
    first = _page(client, officer, release)
    assert UTILITY in _rendered(first)  # built on the first view (the cache was emptied)
    assert b'data-testid="utility"' in first.content
    again = _page(client, officer, release)
    assert UTILITY not in _rendered(again)
    assert b'data-testid="utility"' in again.content
    assert again.content.count(b'data-testid="utility"') == 1


def test_the_kept_section_is_the_one_rendered_from_the_utility(client, steward, release):
    first = _page(client, steward, release).content
    again = _page(client, steward, release).content
    start = first.index(b'<section class="card" data-testid="utility"')
    end = first.index(b"</section>", start)
    assert first[start:end] in again


def test_a_section_kept_for_an_officer_never_reaches_a_steward_or_an_analyst(
    client, officer, steward, analyst, release
):
    _page(client, officer, release)
    _page(client, steward, release)
    key = _utility_key(release, raw=True)
    (kept,) = cache.get(key)
    utility, charts, charts_html, section = kept
    assert section and 'data-testid="utility"' in section
    cache.set(key, ((utility, charts, charts_html, "<p>OFFICER-SECTION</p>"),))
    assert b"OFFICER-SECTION" in _page(client, officer, release).content
    assert b"OFFICER-SECTION" not in _page(client, steward, release).content
    analyst_page = _page(client, analyst, release).content
    assert b"OFFICER-SECTION" not in analyst_page
    assert b'data-testid="utility"' not in analyst_page


BODY = "releases/_detail_body.html"


def _kept_bodies() -> dict[str, str]:
    """The published bodies kept in the cache (locmem in tests), by key."""
    store = cache._cache  # type: ignore[attr-defined]  # LocMemCache's own dict
    found = {}
    for raw in list(store):
        key = raw.split(":", 2)[-1]
        if ":published:body:" in key:
            found[key] = cache.get(key)[0]
    return found


def test_a_published_readers_repeat_view_renders_no_body(client, analyst, release):
    first = _page(client, analyst, release)
    assert BODY in _rendered(first)
    again = _page(client, analyst, release)
    assert BODY not in _rendered(again)
    # the same page but for the frame's CSRF token (the log-out form), new on each view
    assert _strip_tokens(again.content) == _strip_tokens(first.content)
    assert b'data-testid="report"' in again.content or b"release-plan" in again.content


def _strip_tokens(content: bytes) -> bytes:
    import re

    return re.sub(rb'name="csrfmiddlewaretoken" value="[^"]+"', b"", content)


def test_a_kept_body_never_reaches_the_teams_staff(client, officer, steward, analyst, release):
    _page(client, analyst, release)
    (key,) = _kept_bodies()
    cache.set(key, ("<p>PUBLISHED-BODY</p>",))
    assert b"PUBLISHED-BODY" in _page(client, analyst, release).content  # read back
    for staff in (officer, steward):
        page = _page(client, staff, release)
        assert b"PUBLISHED-BODY" not in page.content
        assert BODY in _rendered(page)  # rendered for them, with their sections
        assert b'data-testid="findings"' in page.content


def test_the_body_is_kept_per_state_it_shows(client, officer, steward, analyst, release):
    from anonweb.releases.services import release_review
    from tests.web.releases.test_published_report import OVERRIDE, launch
    from tests.web.releases.test_render_once import K_PLAN

    _page(client, analyst, release)
    assert len(_kept_bodies()) == 1
    # a new version the analyst cannot see yet (pending): the same state for them
    other = launch(officer, release.dataset, K_PLAN, "k again")
    page = _page(client, analyst, release)
    assert len(_kept_bodies()) == 1 and b"k again" not in page.content
    # approved: the analyst now sees it in the compare list, another body
    release_review(user=steward, release=other, decision="approve", override=OVERRIDE)
    page = _page(client, analyst, release)
    assert len(_kept_bodies()) == 2 and b"k again" in page.content


def _kept_staff_bodies() -> dict[str, str]:
    store = cache._cache  # type: ignore[attr-defined]  # LocMemCache's own dict
    found = {}
    for raw in list(store):
        key = raw.split(":", 2)[-1]
        if ":internal:staff-body:" in key:
            found[key] = cache.get(key)[0]
    return found


def test_a_staff_readers_repeat_view_renders_no_body(client, steward, release):
    first = _page(client, steward, release)
    assert BODY in _rendered(first)
    again = _page(client, steward, release)
    assert BODY not in _rendered(again)
    assert _strip_tokens(again.content) == _strip_tokens(first.content)
    assert b'data-testid="findings"' in again.content and b'data-testid="links"' in again.content
    assert b'data-testid="utility"' in again.content  # the utility section follows it


def test_each_view_of_a_kept_staff_body_carries_its_own_csrf_token(steward, release):
    import re

    from django.test import Client
    from django.urls import reverse

    from anonweb.common.charts import CSRF_MARK

    client = Client(enforce_csrf_checks=True)
    tokens = []
    for _ in range(2):
        page = _page(client, steward, release).content
        assert CSRF_MARK.encode() not in page
        form = page[page.index(b'data-testid="link-form"') :]
        tokens.append(
            re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', form).group(1).decode()
        )
    assert tokens[0] != tokens[1]  # masked anew on each view, as Django does
    # the token the kept body carries is one the link form's POST passes with
    response = client.post(
        reverse("releases:link_issue", args=[release.pk]),
        {"label": "auditor", "format": "csv", "hours": 2, "csrfmiddlewaretoken": tokens[1]},
    )
    assert response.status_code == 200
    assert b"auditor" in response.content


def test_a_staff_body_is_kept_per_reader_and_per_state_it_shows(
    client, officer, steward, analyst, outsider, release
):
    from anonweb.releases.links import release_link_issue

    _page(client, officer, release)
    _page(client, steward, release)
    bodies = _kept_staff_bodies()
    assert len(bodies) == 2  # the officer's and the steward's: what their roles allow differs
    officer_key = next(k for k, v in bodies.items() if 'data-testid="link-form"' not in v)
    cache.set(officer_key, ("<p>OFFICER-BODY</p>",))
    assert b"OFFICER-BODY" in _page(client, officer, release).content  # read back
    assert b"OFFICER-BODY" not in _page(client, steward, release).content
    assert b"OFFICER-BODY" not in _page(client, analyst, release).content
    client.force_login(outsider)
    assert client.get(f"/releases/{release.pk}/").status_code == 404
    # a link issued is a new state: the next view shows it
    release_link_issue(user=steward, release=release, fmt="csv", label="new-recipient", hours=2)
    page = _page(client, steward, release)
    assert b"new-recipient" in page.content and len(_kept_staff_bodies()) == 3
    assert b"new-recipient" in _page(client, officer, release).content


def test_a_staff_body_follows_the_gate_as_it_stands(client, steward, release):
    from anonweb.core.release.policy import PolicyThresholds
    from anonweb.releases.gate import release_policy_update

    k = _page(client, steward, release).context["gate"].conflict_k
    release_policy_update(user=steward, team=release.team, thresholds=PolicyThresholds(k=k + 7))
    after = _page(client, steward, release)
    assert after.context["gate"].conflict_k == k + 7
    assert f"with k = {k + 7} and".encode() in after.content
    assert f"with k = {k} and".encode() not in after.content


def test_an_officer_s_page_that_quotes_the_source_s_records_is_never_kept(
    client, officer, steward, release, monkeypatch
):
    from anonweb.releases import selectors

    real = selectors.release_attacks_get
    determined = {"column": "age", "determined": 1, "checked": 1, "undecided": 0}

    def with_records(*, release):
        rec = {"sentence": "One record determined.", "determined": 1}
        rec["columns"] = [{**determined, "records": [3], "values": {"3": 41}}]
        return {**(real(release=release) or {}), "reconstruction": rec}

    monkeypatch.setattr(selectors, "release_attacks_get", with_records)
    for _ in range(2):
        page = _page(client, officer, release)
        assert b'data-testid="reconstructed-records"' in page.content
        assert BODY in _rendered(page) and not _kept_staff_bodies()
    # the steward reads the figures without the records: their page is kept, and holds none
    steward_page = _page(client, steward, release)
    assert b'data-testid="reconstructed-records"' not in steward_page.content
    (kept,) = _kept_staff_bodies().values()
    assert 'data-testid="reconstruction"' in kept and "reconstructed-records" not in kept
