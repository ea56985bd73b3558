"""What the roles read are valid for: within a request, and across requests.

Within a request, each user's roles are read once (:func:`anonweb.accounts.selectors.roles_by_team`
keeps them in :data:`request_roles`). Across requests they are kept in the shared cache beside
the version of all memberships they were read at, :data:`ROLES_VERSION_KEY`.

Every membership write calls :func:`roles_changed`: a save or a deletion (a cascade from a user
or a team too) through the signals, and a queryset's update, delete, bulk create or bulk update
through :class:`anonweb.accounts.models.MembershipQuerySet`. It forgets the roles read in this
request, marks the request as one that wrote memberships (its reads are then never kept: its
transaction may still roll back), and gives the version a new value at once and again when
the write's transaction commits: a request that read the memberships before the commit kept
them under a value that is gone once the commit is, so a revoked role is never read after the
revocation committed."""

from __future__ import annotations

import uuid
from contextvars import ContextVar

from django.core.cache import cache
from django.db import transaction

ROLES_VERSION_KEY = "anonweb:roles:version"

# The roles read during one request, by user id: a page asks "which role in which team" up to
# five times (menu, reader view, raw values, review, links), and one read answers them all.
# Only inside a request (anonweb.accounts.selectors.roles_read_once); None elsewhere.
request_roles: ContextVar[dict[int, dict[int, frozenset[str]]] | None] = ContextVar(
    "anonweb_request_roles", default=None
)
# Whether this request wrote a membership: then nothing it reads is kept across requests.
request_wrote_roles: ContextVar[bool] = ContextVar("anonweb_request_wrote_roles", default=False)


def roles_version_new() -> str:
    return uuid.uuid4().hex


def roles_version_bump() -> None:
    cache.set(ROLES_VERSION_KEY, roles_version_new(), None)


def roles_changed() -> None:
    """A membership was written (saved, deleted, updated or created in bulk)."""
    memo = request_roles.get()
    if memo is not None:
        memo.clear()
        request_wrote_roles.set(True)
    roles_version_bump()
    transaction.on_commit(roles_version_bump)
