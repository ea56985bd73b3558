"""Single-use download links for a recipient outside the team: a data steward issues one for an
approved release, in one format, valid for a number of hours; whoever holds it downloads the
file once. Only the SHA-256 of the random token is stored, so the database never holds a usable
link; issuing and using are audit events (the link's id, the release, the format, whom it was
for), never the token."""

from __future__ import annotations

import hashlib
import secrets
from datetime import timedelta
from typing import TYPE_CHECKING

from django.db import transaction
from django.http import Http404
from django.utils import timezone

from anonweb.accounts.models import Role
from anonweb.accounts.selectors import require_role
from anonweb.audit.services import audit_record
from anonweb.core.errors import ParameterError
from anonweb.core.io.export import export_format
from anonweb.releases.models import Release, ReleaseLink, ReleaseStatus
from anonweb.releases.services import ReviewError

if TYPE_CHECKING:
    from django.contrib.auth.models import User

LINK_HOURS_DEFAULT = 72
LINK_HOURS_MAX = 24 * 30


class LinkGone(Exception):
    """A link that existed but can no longer be used: expired, or used already (410)."""


def _digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def release_link_issue(
    *, user: User, release: Release, fmt: str, label: str, hours: int = LINK_HOURS_DEFAULT
) -> tuple[ReleaseLink, str]:
    """Issue a link to ``release`` in ``fmt`` for ``label`` (whom it is for), valid ``hours``
    hours: the link row and the token, which is shown once and never stored."""
    require_role(user=user, team=release.team, role=Role.DATA_STEWARD)
    if release.status != ReleaseStatus.APPROVED:
        raise ReviewError("Only an approved release can be sent outside the team.")
    export = export_format(fmt)
    fmt = export.name
    if not export.offered(release.rows):  # a link to a file that cannot be written
        raise ParameterError(export.too_many(release.rows, instead="issue the link for"))
    label = (label or "").strip()
    if not label:
        raise ParameterError("say whom the link is for (it goes into the audit trail)")
    if isinstance(hours, bool) or not isinstance(hours, int) or not 1 <= hours <= LINK_HOURS_MAX:
        raise ParameterError(
            f"a link is valid for 1 to {LINK_HOURS_MAX} hours (30 days), got {hours!r}"
        )
    token = secrets.token_urlsafe(32)
    with transaction.atomic():
        link = ReleaseLink.objects.create(
            release=release,
            token_sha256=_digest(token),
            format=fmt,
            label=label[:200],
            expires_at=timezone.now() + timedelta(hours=hours),
            issued_by=user,
        )
        audit_record(
            actor=user,
            team=release.team,
            action="release.link_issued",
            target=release,
            details={
                "link": link.pk,
                "version": release.version,
                "format": fmt,
                "for": link.label,
                "expires_at": link.expires_at.isoformat(timespec="seconds"),
            },
        )
    return link, token


def release_link_open(*, token: str) -> ReleaseLink:
    """The link a token opens, still usable. Raises Http404 for a token that names no link and
    LinkGone for one used or expired."""
    link = (
        ReleaseLink.objects.select_related("release__dataset", "release__team")
        .filter(token_sha256=_digest(token or ""))
        .first()
    )
    if link is None or link.release.status != ReleaseStatus.APPROVED:
        raise Http404("No such download link.")
    if link.used_at is not None:
        raise LinkGone(
            "This download link has been used already: each link gives the file once. Ask the "
            "data steward who sent it for a new one."
        )
    if link.expires_at <= timezone.now():
        raise LinkGone(
            "This download link has expired. Ask the data steward who sent it for a new one."
        )
    return link


def release_link_use(*, token: str) -> ReleaseLink:
    """Spend the link (once: a conditional update, so two requests racing get one file) and
    record the download: which link, for whom, which release and format."""
    link = release_link_open(token=token)
    release = link.release
    with transaction.atomic():
        spent = ReleaseLink.objects.filter(
            pk=link.pk, used_at__isnull=True, expires_at__gt=timezone.now()
        ).update(used_at=timezone.now())
        if not spent:
            raise LinkGone(
                "This download link has been used already: each link gives the file once."
            )
        audit_record(
            actor=None,
            team=release.team,
            action="release.downloaded",
            target=release,
            details={
                "version": release.version,
                "sha256": release.sha256,
                "format": link.format,
                "link": link.pk,
                "for": link.label,
            },
        )
    return link


def release_links_for(*, release: Release) -> list[ReleaseLink]:
    """The links issued for a release, newest first (its page, for officers and stewards)."""
    return list(release.links.select_related("issued_by"))
