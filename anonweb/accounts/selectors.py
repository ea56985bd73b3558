"""Reads about who may do what. Every other selector scopes its queries through these."""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet

from anonweb.accounts.models import Membership, Role, Team


def teams_for_user(*, user: User) -> QuerySet[Team]:
    return Team.objects.filter(memberships__user=user).distinct()


def roles_for_user(*, user: User, team: Team) -> set[str]:
    return set(Membership.objects.filter(user=user, team=team).values_list("role", flat=True))


def teams_where(*, user: User, role: str) -> QuerySet[Team]:
    return Team.objects.filter(memberships__user=user, memberships__role=role).distinct()


def user_has_role(*, user: User, team: Team, role: str) -> bool:
    return Membership.objects.filter(user=user, team=team, role=role).exists()


def require_role(*, user: User, team: Team, role: str) -> None:
    """Raise PermissionDenied (403) with a message saying which role is needed."""
    if not user_has_role(user=user, team=team, role=role):
        raise PermissionDenied(
            f"This needs the {Role(role).label.lower()} role in team {team.name}."
        )


def all_roles(*, user: User | AnonymousUser) -> set[str]:
    if not user.is_authenticated:
        return set()
    return set(Membership.objects.filter(user=user).values_list("role", flat=True))


def raw_value_teams(*, user: User | AnonymousUser) -> frozenset[int]:
    """The teams whose raw source values (records, cells, labels read from the source, error
    messages quoting them) the user may see: those where they are a privacy officer. The one
    rule for every page and API answer; others read the public part
    (:mod:`anonweb.core.raw_values`)."""
    if not user.is_authenticated:
        return frozenset()
    return frozenset(
        Membership.objects.filter(user=user, role=Role.PRIVACY_OFFICER).values_list(
            "team_id", flat=True
        )
    )


def may_see_raw_values(*, user: User | AnonymousUser, team: Team) -> bool:
    return team.pk in raw_value_teams(user=user)
