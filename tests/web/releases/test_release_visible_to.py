"""One release is read by its key and checked by ``release_visible_to``; the lists read
``releases_for_user``. The two must agree for every reader and every kind of release: staff
and analysts of the team, a member of two roles, a named recipient, a group's member, an
analyst the release does not name, another team's analyst and a user of no team, against
releases pending, approved and rejected, naming nobody, a user, or a group."""

from __future__ import annotations

import pytest
from django.http import Http404

from anonweb.accounts.models import Membership, Role, TeamGroup
from anonweb.releases.models import Release, ReleaseStatus
from anonweb.releases.selectors import (
    release_get_downloadable,
    release_get_for_user,
    release_visible_to,
    releases_for_user,
)
from tests.web.factories import UserFactory, member

pytestmark = pytest.mark.django_db


@pytest.fixture
def readers(team, other_team, officer, steward, analyst, outsider):
    named = member(team, Role.ANALYST, username="named")
    grouped = member(team, Role.ANALYST, username="grouped")
    both = member(team, Role.ANALYST, username="both")
    Membership.objects.create(team=team, user=both, role=Role.DATA_STEWARD)
    group = TeamGroup.objects.create(team=team, name="qa")
    group.members.add(grouped)
    return {
        "officer": officer,
        "steward": steward,
        "analyst": analyst,
        "named": named,
        "grouped": grouped,
        "both": both,
        "outsider": outsider,
        "nobody": UserFactory(username="nobody"),
        "group": group,
    }


@pytest.fixture
def releases(team, dataset, officer, readers):
    made = []
    version = 0
    for status in ReleaseStatus.values:
        for names in ("nobody", "user", "group"):
            version += 1
            release = Release.objects.create(
                team=team,
                dataset=dataset,
                version=version,
                title=f"{status} to {names}",
                sha256="0" * 64,
                status=status,
                requested_by=officer,
                recipients=[]
                if names == "nobody"
                else ["named"]
                if names == "user"
                else ["group:qa"],
                report={"internal": True},
                published_report={"published": True},
            )
            if names == "user":
                release.recipient_users.add(readers["named"])
            if names == "group":
                release.recipient_groups.add(readers["group"])
            made.append(release)
    return made


READERS = ("officer", "steward", "analyst", "named", "grouped", "both", "outsider", "nobody")


@pytest.mark.parametrize("who", READERS)
def test_one_release_is_visible_exactly_when_the_list_shows_it(readers, releases, who):
    user = readers[who]
    listed = set(releases_for_user(user=user).values_list("pk", flat=True))
    for release in releases:
        fresh = Release.objects.get(pk=release.pk)
        assert release_visible_to(user=user, release=fresh) == (release.pk in listed), (
            who,
            release.title,
        )
        if release.pk in listed:
            assert release_get_for_user(user=user, release_id=release.pk).pk == release.pk
        else:
            with pytest.raises(Http404):
                release_get_for_user(user=user, release_id=release.pk)


def test_the_expected_readers_see_each_kind(readers, releases):
    """The table the rule is meant to give, written out (not derived from either function)."""
    seen = {
        who: {r.title for r in releases if release_visible_to(user=readers[who], release=r)}
        for who in READERS
    }
    everything = {r.title for r in releases}
    assert seen["officer"] == seen["steward"] == seen["both"] == everything
    assert seen["analyst"] == {"approved to nobody"}
    assert seen["named"] == {"approved to nobody", "approved to user"}
    assert seen["grouped"] == {"approved to nobody", "approved to group"}
    assert seen["outsider"] == seen["nobody"] == set()


def test_a_download_reads_no_document(readers, releases, django_assert_num_queries):
    """Without its JSON documents the release is still the one the user may download; reading
    a document later is one more query (what the download never does)."""
    (approved,) = [r for r in releases if r.title == "approved to user"]
    release = release_get_downloadable(
        user=readers["named"], release_id=approved.pk, documents=False
    )
    assert release.get_deferred_fields() >= {"report", "published_report", "plan"}
    assert release.dataset.name and release.team.name
    with pytest.raises(Http404):
        release_get_downloadable(user=readers["analyst"], release_id=approved.pk, documents=False)


@pytest.mark.parametrize("bad", ["x", None, 10**9])
def test_no_such_release_is_404(readers, bad):
    with pytest.raises(Http404):
        release_get_for_user(user=readers["officer"], release_id=bad)


@pytest.mark.parametrize("who", READERS)
def test_among_many_and_the_compare_list_keep_exactly_what_the_list_shows(
    readers, releases, who, django_assert_max_num_queries
):
    from anonweb.accounts.selectors import roles_read_once
    from anonweb.releases.selectors import release_versions_for_user, releases_visible_among

    user = readers[who]
    listed = list(releases_for_user(user=user).order_by("-version").values_list("pk", flat=True))
    rows = list(Release.objects.order_by("-version"))
    with roles_read_once():
        releases_visible_among(user=user, releases=rows[:1])  # the roles, read once
        with django_assert_max_num_queries(2):  # only the recipients of releases naming some
            kept = releases_visible_among(user=user, releases=rows)
        assert [r.pk for r in kept] == listed
        for release in releases:
            versions = release_versions_for_user(user=user, release=release)
            assert [v.pk for v in versions] == [pk for pk in listed if pk != release.pk]
