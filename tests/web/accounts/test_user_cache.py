"""The signed-in user's row is read from the database once and then from the shared cache,
until any user is saved or deleted: a changed password, a deactivation or a deletion ends the
sessions it must end on the very next request, as Django's own read from the database does."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from anonweb.accounts.models import Role
from tests.web.factories import member

pytestmark = pytest.mark.django_db

PAGE = "/releases/"


def user_reads(client: Client) -> tuple[int, int]:
    """(status, queries that read the users table) of one view of the page."""
    with CaptureQueriesContext(connection) as ctx:
        response = client.get(PAGE)
    return response.status_code, sum('FROM "auth_user"' in q["sql"] for q in ctx)


@pytest.fixture
def signed_in(team):
    user = member(team, Role.ANALYST, username="ann")
    client = Client()
    client.force_login(user)
    assert user_reads(client)[0] == 200  # the first view reads (and keeps) the row
    return user, client


def test_a_repeat_view_reads_no_user_row(signed_in):
    user, client = signed_in
    assert user_reads(client) == (200, 0)
    assert user_reads(client) == (200, 0)


def test_each_session_gets_its_own_user(signed_in, team):
    user, client = signed_in
    other = member(team, Role.DATA_STEWARD, username="bo")
    theirs = Client()
    theirs.force_login(other)
    for c, name in ((client, "ann"), (theirs, "bo"), (client, "ann"), (theirs, "bo")):
        response = c.get(PAGE)
        assert response.status_code == 200
        assert response.wsgi_request.user.username == name


def test_a_changed_password_ends_the_session_at_once(signed_in):
    user, client = signed_in
    fresh = get_user_model().objects.get(pk=user.pk)
    fresh.set_password("another long passphrase")
    fresh.save()
    status, reads = user_reads(client)
    assert status == 302 and reads == 1  # read again, and the session's hash no longer matches


def test_a_deactivated_user_is_signed_out_at_once(signed_in):
    user, client = signed_in
    fresh = get_user_model().objects.get(pk=user.pk)
    fresh.is_active = False
    fresh.save()
    assert user_reads(client)[0] == 302


def test_a_deleted_user_is_signed_out_at_once(signed_in):
    user, client = signed_in
    get_user_model().objects.get(pk=user.pk).delete()
    assert user_reads(client)[0] == 302


def test_another_users_change_reads_the_row_again_once(signed_in, team):
    """Any user's save changes the version: the row is read once more, then kept again."""
    user, client = signed_in
    member(team, Role.ANALYST, username="cy")
    assert user_reads(client) == (200, 1)
    assert user_reads(client) == (200, 0)


def test_without_a_shared_cache_every_request_reads_the_row(signed_in, settings):
    settings.ANONWEB_ROLES_CACHE = False
    user, client = signed_in
    assert user_reads(client) == (200, 1)
    assert user_reads(client) == (200, 1)
