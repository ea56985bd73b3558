"""Two versions of a source side by side (the comparison page and its API).

The figures are read from each release's stored report by
:func:`anonweb.core.release.compare.compare_releases`; what the reader sees of each release is
:func:`anonweb.releases.selectors.release_views_for_user`'s answer, as on the release page:
officers and stewards of the team the internal report and the gate's findings, analysts the
published one only."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from anonweb.core.release.compare import Comparison, Row, compare_releases
from anonweb.releases.models import Release
from anonweb.releases.selectors import (
    ReleaseForReader,
    release_pair_for_user,
    release_views_for_user,
)

SECTIONS = (
    ("plan", "Plan and parameters"),
    ("risk", "Risk after"),
    ("loss", "Information loss"),
    ("utility", "Utility (measured against the source: officers and stewards only)"),
    ("dp", "Differential privacy: budget spent and statistics released"),
    ("findings", "Release gate findings"),
)


@dataclass(frozen=True)
class ReleaseComparison:
    view_a: ReleaseForReader
    view_b: ReleaseForReader
    comparison: Comparison

    @property
    def a(self) -> Release:
        return self.view_a.release

    @property
    def b(self) -> Release:
        return self.view_b.release

    @property
    def staff(self) -> bool:
        return self.view_a.staff and self.view_b.staff

    def to_dict(self) -> dict[str, Any]:
        return {
            "a": release_header(self.view_a),
            "b": release_header(self.view_b),
            "report": self.view_a.report_name,
            **self.comparison.to_dict(),
        }


def release_header(view: ReleaseForReader) -> dict[str, Any]:
    release = view.release
    return {
        "id": release.pk,
        "dataset": release.dataset_id,
        "version": release.version,
        "title": release.title,
        "status": release.status,
        "rows": release.rows,
        "requested_by": getattr(release.requested_by, "username", None),
        "reviewed_by": getattr(release.reviewed_by, "username", None),
        "created_at": release.created_at.isoformat(),
        "reviewed_at": release.reviewed_at.isoformat() if release.reviewed_at else None,
        "purpose": release.purpose,
        "recipient": view.recipient,
    }


def release_comparison(*, user, a_id: int, b_id: int) -> ReleaseComparison:
    a, b, _ = release_pair_for_user(user=user, a_id=a_id, b_id=b_id)
    # Two versions of one source belong to one team: the reader reads both reports alike.
    view_a, view_b = release_views_for_user(user=user, releases=[a, b], conflicts=False)
    comparison = compare_releases(
        plan_a=view_a.plan,
        plan_b=view_b.plan,
        report_a=view_a.report,
        report_b=view_b.report,
        # The gates as they stand now, as each release's page shows them.
        findings_a=list(view_a.gate.findings) if view_a.gate else None,
        findings_b=list(view_b.gate.findings) if view_b.gate else None,
        # Computed from the source on first use and kept in each release's private folder.
        utility_a=view_a.utility,
        utility_b=view_b.utility,
    )
    return ReleaseComparison(view_a=view_a, view_b=view_b, comparison=comparison)


def value_text(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list | tuple) and all(not isinstance(v, dict | list) for v in value):
        return ", ".join(value_text(v) for v in value) if value else "(none)"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, sort_keys=True)
    return str(value)


def display_row(row: Row) -> dict[str, Any]:
    a, b = value_text(row.a), value_text(row.b)
    if row.differs and a == b:  # a difference beyond the digits shown: show them all
        a, b = repr(row.a), repr(row.b)
    return {"label": row.label, "a": a, "b": b, "differs": row.differs, "better": row.better}


def display_sections(comparison: Comparison, *, only_differences: bool) -> list[dict[str, Any]]:
    out = []
    sections = comparison.sections
    for key, title in SECTIONS:
        rows = sections[key]
        if not rows:
            continue
        shown = [display_row(r) for r in rows if r.differs or not only_differences]
        out.append(
            {
                "key": key,
                "title": title,
                "rows": shown,
                "differences": sum(r.differs for r in rows),
                "total": len(rows),
            }
        )
    return out


def plan_text(plan: dict) -> str:
    """The plan as JSON with its accents as written (never ``\\u00e9``)."""
    return json.dumps(plan or {}, indent=2, ensure_ascii=False, sort_keys=False)
