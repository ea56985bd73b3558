"""Whether the stored release objects are the ones published: each ``release.created`` audit
event records the SHA-256 (and, on a versioned bucket, the version) of the release's published
objects; this reads them back from the storage and compares. ``audit_verify`` runs it after
the chain, so the check rests on hashes the chain itself protects."""

from __future__ import annotations

from dataclasses import dataclass

from anonweb.audit.models import AuditEvent
from anonweb.common.files import files
from anonweb.releases.models import Release
from anonweb.releases.storage import release_object


@dataclass(frozen=True)
class ObjectProblem:
    """One published object that is not as its audit event recorded it."""

    event_id: int
    release_id: str
    name: str
    reason: str

    def describe(self) -> str:
        return (
            f"release #{self.release_id} {self.name} (recorded by event #{self.event_id}): "
            f"{self.reason}"
        )


@dataclass(frozen=True)
class ObjectsReport:
    checked: int
    releases: int
    problems: tuple[ObjectProblem, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems


def _recorded(details: dict) -> list[dict]:
    """The objects an event recorded; an event written before objects were recorded names the
    CSV's hash alone."""
    objects = details.get("objects")
    if isinstance(objects, list):
        return [o for o in objects if isinstance(o, dict) and o.get("name")]
    if details.get("sha256"):
        return [{"name": "data.csv", "sha256": details["sha256"], "version": None}]
    return []


def _object_problem(storage_key, spec: dict) -> str | None:
    stored = release_object(storage_key, str(spec["name"]))
    if not files().exists(stored):
        return "missing from the storage"
    sha = files().sha256(stored)
    if sha != spec.get("sha256"):
        return f"its SHA-256 is {sha}, not the {spec.get('sha256')} recorded: it was changed"
    version = spec.get("version")
    if version is not None:
        now = files().version(stored)
        if now != version:
            return f"the stored version is {now}, not the {version} recorded: it was replaced"
    return None


def release_objects_verify(*, batch: int = 500) -> ObjectsReport:
    """Hash every published object a ``release.created`` event recorded and compare."""
    problems: list[ObjectProblem] = []
    checked = releases = 0
    events = (
        AuditEvent.objects.filter(action="release.created", target_type="release")
        .order_by("seq")
        .only("pk", "target_id", "details_text")
    )
    for event in events.iterator(chunk_size=batch):
        recorded = _recorded(event.details)
        if not recorded:
            continue
        release = Release.objects.filter(pk=event.target_id).only("storage_key").first()
        releases += 1
        for spec in recorded:
            checked += 1
            if release is None:
                reason = "its release row is gone"
            else:
                reason = _object_problem(release.storage_key, spec) or ""
            if reason:
                problems.append(ObjectProblem(event.pk, event.target_id, spec["name"], reason))
    return ObjectsReport(checked, releases, tuple(problems))
