from __future__ import annotations

from django.db.models import Q, QuerySet
from django.http import Http404

from anonweb.accounts.models import Membership, Role
from anonweb.accounts.selectors import user_has_role
from anonweb.datasets.selectors import STAFF_ROLES
from anonweb.releases.models import ConflictFinding, Release, ReleaseStatus


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


def release_get_downloadable(*, user, release_id: int) -> Release:
    """A release the user may download (page and API): analysts an approved one, the team's
    officers and stewards any that is not rejected. Hidden ones are 404, rejected ones 403."""
    from django.core.exceptions import PermissionDenied

    release = release_get_for_user(user=user, release_id=release_id)
    staff = Membership.objects.filter(user=user, team=release.team, role__in=STAFF_ROLES).exists()
    if release.status != ReleaseStatus.APPROVED and not staff:
        raise Http404("No such release.")
    if release.status == ReleaseStatus.REJECTED:
        raise PermissionDenied("A rejected release cannot be downloaded.")
    return release


TYPE_LABELS = {
    "exact_inference": "Exact inference",
    "differencing": "Differencing",
    "intersection": "Intersection",
    "linkage": "Linkage",
    "undecided": "Not decided within the work budget",
}


def conflicts_for(*, release: Release, user) -> list[dict]:
    """Conflict findings involving this release: those its own check found against earlier
    releases, and those later releases' checks found with it. Every release named carries its
    live status; officers and stewards only. Only a privacy officer of the team gets the records and the values an attacker
    would infer (from the finding release's private files)."""
    from anonweb.releases.conflicts import FINDINGS_FILE
    from anonweb.releases.storage import read_private_json

    findings = (
        ConflictFinding.objects.filter(involved=release)
        .select_related("release")
        .prefetch_related("involved__dataset")
        .order_by("release__version", "position")
    )
    if not Membership.objects.filter(user=user, team=release.team, role__in=STAFF_ROLES).exists():
        # Analysts see nothing of other releases (pending or rejected ones included) nor of
        # the source: the findings are for officers and stewards.
        return []
    officer = user_has_role(user=user, team=release.team, role=Role.PRIVACY_OFFICER)
    private_files: dict[int, list] = {}
    out = []
    for f in findings:
        involved = sorted(f.involved.all(), key=lambda r: (r.created_at, r.pk))
        entry = {
            "id": f.pk,
            "type": f.type,
            "type_label": TYPE_LABELS.get(f.type, f.type),
            "records": f.records,
            "columns": f.columns,
            "explanation": f.explanation,
            "facts": f.facts,
            "found_by": f.release,
            "releases": [
                {
                    "release": r,
                    "label": f"release {r.version}"
                    + ("" if r.dataset_id == release.dataset_id else f" of {r.dataset.name}"),
                    "live": r.status != "rejected",
                }
                for r in involved
            ],
            "live": all(r.status != ReleaseStatus.REJECTED for r in involved),
            "l_by_release": sorted((f.facts.get("l_by_release") or {}).items()),
        }
        if officer:
            if f.release_id not in private_files:
                private_files[f.release_id] = (
                    read_private_json(f.release.storage_key, FINDINGS_FILE) or []
                )
            rows = private_files[f.release_id]
            if f.position < len(rows):
                detail = rows[f.position]
                entry["private"] = {
                    "explanation": detail.get("explanation", ""),
                    "records": detail.get("records", []),
                    "values": detail.get("values", {}),
                    "intervals": detail.get("intervals", {}),
                }
        out.append(entry)
    return out
