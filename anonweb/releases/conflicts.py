"""Checking a new release against the earlier releases of the same source.

A release keeps its lineage privately (:func:`~anonweb.releases.storage.load_lineage`). When a
release job finishes, :func:`release_conflict_check` puts the new release beside every earlier
release of the source that is approved or awaiting review and runs the core check
(:func:`anonweb.core.conflicts.check.check_conflicts`): intersection, exact inference,
differencing and linkage. It is the one function the release gate calls for conflicts.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from anonweb.core.conflicts.check import ConflictReport, ReleaseView, check_conflicts
from anonweb.core.conflicts.gate import conflict_findings
from anonweb.core.conflicts.inference import Aggregate
from anonweb.core.conflicts.lineage import relabel
from anonweb.core.models.diversity import l_diversity
from anonweb.core.release.report import public_finding, undecided_finding
from anonweb.releases.models import Release, ReleaseStatus
from anonweb.releases.storage import load_lineage

# The new release has no version until it is saved; its label is filled in then.
NEW_LABEL = "release \u27e8new\u27e9"
GATE_NEW_LABEL = "this release"
DEFAULT_K = 5  # the policy's default k (issue: k >= 5)
DEFAULT_L = 2  # no class may disclose its sensitive value
FINDINGS_FILE = "conflicts.json"
# The live releases of a source: approved or awaiting review (a rejected one is out for good).
CHECKED_STATUSES = (ReleaseStatus.APPROVED, ReleaseStatus.PENDING)


def release_label(version: int) -> str:
    return f"release {version}"


@dataclass
class ConflictCheck:
    """The outcome: ``public`` findings (counts, columns, explanation without figures: for the
    release pages and the gate) and ``private`` ones (records and inferred values: officers
    only), in the same order; ``checked`` the ids of the releases compared with."""

    public: list[dict] = field(default_factory=list)
    private: list[dict] = field(default_factory=list)
    checked: list[int] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # The core's report (the new release labelled NEW_LABEL) and each label's review status
    # ("new" for the release being checked): what the release policy reads.
    report: ConflictReport | None = None
    statuses: dict[str, str] = field(default_factory=dict)
    # Each label's release id (None for the release being checked).
    ids: dict[str, int | None] = field(default_factory=dict)
    skipped: bool = False  # a DP release: not checked (its noise is counted in the budget)

    @property
    def blocking(self) -> bool:
        return bool(self.public)

    def gate_findings(self) -> list:
        """The release gate's ``block`` findings for these conflicts (counts, never values),
        with the new release called "this release"."""
        found = conflict_findings(self.report, statuses=self.statuses)
        return [
            dataclasses.replace(
                f,
                message=f.message.replace(NEW_LABEL, GATE_NEW_LABEL),
                facts=_relabel_facts(f.facts),
            )
            for f in found
        ]

    def relabelled(self, version: int) -> ConflictCheck:
        """A copy giving the new release its label, once its version is known."""
        new = release_label(version)
        out = dataclasses.replace(
            self, public=copy.deepcopy(self.public), private=copy.deepcopy(self.private)
        )
        for entry in (*out.public, *out.private):
            entry["explanation"] = entry["explanation"].replace(NEW_LABEL, new)
            if "releases" in entry:
                entry["releases"] = [new if r == NEW_LABEL else r for r in entry["releases"]]
            if "labels" in entry and NEW_LABEL in entry["labels"]:
                entry["labels"][new] = entry["labels"].pop(NEW_LABEL)
            for key in ("l_by_release",):
                if key in entry.get("facts", {}) and NEW_LABEL in entry["facts"][key]:
                    entry["facts"][key][new] = entry["facts"][key].pop(NEW_LABEL)
        return out

    def summary(self) -> dict:
        """Counts only, for the audit trail (no values, no explanations)."""
        by_type: dict[str, int] = {}
        for entry in self.public:
            by_type[entry["type"]] = by_type.get(entry["type"], 0) + 1
        return {"checked": list(self.checked), "findings": by_type}


def _relabel_facts(facts) -> dict:
    out = dict(facts)
    if "releases" in out:
        out["releases"] = [GATE_NEW_LABEL if r == NEW_LABEL else r for r in out["releases"]]
    if "statuses" in out:
        out["statuses"] = {
            (GATE_NEW_LABEL if r == NEW_LABEL else r): v for r, v in out["statuses"].items()
        }
    return out


def live_releases(*, dataset, exclude_id: int | None = None):
    """The live releases of the same source (approved or awaiting review), oldest first: of this
    dataset, and of any upload of the same file in the team (the budget ledger recognises a
    source the same way). A new release is checked against all of them when it is written, and
    a release under review against all the others, later ones included."""
    same_source = Release.objects.filter(dataset=dataset)
    if dataset.source_sha256:
        same_source = Release.objects.filter(
            dataset__team_id=dataset.team_id, dataset__source_sha256=dataset.source_sha256
        )
    qs = (
        same_source.filter(status__in=CHECKED_STATUSES)
        .select_related("dataset")
        .order_by("created_at", "pk")
    )
    return qs.exclude(pk=exclude_id) if exclude_id is not None else qs


def _label(other: Release, dataset) -> str:
    if other.dataset_id == dataset.pk:
        return release_label(other.version)
    return f"{release_label(other.version)} of {other.dataset.name}"


def release_conflict_check(
    *,
    dataset,
    source: pd.DataFrame,
    plan: dict,
    frame: pd.DataFrame | None,
    rows: np.ndarray | None,
    aggregates: Sequence[Aggregate] = (),
    dp: bool = False,
    k: int | None = None,
    l: int | None = None,  # noqa: E741 (the literature's letter)
    exclude_id: int | None = None,
) -> ConflictCheck:
    """Check a new release (its published ``frame``, ``rows[j]`` the source row of row ``j``, the
    ``aggregates`` it publishes, ``dp`` if differentially private) against the live releases of
    ``dataset`` (approved or awaiting review) other than ``exclude_id``. ``k`` and ``l`` are the
    policy's. A release already written is checked again the same way, as the "new" one, with
    its own id excluded (:func:`anonweb.releases.gate.release_gate_now`)."""
    k = DEFAULT_K if k is None else k
    l = DEFAULT_L if l is None else l  # noqa: E741
    out = ConflictCheck()
    if dp:
        out.notes.append("a differentially private release: its noise is counted in the budget")
        out.skipped = True
        return out
    sensitive = [
        s for s in dict.fromkeys([*dataset.sensitive, *plan.get("sensitive", [])]) if s in source
    ]
    tagged = list(dataset.quasi_identifiers)
    views = [
        ReleaseView(
            NEW_LABEL,
            frame.reset_index(drop=True) if frame is not None else None,
            None if rows is None else np.asarray(rows, dtype=np.int64),
            tuple(relabel(a, NEW_LABEL) for a in aggregates),
            _qis(plan, frame, tagged),
        )
    ]
    ids: dict[str, int | None] = {NEW_LABEL: None}
    out.ids = ids
    out.statuses[NEW_LABEL] = "new"
    for other in live_releases(dataset=dataset, exclude_id=exclude_id):
        label = _label(other, dataset)
        lineage = load_lineage(other.storage_key, label=label)
        if lineage.rows is not None and (
            lineage.rows.size and int(lineage.rows.max()) >= len(source)
        ):
            continue  # made from another upload of the data: rows do not align
        if lineage.aggregates and lineage.aggregates[0].groups.size != len(source):
            continue
        views.append(
            ReleaseView(
                label,
                lineage.frame,
                lineage.rows,
                lineage.aggregates,
                _qis(other.plan or {}, lineage.frame, tagged),
                lineage.dp,
            )
        )
        ids[label] = other.pk
        out.statuses[label] = other.status
        out.checked.append(other.pk)
    if len(views) == 1:
        return out
    report = check_conflicts(
        source, views, sensitive=sensitive, k=k, l=l, new=NEW_LABEL, unlinked_k=False
    )
    out.report = report
    out.notes += list(report.notes)
    l_alone = _l_alone(views, sensitive)
    for finding in report.findings:
        private = finding.to_dict()
        columns_l = {
            r: l_alone[(r, c)]
            for r in finding.releases
            for c in finding.columns
            if (r, c) in l_alone
        }
        out.private.append(private)
        out.public.append(
            public_finding(
                private,
                labels={r: ids[r] for r in finding.releases if r in ids},
                l_by_release=columns_l,
            )
        )
    for text in report.incomplete:
        public, private = undecided_finding(text)
        out.private.append(private)
        out.public.append(public)
    return out


def _qis(plan: dict, frame: pd.DataFrame | None, tagged: Sequence[str]) -> tuple[str, ...]:
    """The columns an attacker may know: the dataset's tagged quasi-identifiers with the plan's
    (a plan that lists none is still checked), as the release shows them."""
    if frame is None:
        return ()
    wanted = dict.fromkeys([*tagged, *plan.get("quasi_identifiers", [])])
    return tuple(q for q in wanted if q in frame.columns)


def _l_alone(views: Sequence[ReleaseView], sensitive: Sequence[str]) -> dict:
    """Distinct l of each record-level release alone, per sensitive column it shows."""
    out = {}
    for v in views:
        if v.frame is None or not v.quasi_identifiers or v.frame.empty:
            continue
        for s in sensitive:
            if s in v.frame.columns:
                out[(v.label, s)] = l_diversity(
                    v.frame, quasi_identifiers=list(v.quasi_identifiers), sensitive=s
                ).l_distinct
    return out
