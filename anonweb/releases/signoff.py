"""The sign-off report of a release: one self-contained HTML file (inline style, no script, no
external resource) that a privacy officer or a steward files with the approval. It states the
release's identity, the SHA-256 of every file of the release computed from the stored files (and
checked against the hash recorded at publication), with the stored file each download made on
request (the xlsx) is written from (such a download has no stored hash of its own), the plan, what the
search did, the gate's findings, the approval and the release's audit trail. The plan and the
audit details read as tables (the ``as_table`` filter, as everywhere in the app).

It carries internal figures (the internal report, scrubbed as when it was stored), so it is for
the team's officers and stewards only; never a key or a seed (plans name keys, never hold them).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass

from django.template.loader import render_to_string
from django.utils import timezone

from anonweb.audit.models import AuditEvent
from anonweb.audit.rows import event_rows_html
from anonweb.common.files import files
from anonweb.core.io.export import EXPORT_FORMATS, ExportFormat
from anonweb.core.release.publish import scrub_report
from anonweb.releases.conflicts import FINDINGS_FILE
from anonweb.releases.gate import release_gate_now
from anonweb.releases.models import Release
from anonweb.releases.selectors import conflicts_for
from anonweb.releases.services import release_record_signoff
from anonweb.releases.storage import (
    DERIVED_SOURCE,
    LINEAGE_FILE,
    PRIVATE_DIR,
    SOURCE_ROWS_PARQUET,
    release_prefix,
)
from anonweb.releases.utility import UTILITY_FILE

# The file whose SHA-256 is recorded on the release (and in its creation event) at publication.
RECORDED_FILE = "data.csv"

# What each private file is, in the report's words (the published ones: see file_roles).
PRIVATE_FILE_ROLES = {
    f"{PRIVATE_DIR}/source_rows.npy": "the source row of each published row (conflict checks)",
    f"{PRIVATE_DIR}/{SOURCE_ROWS_PARQUET}": "the source row of each published row, as the "
    "engine that wrote the release kept it (conflict checks)",
    f"{PRIVATE_DIR}/aggregates.npz": "the figures it published over groups of source records "
    "(conflict checks)",
    f"{PRIVATE_DIR}/{LINEAGE_FILE}": "what kind of output it is (conflict checks)",
    f"{PRIVATE_DIR}/{FINDINGS_FILE}": "the conflict findings its own check made when it was "
    "written, with their records (those found later are listed under Release gate and "
    "Conflicts)",
    f"{PRIVATE_DIR}/{UTILITY_FILE}": "its utility measured against the source",
}


def file_roles() -> dict[str, str]:
    """What each stored file is: one per stored export format, then the private ones."""
    published = {
        f.file_name: f"the published table (the {f.described} download)"
        for f in EXPORT_FORMATS.values()
        if f.stored
    }
    return published | PRIVATE_FILE_ROLES


@dataclass(frozen=True)
class FileHash:
    """One stored file of a release: its path inside the release, size, SHA-256 now, the hash
    recorded at publication (None if none was) and whether it is served to readers."""

    name: str
    size: int
    sha256: str
    recorded: str | None
    served: bool

    @property
    def role(self) -> str:
        return file_roles().get(self.name, "")

    @property
    def verified(self) -> bool | None:
        return None if self.recorded is None else self.recorded == self.sha256


def release_file_hashes(release: Release) -> list[FileHash]:
    """Every file stored for ``release`` (published and private), hashed now. Temporary files of
    a write in progress (hidden names) are not part of the release."""
    prefix = release_prefix(release.storage_key)
    out = []
    for name in files().walk(prefix):
        parts = name.split("/")
        if any(part.startswith(".") for part in parts):
            continue
        stored = f"{prefix}/{name}"
        out.append(
            FileHash(
                name=name,
                size=files().size(stored),
                sha256=files().sha256(stored),
                recorded=release.sha256 if name == RECORDED_FILE else None,
                served=parts[0] != PRIVATE_DIR,
            )
        )
    return out


# Steps that make k-anonymous classes: the release page opens with what they did.
SEARCH_KINDS = ("optimal_generalization", "mondrian")


def disclosing(report: dict) -> list[tuple[str, dict]]:
    """Sensitive columns with classes that share one value after a search that reached k."""
    searched = any(s.get("kind") in SEARCH_KINDS for s in report.get("steps") or [])
    sensitive = (report.get("risk_after") or {}).get("sensitive") or {}
    if not searched:
        return []
    return [(name, sa) for name, sa in sensitive.items() if sa.get("homogeneous_classes")]


@dataclass(frozen=True)
class Derivation:
    """A download written on request (not stored): the stored file it is written from, or
    None when the release does not offer it (``too_many``: its rows do not fit the format)."""

    format: ExportFormat
    source: FileHash | None
    too_many: bool


def derivations(release: Release, files: list[FileHash]) -> list[Derivation]:
    """Each export format written on request, with the stored file it is written from."""
    source = next((f for f in files if f.name == DERIVED_SOURCE), None)
    out = []
    for fmt in EXPORT_FORMATS.values():
        if fmt.stored:
            continue
        offered = fmt.offered(release.rows)
        out.append(Derivation(fmt, source if offered else None, not offered))
    return out


def signoff_filename(release: Release) -> str:
    return re.sub(r"[^\w.-]+", "_", f"{release.dataset.name}-v{release.version}-signoff.html")


def signoff_html(*, release: Release, user, files: list[FileHash] | None = None) -> str:
    """The sign-off report of ``release`` as generated now for ``user`` (who must be an officer
    or steward of its team: see ``release_get_for_signoff``)."""

    report = scrub_report(copy.deepcopy(release.report or {}))
    files = release_file_hashes(release) if files is None else files
    events = AuditEvent.objects.filter(target_type="release", target_id=str(release.pk)).order_by(
        "seq"
    )
    context = {
        "release": release,
        "report": report,
        "disclosing": disclosing(report),
        "files": files,
        "recorded_file": RECORDED_FILE,
        "recorded_missing": release.sha256 and not any(f.name == RECORDED_FILE for f in files),
        "mismatch": [f for f in files if f.verified is False],
        "derived": derivations(release, files),
        "plan_json": json.dumps(release.plan or {}, indent=2, ensure_ascii=False),
        # every event about the release, each rendered once (a download is one: a release
        # downloaded a few hundred times had its report render as many tables on each view)
        "event_rows": event_rows_html(
            events,
            template="releases/_signoff_event.html",
            part="signoff-row",
            counter="signoff-row",
        ),
        # The gate as it stands now: conflicts with every other live release, later ones too.
        "gate": release_gate_now(release=release),
        "conflicts": conflicts_for(release=release, user=user),
        "generated_at": timezone.now(),
        "generated_by": user.get_username(),
    }
    return render_to_string("releases/signoff.html", context)


def signoff_download(*, release: Release, user):
    """The sign-off report as an attachment, its download recorded in the audit trail with the
    hashes it states (the page and the API both answer with this)."""
    from django.http import HttpResponse

    files = release_file_hashes(release)
    html = signoff_html(release=release, user=user, files=files)
    release_record_signoff(
        user=user, release=release, files=[{"name": f.name, "sha256": f.sha256} for f in files]
    )
    response = HttpResponse(html, content_type="text/html; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{signoff_filename(release)}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response
