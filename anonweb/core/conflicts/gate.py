"""Conflict check results as release-gate findings.

:func:`conflict_findings` turns a :class:`~.check.ConflictReport` (from :func:`~.check.check_conflicts`
run with the new release as ``new``) into :class:`anonweb.core.findings.Finding` objects for the
release policy: one per combination found, blocking, with the review status of every release it
involves as it is when the check runs, and the l (or k) each release and the join have. Records
are counted, never listed, and inferred values stay out: a gate finding goes into the audit trail.
"""

from __future__ import annotations

from collections.abc import Mapping

from anonweb.core.conflicts.check import ConflictReport
from anonweb.core.conflicts.findings import Finding as ConflictFinding
from anonweb.core.findings import BLOCK, Finding

STATUS_WORDS = {
    "approved": "approved",
    "pending": "awaiting review",
    "rejected": "rejected",
    "new": "this release",
}
# facts of a conflict finding that are counts or parameters (never values)
_FACTS = ("k", "k_joined", "l", "l_joined", "l_combined", "link", "link_columns")


def status_text(labels: tuple[str, ...], statuses: Mapping[str, str]) -> str:
    parts = []
    for label in labels:
        status = statuses.get(label)
        if status and status != "new":  # the release under review names itself already
            parts.append(f"{label}: {STATUS_WORDS.get(status, status)}")
    return f" [{'; '.join(parts)}]" if parts else ""


def _message(f: ConflictFinding) -> str:
    """The explanation of a record-level finding holds counts only; an aggregate finding's
    explanation works an example out (a source value), so it is replaced by a count."""
    if f.type in ("linkage", "intersection"):
        return f.explanation
    what = "fix" if f.type == "exact_inference" and "within" not in f.facts else "confine"
    cols = ", ".join(map(str, f.columns))
    together = " together" if len(f.releases) > 1 else ""
    return (
        f"the aggregates of {', '.join(f.releases)}{together} {what} the {cols} of "
        f"{len(f.records)} record(s)" + (" to within the p% rule" if what == "confine" else "")
    )


def conflict_findings(
    report: ConflictReport | None, *, statuses: Mapping[str, str] | None = None
) -> list[Finding]:
    """Gate findings for a conflict report; ``statuses`` maps a release label to its review
    status (``approved``, ``pending``, ``new`` for the release being checked)."""
    if report is None:
        return []
    statuses = dict(statuses or {})
    out = []
    for f in report.findings:
        facts = {k: f.facts[k] for k in _FACTS if k in f.facts}
        facts["releases"] = list(f.releases)
        facts["statuses"] = {label: statuses.get(label, "") for label in f.releases}
        out.append(
            Finding(
                code=f"conflict_{f.type}",
                severity=BLOCK,
                message=_message(f) + status_text(f.releases, statuses),
                columns=f.columns,
                records=len(f.records),
                facts=facts,
            )
        )
    for part in report.incomplete:
        out.append(
            Finding(
                code="conflict_incomplete",
                severity=BLOCK,
                message=f"the conflict check could not decide {part}; treat it as a conflict",
                facts={"part": str(part)},
            )
        )
    return out
