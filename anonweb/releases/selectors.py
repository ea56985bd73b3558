from __future__ import annotations

from django.db.models import Q, QuerySet
from django.http import Http404

from anonweb.accounts.models import Membership, Role
from anonweb.datasets.selectors import STAFF_ROLES
from anonweb.releases.models import Release, ReleaseStatus


def releases_for_user(*, user) -> QuerySet[Release]:
    """Officers and stewards see all their teams' releases; analysts only approved ones."""
    staff_teams = Membership.objects.filter(user=user, role__in=STAFF_ROLES).values("team")
    analyst_teams = Membership.objects.filter(user=user, role=Role.ANALYST).values("team")
    return (
        Release.objects.filter(
            Q(team__in=staff_teams) | Q(team__in=analyst_teams, status=ReleaseStatus.APPROVED)
        )
        .select_related("team", "dataset", "requested_by", "reviewed_by")
        .distinct()
    )


def release_get_for_user(*, user, release_id: int) -> Release:
    try:
        return releases_for_user(user=user).get(pk=release_id)
    except (Release.DoesNotExist, ValueError, TypeError):
        raise Http404("No such release.") from None


def conflicts_for(*, release: Release) -> list[dict]:
    """Conflict checks involving this release: those it ran against earlier releases, and those
    later releases ran against it (each computed once, when the later release was made)."""
    found = []
    for entry in (release.report or {}).get("conflicts", []):
        found.append({**entry, "other_version": entry["version"], "other_id": entry["release_id"]})
    later = Release.objects.filter(dataset=release.dataset, version__gt=release.version).exclude(
        status=ReleaseStatus.REJECTED
    )
    for other in later:
        for entry in (other.report or {}).get("conflicts", []):
            if entry.get("release_id") == release.pk:
                found.append(
                    {
                        **entry,
                        "other_version": other.version,
                        "other_id": other.pk,
                        "status": other.status,
                    }
                )
    return sorted(found, key=lambda e: e["other_version"])
