"""Reads about who may do what. Every other selector scopes its queries through these."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet

from anonweb.accounts.models import Membership, Role, Team

# The roles read during one request, by user id: a page asks "which role in which team" up to
# five times (menu, reader view, raw values, review, links), and one query answers them all.
# Only inside :func:`roles_read_once` (a request); any membership saved or deleted clears it
# (anonweb.accounts.signals), so a request that changes a role reads the new one.
_request_roles: ContextVar[dict[int, dict[int, frozenset[str]]] | None] = ContextVar(
    "anonweb_request_roles", default=None
)


@contextmanager
def roles_read_once() -> Iterator[None]:
    """Within the block, each user's memberships are read at most once."""
    token = _request_roles.set({})
    try:
        yield
    finally:
        _request_roles.reset(token)


def roles_forget() -> None:
    """Drop the roles read so far in this request (a membership changed)."""
    memo = _request_roles.get()
    if memo is not None:
        memo.clear()


def roles_by_team(*, user: User | AnonymousUser) -> Mapping[int, frozenset[str]]:
    """``{team id: the user's roles in it}``, in one query (once per request)."""
    if not user.is_authenticated:
        return {}
    memo = _request_roles.get()
    if memo is not None and user.pk in memo:
        return memo[user.pk]
    found: dict[int, set[str]] = {}
    for team_id, role in Membership.objects.filter(user=user).values_list("team_id", "role"):
        found.setdefault(team_id, set()).add(role)
    roles = {team_id: frozenset(r) for team_id, r in found.items()}
    if memo is not None:
        memo[user.pk] = roles
    return roles


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
