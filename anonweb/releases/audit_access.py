"""Which audit events a user may read. That depends on their roles in each team and, for an
analyst, on which releases are approved: so the rule sits here, above the audit trail, the
teams and the releases it reads, and the audit page and the API both ask it."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from anonweb.accounts.models import Role
from anonweb.accounts.selectors import team_ids_where
from anonweb.audit.models import AuditEvent
from anonweb.datasets.selectors import STAFF_ROLES
from anonweb.releases.models import ReleaseStatus
from anonweb.releases.selectors import releases_for_user


def audit_events_for_user(
    *, user, action: str = "", actor: str = "", target: str = "", dataset_id: int | None = None
) -> QuerySet:
    """The events the user may read, newest first; optionally only one action's, one actor's,
    those about one target (``"TYPE:ID"`` or ``"TYPE"``) or those about one dataset (the
    dataset's own and every event whose details name it, as a job's or a release's do)."""
    qs = AuditEvent.objects.all()
    if not user.is_superuser:
        qs = qs.filter(_visible(user))
    if action:
        qs = qs.filter(action=action)
    if actor:
        qs = qs.filter(actor_name=actor)
    if target:
        kind, _, ident = target.partition(":")
        qs = qs.filter(target_type=kind, **({"target_id": ident} if ident else {}))
    if dataset_id is not None:
        qs = qs.filter(
            Q(target_type="dataset", target_id=str(dataset_id))
            | Q(details_text__regex=rf'"dataset_id":{dataset_id}[,}}]')
        )
    return qs.order_by("-id")


# What an analyst sees of a release they can download: its approval and its downloads.
ANALYST_ACTIONS = ("release.approved", "release.downloaded")


def _visible(user) -> Q:
    """Officers and stewards see their teams' events; an analyst (in a team where they hold no
    other role) only the approval and downloads of the releases they can download (those they
    receive): nothing
    about raw datasets, jobs, or pending and rejected releases."""
    staff_teams = team_ids_where(user=user, roles=STAFF_ROLES)
    analyst_teams = [
        t for t in team_ids_where(user=user, roles=(Role.ANALYST,)) if t not in staff_teams
    ]
    downloadable = (
        [
            str(pk)
            for pk in releases_for_user(user=user)
            .filter(team__in=analyst_teams, status=ReleaseStatus.APPROVED)
            .values_list("pk", flat=True)
        ]
        if analyst_teams
        else []
    )
    return (
        Q(team__in=staff_teams)
        | Q(
            team__in=analyst_teams,
            target_type="release",
            target_id__in=downloadable,
            action__in=ANALYST_ACTIONS,
        )
        | Q(team__isnull=True, actor=user)
    )
