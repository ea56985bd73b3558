"""The signed-in user, kept across requests in the shared cache without the password hash.

Every request reads its user once (Django's ``get_user``, the session naming the user's id): a
query Django compiles and PostgreSQL answers on every page, for a row that changes at a login,
a password change or an administrator's edit. :class:`CachedModelBackend` keeps what a request
needs of the row in the shared cache beside :data:`USERS_VERSION_KEY`, the version of all
users, and reads it there while that version stands; only with a shared cache
(``settings.ANONWEB_ROLES_CACHE``, as for the roles).

What is kept is every column but the password hash, and in its place the HMAC Django checks a
session against (``get_session_auth_hash``: a keyed digest of the hash, which a reader of the
cache cannot turn back into the hash or a password). The user built from it has its password
deferred: code that asks for it reads it from the database. The entry's key names the secret
key the HMAC was made with, so a process with another key never compares against it.

Every save or deletion of a user changes the version (:func:`users_changed`, from the signals),
at once and again when its transaction commits, as :mod:`anonweb.accounts.roles_version` does
for memberships: a row read before a commit is kept under a version gone once the commit is, so
a changed password, a deactivation or a deletion is read from the database on the next request
(no part of the project writes users with a queryset's ``update``, which sends no signal).
"""

from __future__ import annotations

import functools
import uuid
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.cache import cache
from django.db import router, transaction
from django.utils.crypto import salted_hmac

USERS_VERSION_KEY = "anonweb:users:version"
USER_SECONDS = 3600
# The one column never kept: the password hash.
PASSWORD = "password"


@functools.lru_cache(maxsize=4)
def _key_id(secret_key: str) -> str:
    """A name for the secret key (not the key): entries made under another key are others."""
    return salted_hmac("anonweb.accounts.user_cache.key_id", "", secret=secret_key).hexdigest()[:16]


def _user_key(user_id) -> str:
    return f"anonweb:user:v2:{_key_id(settings.SECRET_KEY)}:{user_id}"


def users_version_bump() -> None:
    cache.set(USERS_VERSION_KEY, uuid.uuid4().hex, None)


def users_changed() -> None:
    """A user was saved or deleted."""
    users_version_bump()
    transaction.on_commit(users_version_bump)


@functools.cache
def _kept_fields() -> tuple[str, ...]:
    return tuple(f.attname for f in get_user_model()._meta.concrete_fields if f.attname != PASSWORD)


def user_entry(user) -> dict[str, Any]:
    """What is kept of ``user``: its columns but the password hash, and the session's HMAC."""
    return {
        "fields": tuple(getattr(user, name) for name in _kept_fields()),
        "session_hash": user.get_session_auth_hash(),
    }


def _session_hash(user, kept: str) -> str:
    if PASSWORD in user.__dict__:
        # read or set since (a password change in this request): the HMAC of what it holds now
        return type(user).get_session_auth_hash(user)
    return kept


def user_from_entry(entry: dict[str, Any]):
    """The user an entry describes, its password deferred (read from the database if asked)."""
    model = get_user_model()
    user = model.from_db(router.db_for_read(model), list(_kept_fields()), entry["fields"])
    # Django checks the session against this; the password it would hash is not here.
    user.get_session_auth_hash = functools.partial(  # type: ignore[method-assign]
        _session_hash, user, entry["session_hash"]
    )
    return user


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
            user = user_from_entry(entry[1])
        else:
            if version is None:
                started = uuid.uuid4().hex
                version = started if cache.add(USERS_VERSION_KEY, started, None) else None
            user = super().get_user(user_id)
            if user is None:
                return None
            if version is not None:
                cache.set(key, (version, user_entry(user)), USER_SECONDS)
        return user if self.user_can_authenticate(user) else None
