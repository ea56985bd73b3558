"""The release gate in the app: the team's thresholds, the core policy run on a new release, and
the gate as it stands when a steward looks at a release or decides on it.

The decision itself is :func:`anonweb.core.release.policy.evaluate_release`, which a new release
meets in :func:`anonweb.core.release.make.make_release`; this module only gathers what it reads
(the team's thresholds, the live releases of the source) and records the steward's changes to
the policy.

A release's conflicts depend on the other releases, which keep changing after it is written: a
later release that conflicts with it, an earlier one rejected. :func:`release_gate_now` is the
one function the release page, the API, the review and the sign-off report call: the findings
recorded when the release was written, with its conflicts checked again against every other
live release of the source (earlier and later).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

from anonweb.accounts.models import Role
from anonweb.accounts.selectors import require_role
from anonweb.audit.services import audit_record
from anonweb.core.attacks.gate import ATTACK_CODES, attack_findings
from anonweb.core.conflicts.engine_check import NotOutOfCore
from anonweb.core.conflicts.gate import status_text
from anonweb.core.conflicts.release import GATE_NEW_LABEL, NEW_LABEL, ConflictCheck
from anonweb.core.errors import CoreError
from anonweb.core.findings import BLOCK, Finding
from anonweb.core.release.policy import PolicyThresholds
from anonweb.datasets.models import Dataset
from anonweb.datasets.storage import load_frame
from anonweb.releases.attacks import release_attacks_get
from anonweb.releases.conflicts import (
    live_releases,
    release_conflict_check,
    release_conflict_check_out_of_core,
)
from anonweb.releases.models import ConflictFinding, Release, ReleasePolicy, ReleaseStatus
from anonweb.releases.storage import load_lineage

log = logging.getLogger(__name__)


def thresholds_for(*, team) -> PolicyThresholds:
    row = ReleasePolicy.objects.filter(team=team).first()
    if row is None:
        return PolicyThresholds()
    return PolicyThresholds(
        k=row.k,
        l=row.l,
        t=row.t,
        max_prosecutor_risk=row.max_prosecutor_risk,
        max_attack_excess=row.max_attack_excess,
        max_membership_auc=row.max_membership_auc,
        models=tuple(row.model_specs) if row.model_specs else None,
    )


def release_policy_update(*, user, team, thresholds: PolicyThresholds) -> ReleasePolicy:
    """A data steward sets the team's thresholds (validated by the core's dataclass)."""
    require_role(user=user, team=team, role=Role.DATA_STEWARD)
    before = thresholds_for(team=team).to_dict()
    with transaction.atomic():
        row, _ = ReleasePolicy.objects.select_for_update().get_or_create(team=team)
        row.k, row.l, row.t = thresholds.k, thresholds.l, thresholds.t
        row.max_prosecutor_risk = thresholds.max_prosecutor_risk
        row.max_attack_excess = thresholds.max_attack_excess
        row.max_membership_auc = thresholds.max_membership_auc
        row.model_specs = [dict(s) for s in thresholds.models or ()]
        row.updated_by = user
        row.save()
        audit_record(
            actor=user,
            team=team,
            action="policy.updated",
            target=row,
            details={"before": before, "after": thresholds.to_dict()},
        )
    return row


CONFLICT_PREFIX = "conflict_"
RECHECK_SECONDS = 7 * 24 * 3600  # keyed by the state it was computed on, so never stale


@dataclass(frozen=True)
class GateNow:
    """A release's gate as it stands now: ``findings`` (dicts, as ``Release.gate`` holds them)
    are those recorded when it was written, with the conflict findings replaced by a check
    against ``checked``, the other live releases of the source (``{"id", "version", "label",
    "status"}``), and the attack findings by the newest attack figures against the policy's
    caps, at ``version`` (a digest of the releases' ids and statuses, the dataset's tags, the
    policy's k, l and attack caps, and the attack figures). ``rechecked`` is False when the check could not run again (the source
    was purged, or the release's lineage is gone): its conflicts are then those recorded when
    each release was written, with the releases involved still live."""

    findings: tuple[dict[str, Any], ...]
    checked: tuple[dict[str, Any], ...]
    version: str
    rechecked: bool
    conflict_k: int
    conflict_l: int
    at: str = ""
    notes: tuple[str, ...] = field(default=())

    @property
    def blocking(self) -> list[dict[str, Any]]:
        return [f for f in self.findings if f.get("severity") == BLOCK]

    @property
    def conflicts(self) -> list[dict[str, Any]]:
        return [f for f in self.findings if str(f.get("code", "")).startswith(CONFLICT_PREFIX)]

    def to_dict(self) -> dict[str, Any]:
        return {
            "findings": list(self.findings),
            "blocking": len(self.blocking),
            "checked": list(self.checked),
            "version": self.version,
            "rechecked": self.rechecked,
            "conflict_thresholds": {"k": self.conflict_k, "l": self.conflict_l},
            "at": self.at,
            "notes": list(self.notes),
        }


def _label(other: Release, release: Release) -> str:
    if other.dataset_id == release.dataset_id:
        return f"release {other.version}"
    return f"release {other.version} of {other.dataset.name}"


def _version(
    release: Release,
    others: Sequence[Release],
    thresholds: PolicyThresholds,
    attacks: dict[str, Any] | None,
) -> str:
    """What the gate of ``release`` depends on, as a digest: the live releases (by storage key,
    unique for ever, and status), the dataset's tags, the policy's k and l and its caps on the
    attacks, and the newest attack figures (a run from the release page is a new state, so a
    steward's approval names the figures it was decided on)."""
    state = {
        "release": str(release.storage_key),
        "tags": release.dataset.tags or {},
        "k": thresholds.k,
        "l": thresholds.l,
        "live": sorted((str(o.storage_key), o.status) for o in others),
        "attack_caps": [thresholds.max_attack_excess, thresholds.max_membership_auc],
        "attacks": None
        if attacks is None
        else hashlib.sha256(json.dumps(attacks, sort_keys=True, default=str).encode()).hexdigest(),
    }
    text = json.dumps(state, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _source(release: Release) -> pd.DataFrame | None:
    """The source table: the release's dataset's, or another upload of the same file in the team
    (rows align, as the conflict check assumes); None once every copy is purged."""
    dataset = release.dataset
    candidates = [dataset]
    if dataset.source_sha256:
        candidates += list(
            Dataset.objects.filter(
                team_id=dataset.team_id,
                source_sha256=dataset.source_sha256,
                purged_at__isnull=True,
            ).exclude(pk=dataset.pk)
        )
    for candidate in candidates:
        if candidate.is_purged:
            continue
        try:
            return load_frame(candidate.storage_key)
        except CoreError:
            continue
    return None


NOT_RECHECKED = "not_rechecked"
UNCHECKED = "conflicts_unchecked"  # the gate's code for a check an engine did not run


class NotRechecked(Exception):
    """Why a release's conflict check cannot run again (a sentence for the steward)."""


def _recheck(release: Release, thresholds: PolicyThresholds) -> dict[str, Any]:
    """The release's conflict check run again against the other live releases, as gate findings
    with the ids of the releases each involves. Raises :class:`NotRechecked` if it cannot."""
    if (release.report or {}).get("engine") not in (None, "pandas"):
        return _findings_of(release, _recheck_out_of_core(release, thresholds))
    source = _source(release)
    if source is None:
        raise NotRechecked("the source's raw data was purged")
    lineage = load_lineage(release.storage_key, label=NEW_LABEL)
    if lineage.rows is None and not lineage.aggregates and not lineage.dp:
        raise NotRechecked("this release's lineage is not kept")
    if lineage.rows is not None and lineage.rows.size and int(lineage.rows.max()) >= len(source):
        raise NotRechecked("this release was made from another upload of the data")
    try:
        check = release_conflict_check(
            dataset=release.dataset,
            source=source,
            plan=release.plan or {},
            frame=lineage.frame if lineage.rows is not None else None,
            rows=lineage.rows,
            aggregates=lineage.aggregates,
            dp=lineage.dp,
            k=thresholds.k,
            l=thresholds.l,
            exclude_id=release.pk,
        )
    except CoreError as exc:
        log.warning("conflict check of release %s could not run again: %s", release.pk, exc)
        raise NotRechecked(str(exc)) from exc
    return _findings_of(release, check)


def _recheck_out_of_core(release: Release, thresholds: PolicyThresholds) -> ConflictCheck:
    """The check of a release an engine wrote, run again out of core from its files (a table
    past one machine's memory is never read whole to re-check it)."""
    dataset = release.dataset
    if dataset.is_purged:
        raise NotRechecked("the source's raw data was purged")
    lineage = load_lineage(release.storage_key, label=NEW_LABEL, in_memory=False)
    if lineage.table_file is None or lineage.rows_file is None:
        raise NotRechecked("this release's lineage is not kept")
    try:
        return release_conflict_check_out_of_core(
            dataset=dataset,
            table=lineage.table_file,
            rows=lineage.rows_file,
            plan=release.plan or {},
            source_rows=int(dataset.rows),
            source_columns=dataset.column_names,
            k=thresholds.k,
            l=thresholds.l,
            exclude_id=release.pk,
        )
    except (NotOutOfCore, CoreError) as exc:
        raise NotRechecked(str(exc)) from exc


def _findings_of(release: Release, check: ConflictCheck) -> dict[str, Any]:
    """A check's gate findings with the ids of the releases each involves."""
    ids = {(GATE_NEW_LABEL if label == NEW_LABEL else label): i for label, i in check.ids.items()}
    ids[GATE_NEW_LABEL] = release.pk
    findings = check.gate_findings()
    return {
        "findings": [f.to_dict() for f in findings],
        "involved": [
            sorted({ids[label] for label in f.facts.get("releases", []) if ids.get(label)})
            or [release.pk]
            for f in findings
        ],
        "notes": list(check.notes),
    }


def _recorded(release: Release, live: dict[int, Release]) -> list[tuple[dict[str, Any], set[int]]]:
    """The conflict findings recorded when releases were written (this one's check and later
    ones') that involve this release and only live releases, as gate findings."""
    out = []
    findings = (
        ConflictFinding.objects.filter(involved=release)
        .select_related("release__dataset")
        .prefetch_related("involved__dataset")
        .order_by("release__created_at", "position", "pk")
    )
    for f in findings:
        involved = {r.pk: r for r in f.involved.all()}
        if any(r.status == ReleaseStatus.REJECTED for r in involved.values()):
            continue
        labels = {
            (GATE_NEW_LABEL if pk == release.pk else _label(r, release)): (
                "new" if pk == release.pk else r.status
            )
            for pk, r in sorted(involved.items(), key=lambda item: item[1].version)
            if pk == release.pk or pk in live
        }
        found_by = "this release" if f.release_id == release.pk else _label(f.release, release)
        code = "conflict_incomplete" if f.type == "undecided" else f"{CONFLICT_PREFIX}{f.type}"
        finding = Finding(
            code=code,
            severity=BLOCK,
            message=f"{f.explanation} (found when {found_by} was written)"
            + status_text(tuple(labels), labels),
            columns=tuple(f.columns),
            records=f.records,
            facts={"releases": list(labels), "statuses": labels, "recorded": True},
        )
        out.append((finding.to_dict(), set(involved)))
    return out


def _attack_findings(attacks: dict[str, Any], thresholds: PolicyThresholds) -> list[Finding]:
    return attack_findings(
        attacks,
        max_excess=thresholds.max_attack_excess,
        max_auc=thresholds.max_membership_auc,
    )


def release_gate_now(*, release: Release) -> GateNow:
    """The gate of ``release`` at this moment (see :class:`GateNow`). The check is kept in the
    cache under the state it was computed on: an unchanged state is not checked twice, and any
    change to the live releases (one written, approved or rejected), the tags, the policy's k
    and l or its attack caps, or the attack figures (attacks run again from the release page)
    is a new state, checked afresh. The attack findings are those of the newest figures
    against the policy's caps now.

    The whole answer but its time is kept too, under the same state (``GATE_NOW_KEY``): what it
    reads besides the check, the release's recorded findings and the conflict findings recorded
    when releases of the source were written, cannot change without changing that state (the
    first never changes; the second are written with the release that found them, a new live
    release, and drop out with the live status of a release they involve), so a steward's
    view of an unchanged state reads three rows and one cache entry instead of building it."""
    thresholds = thresholds_for(team=release.team)
    # what the state and the releases checked are made of: not the others' JSON documents
    others = list(live_releases(dataset=release.dataset, exclude_id=release.pk).only(*LIVE_FIELDS))
    attacks = release_attacks_get(release=release)
    version = _version(release, others, thresholds, attacks)
    key = GATE_NOW_KEY.format(release=release.pk, version=version)
    kept = cache.get(key)
    if kept is None:
        kept = _gate_now_parts(release, others, thresholds, attacks, version)
        cache.set(key, kept, RECHECK_SECONDS)
    return GateNow(
        findings=tuple(kept["findings"]),
        checked=tuple(kept["checked"]),
        version=version,
        rechecked=kept["rechecked"],
        conflict_k=thresholds.k,
        conflict_l=thresholds.l,
        at=timezone.now().isoformat(timespec="seconds"),
        notes=tuple(kept["notes"]),
    )


# What the gate reads of the other live releases: their state (:func:`_version`) and names.
LIVE_FIELDS = ("id", "storage_key", "status", "version", "created_at", "dataset", "dataset__name")


# The release's id and the digest of the state its gate was built on (:func:`_version`).
GATE_NOW_KEY = "anonweb:gate-now-whole:v1:{release}:{version}"


def _gate_now_parts(
    release: Release,
    others: Sequence[Release],
    thresholds: PolicyThresholds,
    attacks: dict[str, Any] | None,
    version: str,
) -> dict[str, Any]:
    """The findings, the releases checked, whether the check ran again and the notes of the
    gate of ``release`` in the state ``version`` (:func:`release_gate_now`)."""
    key = f"anonweb:gate-now:{version}"
    rechecked = cache.get(key)
    notes: list[str] = []
    if rechecked is None:
        try:
            rechecked = _recheck(release, thresholds)
        except NotRechecked as why:
            # Why it cannot run is as much a function of the state as the check: kept too, or
            # every view of such a release would read the source again to find out once more.
            rechecked = {NOT_RECHECKED: str(why)}
        cache.set(key, rechecked, RECHECK_SECONDS)
    if NOT_RECHECKED in rechecked:
        notes.append(
            f"The conflict check could not run again ({rechecked[NOT_RECHECKED]}): the "
            "conflicts are those found when each release was written."
        )
        rechecked = None
    live = {o.pk: o for o in others}
    conflicts: list[dict[str, Any]] = []
    found: set[tuple[str, frozenset[int]]] = set()
    if rechecked is not None:
        conflicts = list(rechecked["findings"])
        notes += rechecked["notes"]
        found = {
            (f["code"], frozenset(ids))
            for f, ids in zip(rechecked["findings"], rechecked["involved"], strict=True)
        }
    # A combination recorded when a release was written and not found by the check of this
    # release against all the others together (which does not count again what the others
    # already disclose) still involves this release: it stays until a release in it is rejected.
    for finding, ids in _recorded(release, live):
        if (finding["code"], frozenset(ids)) not in found:
            conflicts.append(finding)
    # the check run now replaces the one recorded, and a check an engine could not run when the
    # release was written (conflicts_unchecked) once it has run
    kept = [
        f
        for f in release.findings
        if not str(f.get("code", "")).startswith(CONFLICT_PREFIX)
        and not (rechecked is not None and f.get("code") == UNCHECKED)
    ]
    if attacks is not None:
        # The newest attack figures (an on-demand run's, else the publishing job's) against the
        # policy's caps as they stand, in place of those recorded when the release was written.
        kept = [f for f in kept if f.get("code") not in ATTACK_CODES]
        kept += [f.to_dict() for f in _attack_findings(attacks, thresholds)]
    return {
        "findings": kept + conflicts,
        "checked": [
            {"id": o.pk, "version": o.version, "label": _label(o, release), "status": o.status}
            for o in others
        ],
        "rechecked": rechecked is not None,
        "notes": notes,
    }
