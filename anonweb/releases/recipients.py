"""A release's recipients checked against its team: each username an analyst of the team, each
``group:NAME`` a group of the team. A launch is refused with every name that is neither; the
release then records the names and the users and groups they resolve to (what access reads)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from django.contrib.auth.models import User

from anonweb.accounts.models import Membership, Role, TeamGroup
from anonweb.core.release.recipients import RecipientError, group_name, parse_recipients

if TYPE_CHECKING:
    from anonweb.accounts.models import Team
    from anonweb.releases.models import Release


@dataclass(frozen=True)
class Recipients:
    names: tuple[str, ...]  # as named, each once; () is every analyst of the team
    users: tuple[User, ...]
    groups: tuple[TeamGroup, ...]
    unknown: tuple[str, ...]  # names that are no analyst or group of the team


def recipients_resolve(*, team: Team, names: object) -> Recipients:
    """The users and groups of ``team`` that ``names`` name (see :func:`parse_recipients`)."""
    parsed = parse_recipients(names)
    group_names = [g for g in (group_name(n) for n in parsed) if g is not None]
    usernames = [n for n in parsed if group_name(n) is None]
    groups = {g.name: g for g in TeamGroup.objects.filter(team=team, name__in=group_names)}
    analysts = {
        m.user.get_username(): m.user
        for m in Membership.objects.filter(
            team=team, role=Role.ANALYST, user__username__in=usernames
        ).select_related("user")
    }
    unknown = tuple(
        n
        for n in parsed
        if (group_name(n) not in groups if group_name(n) is not None else n not in analysts)
    )
    return Recipients(
        names=parsed,
        users=tuple(analysts[u] for u in usernames if u in analysts),
        groups=tuple(groups[g] for g in group_names if g in groups),
        unknown=unknown,
    )


def recipients_check(*, team: Team, names: object) -> tuple[str, ...]:
    """The names of a launch, or a RecipientError naming each one that is no analyst or group
    of ``team``."""
    found = recipients_resolve(team=team, names=names)
    if found.unknown:
        described = [
            f"no group {group_name(n)!r} in team {team.name}"
            if group_name(n) is not None
            else f"{n!r} is not an analyst of team {team.name}"
            for n in found.unknown
        ]
        raise RecipientError(
            "recipients: "
            + "; ".join(described)
            + ". Name analysts of the team or its groups (group:NAME), or none for every analyst."
        )
    return found.names


def recipients_assign(*, release: Release, names: object) -> None:
    """Record who receives ``release``: the names, and the analysts and groups they name now.
    A name that no longer resolves (an analyst who left, a group removed since the launch)
    gives access to nobody; the release never falls back to every analyst."""
    if not names:
        return  # every analyst of the team: the release's default
    found = recipients_resolve(team=release.team, names=names)
    release.recipients = list(found.names)
    release.save(update_fields=["recipients"])
    release.recipient_users.set(found.users)
    release.recipient_groups.set(found.groups)
