"""The signed-in user's row, kept across requests in the shared cache.

Every request reads its user once (Django's ``get_user``, the session naming the user's id): a
query Django compiles and PostgreSQL answers on every page, for a row that changes at a login,
a password change or an administrator's edit. :class:`CachedModelBackend` keeps the row in the
shared cache beside :data:`USERS_VERSION_KEY`, the version of all users, and reads it there
while that version stands; only with a shared cache (``settings.ANONWEB_ROLES_CACHE``, as for
the roles), and Django checks the session's hash against the row it gets, as it does against
the database's.

Every save or deletion of a user changes the version (:func:`users_changed`, from the signals),
at once and again when its transaction commits, as :mod:`anonweb.accounts.roles_version` does
for memberships: a row read before a commit is kept under a version gone once the commit is, so
a changed password, a deactivation or a deletion is read from the database on the next request
(no part of the project writes users with a queryset's ``update``, which sends no signal).
"""

from __future__ import annotations

import uuid

from django.conf import settings
from django.contrib.auth.backends import ModelBackend
from django.core.cache import cache
from django.db import transaction

USERS_VERSION_KEY = "anonweb:users:version"
USER_SECONDS = 3600


def _user_key(user_id) -> str:
    return f"anonweb:user:v1:{user_id}"


def users_version_bump() -> None:
    cache.set(USERS_VERSION_KEY, uuid.uuid4().hex, None)


def users_changed() -> None:
    """A user was saved or deleted."""
    users_version_bump()
    transaction.on_commit(users_version_bump)


class CachedModelBackend(ModelBackend):
    """Django's model backend, whose ``get_user`` (the one read of every request) answers
    from the shared cache while no user has changed since the row was kept."""

    def get_user(self, user_id):
        if not settings.ANONWEB_ROLES_CACHE:
            return super().get_user(user_id)
        key = _user_key(user_id)
        kept = cache.get_many([USERS_VERSION_KEY, key])
        version, entry = kept.get(USERS_VERSION_KEY), kept.get(key)
        if version is not None and entry is not None and entry[0] == version:
            user = entry[1]
        else:
            if version is None:
                started = uuid.uuid4().hex
                version = started if cache.add(USERS_VERSION_KEY, started, None) else None
            user = super().get_user(user_id)
            if user is None:
                return None
            if version is not None:
                cache.set(key, (version, user), USER_SECONDS)
        return user if self.user_can_authenticate(user) else None
