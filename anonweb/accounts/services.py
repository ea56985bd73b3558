"""Changing who belongs to a team and in which role: every path goes through here. Also a
user's API token (stored as a SHA-256 of its key: :class:`ApiToken`).

The admin, the demo bootstrap and scripts call :func:`membership_grant`,
:func:`membership_set_role` and :func:`membership_revoke`; each writes the change and its audit
event in one transaction, naming who made it. A membership saved or deleted any other way (a
shell, a cascade when a user or a team is deleted) is still audited, by the model's signals in
``anonweb.accounts.signals``, with the actor unknown and ``"via": "direct"``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import transaction

from anonweb.accounts.models import ApiToken, Membership, Role, Team, TeamGroup
from anonweb.audit.services import audit_record
from anonweb.core.release.recipients import parse_recipients

if TYPE_CHECKING:
    from collections.abc import Iterable

    from django.contrib.auth.models import User


class MembershipError(ValueError):
    """A membership change that cannot be made (unknown role, already a member)."""


def _details(membership: Membership, via: str, **extra: object) -> dict:
    return {
        "username": membership.user.get_username(),
        "user_id": membership.user_id,
        "role": membership.role,
        "via": via,
        **extra,
    }


def audit_membership(
    *, actor: User | None, membership: Membership, action: str, via: str, **extra: object
) -> None:
    audit_record(
        actor=actor,
        team=membership.team,
        action=action,
        target=membership.user,
        details=_details(membership, via, **extra),
    )


def _check_role(role: str) -> str:
    if role not in Role.values:
        raise MembershipError(f"unknown role {role!r}; one of {', '.join(Role.values)}")
    return role


def membership_grant(
    *, actor: User | None, team: Team, user: User, role: str, via: str = "service"
) -> Membership:
    """Give ``user`` the ``role`` in ``team`` (nothing happens if they already have it)."""
    _check_role(role)
    with transaction.atomic():
        existing = Membership.objects.filter(team=team, user=user, role=role).first()
        if existing is not None:
            return existing
        membership = Membership(team=team, user=user, role=role)
        membership._audited = True
        membership.save()
        audit_membership(actor=actor, membership=membership, action="membership.granted", via=via)
    return membership


def membership_set_role(
    *, actor: User | None, membership: Membership, role: str, via: str = "service"
) -> Membership:
    """Change the role of an existing membership."""
    _check_role(role)
    with transaction.atomic():
        current = Membership.objects.select_for_update().get(pk=membership.pk)
        if current.role == role:
            return current
        if Membership.objects.filter(team=current.team, user=current.user, role=role).exists():
            raise MembershipError(
                f"{current.user.get_username()} is already {Role(role).label} in {current.team}"
            )
        previous = current.role
        current.role = role
        current._audited = True
        current.save(update_fields=["role"])
        audit_membership(
            actor=actor,
            membership=current,
            action="membership.role_changed",
            via=via,
            previous_role=previous,
        )
    membership.role = role
    return current


def membership_revoke(*, actor: User | None, membership: Membership, via: str = "service") -> None:
    """Remove a membership."""
    with transaction.atomic():
        current = Membership.objects.select_for_update().filter(pk=membership.pk).first()
        if current is None:
            return
        current._audited = True
        current.delete()
        current.pk = membership.pk
        audit_membership(actor=actor, membership=current, action="membership.revoked", via=via)


def api_token_create(*, user: User) -> str:
    """Create the user's API token, replacing any previous one (which stops working at once);
    returns the new key, the only time it exists: the database keeps its SHA-256, and the key
    is never written to the audit trail."""
    with transaction.atomic():
        replaced = ApiToken.objects.filter(user=user).delete()[0] > 0
        _token, key = ApiToken.issue(user)
        audit_record(
            actor=user,
            action="account.token_created",
            target=user,
            details={"replaced": replaced},
        )
    return key


def api_token_revoke(*, user: User) -> bool:
    """Revoke the user's API token; False if there was none."""
    with transaction.atomic():
        deleted = ApiToken.objects.filter(user=user).delete()[0] > 0
        if deleted:
            audit_record(actor=user, action="account.token_revoked", target=user, details={})
    return deleted


def team_group_create(
    *, actor: User | None, team: Team, name: str, members: Iterable[User] = ()
) -> TeamGroup:
    """A group of the team (a name releases can name as ``group:NAME``) with ``members``, who
    must be members of the team."""
    name = (name or "").strip()
    parse_recipients([f"group:{name}"])  # the same form a launch reads
    if TeamGroup.objects.filter(team=team, name=name).exists():
        raise MembershipError(f"team {team.name} already has a group {name!r}")
    with transaction.atomic():
        group = TeamGroup.objects.create(team=team, name=name)
        audit_record(
            actor=actor, team=team, action="group.created", target=group, details={"name": name}
        )
        team_group_set_members(actor=actor, group=group, members=members)
    return group


def team_group_set_members(
    *, actor: User | None, group: TeamGroup, members: Iterable[User]
) -> None:
    """Make ``members`` the group's members (each a member of the group's team); the audit
    event names who was added and who removed."""
    wanted = {u.pk: u for u in members}
    in_team = set(
        Membership.objects.filter(team=group.team, user_id__in=list(wanted)).values_list(
            "user_id", flat=True
        )
    )
    outside = sorted(u.get_username() for pk, u in wanted.items() if pk not in in_team)
    if outside:
        raise MembershipError(
            f"not members of team {group.team.name}: {', '.join(outside)}; a group holds "
            "members of its team only"
        )
    with transaction.atomic():
        current = {u.pk: u for u in group.members.all()}
        added = sorted(u.get_username() for pk, u in wanted.items() if pk not in current)
        removed = sorted(u.get_username() for pk, u in current.items() if pk not in wanted)
        if not added and not removed:
            return
        group.members.set(list(wanted.values()))
        audit_record(
            actor=actor,
            team=group.team,
            action="group.members_changed",
            target=group,
            details={"name": group.name, "added": added, "removed": removed},
        )
