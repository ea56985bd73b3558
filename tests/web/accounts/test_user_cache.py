"""The signed-in user's row is read from the database once and then from the shared cache,
until any user is saved or deleted: a changed password, a deactivation or a deletion ends the
sessions it must end on the very next request, as Django's own read from the database does."""

from __future__ import annotations

import pickle

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


def _kept_entry(user):
    from django.core.cache import cache

    from anonweb.accounts.user_cache import _user_key

    kept = cache.get(_user_key(user.pk))
    assert kept is not None, "the first view keeps the user"
    return kept


def test_the_kept_user_holds_no_password_hash(signed_in):
    """Whoever reads the shared cache gets no password hash to crack: only the keyed HMAC
    Django checks the session against."""
    user, client = signed_in
    fresh = get_user_model().objects.get(pk=user.pk)
    payload = pickle.dumps(_kept_entry(user))
    hashed = fresh.password
    assert hashed and "$" in hashed
    for part in [hashed, *hashed.split("$")[1:]]:  # the whole hash, its salt, its digest
        assert part.encode() not in payload
    assert b"password" not in payload
    assert fresh.get_session_auth_hash().encode() in payload


def test_a_kept_user_reads_its_password_from_the_database_when_asked(signed_in):
    user, client = signed_in
    response = client.get(PAGE)
    kept = response.wsgi_request.user
    assert kept.get_deferred_fields() == {"password"}
    with CaptureQueriesContext(connection) as ctx:
        assert kept.password == get_user_model().objects.get(pk=user.pk).password
    assert len(ctx) == 2
    assert kept.check_password("another long passphrase") is False


def test_a_password_changed_in_the_request_signs_the_session_with_the_new_hash(team):
    """The admin's own password change updates the session with the hash of the new password
    (Django's update_session_auth_hash on the request's user, the one read from the cache)."""
    admin = member(team, Role.PRIVACY_OFFICER, username="root")
    admin.is_staff = admin.is_superuser = True
    admin.set_password("first long passphrase")
    admin.save()
    client = Client()
    client.force_login(admin)
    assert user_reads(client)[0] == 200
    assert user_reads(client) == (200, 0)  # now from the cache
    response = client.post(
        "/admin/password_change/",
        {
            "old_password": "first long passphrase",
            "new_password1": "second long passphrase",
            "new_password2": "second long passphrase",
        },
    )
    assert response.status_code == 302, response.content[:2000]
    assert get_user_model().objects.get(pk=admin.pk).check_password("second long passphrase")
    status, reads = user_reads(client)
    assert (status, reads) == (200, 1)  # read again (the user changed), still signed in
    assert user_reads(client) == (200, 0)


def test_a_new_secret_key_keeps_sessions_through_its_fallback(signed_in, settings):
    """The kept HMAC is made with the secret key: after a rotation the user is read again and
    the session, signed under the old key (a fallback), is moved to the new one."""
    user, client = signed_in
    settings.SECRET_KEY_FALLBACKS = [settings.SECRET_KEY]
    settings.SECRET_KEY = "another-test-only-secret-key-not-for-any-deployment-98765"
    assert user_reads(client) == (200, 1)
    assert user_reads(client) == (200, 0)
    settings.SECRET_KEY_FALLBACKS = []
    assert user_reads(client) == (200, 0)  # the session now holds the new key's HMAC
