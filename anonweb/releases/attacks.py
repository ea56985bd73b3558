"""A release's attack figures (linkage, inference, singling out, membership): measured by the
job that published it and kept in its internal report. They are computed from the source, so
only the team's privacy officers and data stewards read them."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied

from anonweb.releases.models import Release
from anonweb.releases.selectors import release_get_for_user
from anonweb.releases.utility import is_staff


def release_attacks_get(*, release: Release) -> dict[str, Any] | None:
    """The attack figures as the job recorded them; None for a release that has none (an
    aggregate release, or one published before attacks were run). The caller checks the
    reader."""
    attacks = (release.report or {}).get("attacks")
    return attacks if isinstance(attacks, dict) else None


def release_attacks_for_user(
    *, user: User, release_id: int
) -> tuple[Release, dict[str, Any] | None]:
    """The release and its attack figures, for its team's officers and stewards (others: 404
    for a release they cannot see, 403 for one they can)."""
    release = release_get_for_user(user=user, release_id=release_id)
    if not is_staff(user=user, release=release):
        raise PermissionDenied(
            "The attack figures are computed from the source: officers and stewards only."
        )
    return release, release_attacks_get(release=release)
