"""Each user's roles are kept across requests (settings.ANONWEB_ROLES_CACHE) under a version
that every membership write changes: a revocation, a role change or a grant through any path
(a save, a deletion, a queryset's update or delete, a bulk create, a cascade) shows on the very
next request."""

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from anonweb.accounts.models import Membership, Role, Team
from anonweb.accounts.roles_version import ROLES_VERSION_KEY
from anonweb.accounts.selectors import roles_by_team, roles_read_once

pytestmark = pytest.mark.django_db


def _membership_queries(ctx) -> int:
    return sum('FROM "accounts_membership"' in q["sql"] for q in ctx.captured_queries)


def _is_steward(client) -> bool:
    # the menu's roles, as every page reads them (anonweb.accounts.context_processors)
    response = client.get(reverse("releases:list"))
    assert response.status_code == 200
    return response.context["is_data_steward"]


@pytest.fixture
def kept_roles(settings):
    settings.ANONWEB_ROLES_CACHE = True


def test_roles_are_read_from_the_database_once_then_kept(client, steward, kept_roles):
    client.force_login(steward)
    assert _is_steward(client)
    with CaptureQueriesContext(connection) as ctx:
        assert _is_steward(client)
    assert _membership_queries(ctx) == 0


def test_without_a_shared_cache_every_request_reads_the_memberships(client, steward, settings):
    settings.ANONWEB_ROLES_CACHE = False
    client.force_login(steward)
    assert _is_steward(client)
    with CaptureQueriesContext(connection) as ctx:
        assert _is_steward(client)
    assert _membership_queries(ctx) == 1


@pytest.mark.parametrize(
    "revoke",
    [
        pytest.param(lambda m: m.delete(), id="delete"),
        pytest.param(lambda m: Membership.objects.filter(pk=m.pk).delete(), id="queryset delete"),
        pytest.param(
            lambda m: Membership.objects.filter(pk=m.pk).update(role=Role.ANALYST),
            id="queryset update",
        ),
        pytest.param(
            lambda m: Membership.objects.bulk_update(
                [_with_role(m, Role.ANALYST)], fields=["role"]
            ),
            id="bulk update",
        ),
        pytest.param(lambda m: _with_role(m, Role.ANALYST).save(), id="save"),
        pytest.param(lambda m: Team.objects.filter(pk=m.team_id).delete(), id="team deleted"),
    ],
)
def test_a_revocation_by_any_path_shows_on_the_next_request(
    client, steward, team, kept_roles, revoke
):
    client.force_login(steward)
    assert _is_steward(client)
    assert _is_steward(client)  # read from the kept roles
    revoke(Membership.objects.get(user=steward, team=team, role=Role.DATA_STEWARD))
    assert not _is_steward(client)


def _with_role(membership, role):
    membership.role = role
    return membership


def test_a_bulk_grant_shows_on_the_next_request(client, team, kept_roles):
    user = get_user_model().objects.create_user(username="late", password="x" * 20)
    client.force_login(user)
    assert not _is_steward(client)
    assert not _is_steward(client)  # no role, kept
    Membership.objects.bulk_create([Membership(team=team, user=user, role=Role.DATA_STEWARD)])
    assert _is_steward(client)


def test_a_revocation_committed_after_a_read_is_not_hidden_by_it(
    steward, team, kept_roles, django_capture_on_commit_callbacks
):
    """A request that read the memberships before the revocation committed kept them under a
    version the commit replaces."""
    with roles_read_once():
        assert Role.DATA_STEWARD in roles_by_team(user=steward)[team.pk]
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        Membership.objects.filter(user=steward).delete()
        # a request reading between the write and its commit (as another connection would:
        # the old rows) keeps them under the version of that moment
        with roles_read_once():
            from django.core.cache import cache

            key = next(k for k in _keys(steward))
            cache.set(key, (cache.get(ROLES_VERSION_KEY), {team.pk: frozenset({"data_steward"})}))
            assert Role.DATA_STEWARD in roles_by_team(user=steward)[team.pk]
    assert callbacks  # the commit changes the version again
    for callback in callbacks:
        callback()
    with roles_read_once():
        assert roles_by_team(user=steward) == {}


def _keys(user):
    from anonweb.accounts.selectors import _roles_key

    yield _roles_key(user)


def test_a_request_that_writes_a_membership_keeps_nothing_it_reads(steward, team, kept_roles):
    """Its transaction may still roll back: what it read after the write is not kept."""
    from django.core.cache import cache

    from anonweb.accounts.selectors import _roles_key

    cache.delete(_roles_key(steward))
    with roles_read_once():
        Membership.objects.create(
            team=Team.objects.create(name="t2", slug="t2"), user=steward, role=Role.ANALYST
        )
        assert len(roles_by_team(user=steward)) == 2
    assert cache.get(_roles_key(steward)) is None
