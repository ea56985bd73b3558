"""Release use cases: approve or reject (never by the requester), conflict findings, downloads.
A finished job's release is created by :mod:`anonweb.jobs.publication`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone

from anonweb.accounts.models import Role
from anonweb.accounts.selectors import require_role
from anonweb.audit.services import audit_record
from anonweb.releases.gate import release_gate_now
from anonweb.releases.models import ConflictFinding, Release, ReleaseStatus

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from anonweb.core.conflicts.release import ConflictCheck


def finding_summary(findings: list[dict]) -> list[dict]:
    """Findings as the audit trail records them: code, severity, columns, record count, and for
    a conflict the releases it combines with their status (labels, never values)."""
    out = []
    for f in findings:
        entry = {
            "code": f.get("code"),
            "severity": f.get("severity"),
            "columns": list(f.get("columns") or []),
            "records": f.get("records", 0),
        }
        statuses = (f.get("facts") or {}).get("statuses")
        if str(f.get("code", "")).startswith("conflict_") and statuses:
            entry["releases"] = dict(statuses)
        out.append(entry)
    return out


class ReviewError(Exception):
    """The release was already reviewed."""


def save_conflict_findings(release: Release, found: ConflictCheck) -> None:
    """The conflict findings of a new release, linked to every release they involve."""
    by_id = {r.pk: r for r in Release.objects.filter(pk__in=found.checked)}
    for position, entry in enumerate(found.public):
        finding = ConflictFinding.objects.create(
            release=release,
            position=position,
            type=entry["type"],
            records=entry["records"],
            columns=entry["columns"],
            labels=entry["labels"],
            explanation=entry["explanation"],
            facts=entry["facts"],
        )
        involved = [release] + [by_id[i] for i in entry["labels"].values() if i in by_id]
        finding.involved.set(involved)


class ReleaseBlocked(ReviewError):
    """Approval refused: blocking findings stand and no override justification was given.
    ``findings`` lists them (code, severity, message, columns, records: no cell value)."""

    def __init__(self, findings: list[dict]):
        self.findings = findings
        codes = ", ".join(sorted({f.get("code", "?") for f in findings}))
        super().__init__(
            f"This release has {len(findings)} blocking finding(s) ({codes}); it can only be "
            "approved with a written justification for overriding them."
        )


class FindingsChanged(ReleaseBlocked):
    """An override was written for findings that have changed since: the other releases of the
    source changed state (or the tags, the policy's k, l or attack caps, or the attack figures)
    after the steward read them."""

    def __init__(self, findings: list[dict]):
        super().__init__(findings)
        self.args = (
            "The other releases of this source changed since you read the findings; the "
            f"release now has {len(findings)} blocking finding(s). Read them again before "
            "overriding them.",
        )


MIN_JUSTIFICATION = 20  # characters: a sentence, not "ok"


def release_review(
    *,
    user: User,
    release: Release,
    decision: str,
    note: str = "",
    override: str = "",
    seen: str = "",
) -> Release:
    """Approve or reject ``release`` (a data steward other than the requester).

    The findings that decide an approval are the gate as it stands at the moment of the decision
    (:func:`~anonweb.releases.gate.release_gate_now`): its conflicts are checked against every
    other live release of the source, so whichever release of a conflicting pair is approved
    second needs the override too. A release with blocking findings is approved only with
    ``override``, a written justification: it goes into the audit trail with the findings it
    overrode, as they were then, and stays on the release page. Without one,
    :class:`ReleaseBlocked` carries the findings (the API answers 409 with them). ``warn``
    findings need no override. ``seen`` is the gate's ``version`` the steward read: an override
    given for another state (a release written, approved or rejected since) is refused, so no
    one overrides findings they have not seen."""
    if decision not in ("approve", "reject"):
        raise ReviewError("Choose approve or reject.")
    require_role(user=user, team=release.team, role=Role.DATA_STEWARD)
    if release.requested_by_id == user.pk:
        raise PermissionDenied(
            "A release is reviewed by a data steward other than the person who asked for it."
        )
    if release.status != ReleaseStatus.PENDING:
        raise ReviewError("This release has already been reviewed.")
    status = ReleaseStatus.APPROVED if decision == "approve" else ReleaseStatus.REJECTED
    override = (override or "").strip()
    details: dict = {"version": release.version, "dataset_id": release.dataset_id}
    fields: dict = {}
    if status == ReleaseStatus.APPROVED:
        # Checked before the conditional update, outside its transaction (the check can take
        # seconds). Whatever changes meanwhile only adds findings elsewhere: a release written
        # now is checked against this one, another approved still conflicts, and one rejected
        # only removes a conflict.
        gate = release_gate_now(release=release)
        blocking = gate.blocking
        details["findings"] = finding_summary(list(gate.findings))
        details["conflicts_checked"] = [o["id"] for o in gate.checked]
        if blocking and not override:
            raise ReleaseBlocked(blocking)
        if blocking:
            if len(override) < MIN_JUSTIFICATION:
                raise ReviewError(
                    f"Write the justification for overriding the blocking findings in at least "
                    f"{MIN_JUSTIFICATION} characters."
                )
            if seen and seen != gate.version:
                raise FindingsChanged(blocking)
            overridden = finding_summary(blocking)
            fields["override"] = {
                "justification": override[:4000],
                "findings": overridden,
                "checked": [f"{o['label']} ({o['status']})" for o in gate.checked],
                "by": user.get_username(),
                "at": timezone.now().isoformat(timespec="seconds"),
            }
            details.update(override=override[:4000], overridden=overridden)
    with transaction.atomic():
        changed = Release.objects.filter(pk=release.pk, status=ReleaseStatus.PENDING).update(
            status=status,
            reviewed_by=user,
            reviewed_at=timezone.now(),
            review_note=note[:2000],
            **fields,
        )
        if not changed:
            raise ReviewError("This release has already been reviewed.")
        audit_record(
            actor=user,
            team=release.team,
            action=f"release.{status}",
            target=release,
            details={**details, "note": note[:500]},
        )
    release.refresh_from_db()
    return release


def release_approve(
    *, user: User, release: Release, note: str = "", override: str = "", seen: str = ""
) -> Release:
    return release_review(
        user=user, release=release, decision="approve", note=note, override=override, seen=seen
    )


def release_reject(*, user: User, release: Release, note: str = "") -> Release:
    return release_review(user=user, release=release, decision="reject", note=note)


def release_record_download(*, user: User, release: Release, fmt: str = "csv") -> None:
    """A member of the team downloaded the release: who received what, in which format."""
    with transaction.atomic():
        audit_record(
            actor=user,
            team=release.team,
            action="release.downloaded",
            target=release,
            details={
                "version": release.version,
                "sha256": release.sha256,
                "format": fmt,
                "user": user.get_username(),
            },
        )


def release_record_signoff(*, user: User, release: Release, files: list[dict[str, str]]) -> None:
    """A sign-off report was downloaded: who, and the file hashes it stated."""
    with transaction.atomic():
        audit_record(
            actor=user,
            team=release.team,
            action="release.signoff_downloaded",
            target=release,
            details={"version": release.version, "status": release.status, "files": files},
        )
