"""Reads about who may do what. Every other selector scopes its queries through these."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet

from anonweb.accounts.models import Membership, Role, Team
from anonweb.accounts.roles_version import (
    ROLES_VERSION_KEY,
    request_roles,
    request_wrote_roles,
    roles_version_new,
)


@contextmanager
def roles_read_once() -> Iterator[None]:
    """Within the block (a request), each user's memberships are read at most once, and kept
    across requests when the cache is shared (settings.ANONWEB_ROLES_CACHE) under the version
    every membership write changes (:mod:`anonweb.accounts.roles_version`)."""
    token = request_roles.set({})
    wrote = request_wrote_roles.set(False)
    try:
        yield
    finally:
        request_wrote_roles.reset(wrote)
        request_roles.reset(token)


def roles_forget() -> None:
    """Drop the roles read so far in this request (a membership changed)."""
    memo = request_roles.get()
    if memo is not None:
        memo.clear()


ROLES_SECONDS = 3600


def _roles_key(user: User) -> str:
    # with when the user joined: an id a test database hands out again is another key
    joined = user.date_joined.timestamp() if user.date_joined else 0
    return f"anonweb:roles:user:v1:{user.pk}:{joined}"


def roles_by_team(*, user: User | AnonymousUser) -> Mapping[int, frozenset[str]]:
    """``{team id: the user's roles in it}``, in one query (once per request)."""
    if not user.is_authenticated:
        return {}
    memo = request_roles.get()
    if memo is not None and user.pk in memo:
        return memo[user.pk]
    shared = memo is not None and settings.ANONWEB_ROLES_CACHE and not request_wrote_roles.get()
    version = None
    if shared and memo is not None:
        key = _roles_key(user)
        kept = cache.get_many([ROLES_VERSION_KEY, key])
        version = kept.get(ROLES_VERSION_KEY)
        entry = kept.get(key)
        if version is not None and entry is not None and entry[0] == version:
            memo[user.pk] = entry[1]
            return entry[1]
        if version is None:
            # None yet (or evicted): start one, and keep what is read now under it unless
            # another process started one first (then it is read on the next request).
            started = roles_version_new()
            version = started if cache.add(ROLES_VERSION_KEY, started, None) else None
    found: dict[int, set[str]] = {}
    # without the model's ordering (by team and user name), which joined both tables
    rows = Membership.objects.filter(user=user).order_by().values_list("team_id", "role")
    for team_id, role in rows:
        found.setdefault(team_id, set()).add(role)
    roles = {team_id: frozenset(r) for team_id, r in found.items()}
    if memo is not None:
        memo[user.pk] = roles
    if shared and version is not None:
        cache.set(key, (version, roles), ROLES_SECONDS)
    return roles


def team_ids_where(*, user: User | AnonymousUser, roles: Iterable[str]) -> list[int]:
    """The ids of the teams where the user holds any of ``roles``, from the memberships read
    once per request (:func:`roles_by_team`): a selector filters on these ids instead of a
    subquery of the memberships, which PostgreSQL would read again and Django compile again
    on every query of the page. Sorted, so the same user's queries are the same text."""
    wanted = frozenset(roles)
    return sorted(team_id for team_id, held in roles_by_team(user=user).items() if held & wanted)


def teams_for_user(*, user: User) -> QuerySet[Team]:
    return Team.objects.filter(memberships__user=user).distinct()


def roles_for_user(*, user: User, team: Team) -> set[str]:
    return set(roles_by_team(user=user).get(team.pk, ()))


def teams_where(*, user: User, role: str) -> QuerySet[Team]:
    return Team.objects.filter(memberships__user=user, memberships__role=role).distinct()


def user_has_role(*, user: User, team: Team, role: str) -> bool:
    return role in roles_by_team(user=user).get(team.pk, ())


def require_role(*, user: User, team: Team, role: str) -> None:
    """Raise PermissionDenied (403) with a message saying which role is needed."""
    if not user_has_role(user=user, team=team, role=role):
        raise PermissionDenied(
            f"This needs the {Role(role).label.lower()} role in team {team.name}."
        )


def all_roles(*, user: User | AnonymousUser) -> set[str]:
    return {role for roles in roles_by_team(user=user).values() for role in roles}


def raw_value_teams(*, user: User | AnonymousUser) -> frozenset[int]:
    """The teams whose raw source values (records, cells, labels read from the source, error
    messages quoting them) the user may see: those where they are a privacy officer. The one
    rule for every page and API answer; others read the public part
    (:mod:`anonweb.core.raw_values`)."""
    return frozenset(
        team_id
        for team_id, roles in roles_by_team(user=user).items()
        if Role.PRIVACY_OFFICER in roles
    )


def may_see_raw_values(*, user: User | AnonymousUser, team: Team) -> bool:
    return team.pk in raw_value_teams(user=user)
