"""A new release checked against the earlier live releases of its source.

The caller hands in the earlier releases as :class:`EarlierRelease` objects (their lineage:
published rows, source rows, aggregates, DP flag, and their review status); where they come
from (a database and private files, or files on the command line) is not this module's
business. :func:`release_conflicts` runs the core check
(:func:`~anonweb.core.conflicts.check.check_conflicts`: intersection, exact inference,
differencing and linkage) with the new release labelled :data:`NEW_LABEL`, and returns a
:class:`ConflictCheck`: public findings (counts, columns, explanations without figures) and
private ones (records and inferred values), in the same order.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.conflicts.check import ConflictReport, ReleaseView, check_conflicts
from anonweb.core.conflicts.gate import conflict_findings
from anonweb.core.conflicts.inference import Aggregate
from anonweb.core.conflicts.lineage import relabel
from anonweb.core.conflicts.public import public_finding, undecided_finding
from anonweb.core.errors import DataError
from anonweb.core.findings import Finding
from anonweb.core.models.diversity import l_diversity

# The new release has no version until it is saved; its label is filled in then.
NEW_LABEL = "release \u27e8new\u27e9"
GATE_NEW_LABEL = "this release"
DEFAULT_K = 5  # the policy's default k (issue: k >= 5)
DEFAULT_L = 2  # no class may disclose its sensitive value


def release_label(version: int) -> str:
    return f"release {version}"


@dataclass(frozen=True)
class EarlierRelease:
    """An earlier live release of the same source, as the checks read it: ``frame`` its
    published rows and ``rows[j]`` the source row of row ``j`` (both None for an aggregate
    table), the ``aggregates`` it published (labelled ``label``), ``dp`` if differentially
    private, ``quasi_identifiers`` its plan's, ``status`` its review status and ``id`` its
    identifier for the caller (``table_file`` and ``rows_file``: where the check out of core
    reads its rows and lineage instead). ``error`` says why its lineage could not be read (then the
    conflict check refuses to run, and the reconstruction leaves it out)."""

    label: str
    status: str
    id: int | None = None
    frame: pd.DataFrame | None = field(default=None, repr=False)
    rows: NDArray[Any] | None = field(default=None, repr=False)
    aggregates: tuple[Aggregate, ...] = field(default=(), repr=False)
    dp: bool = False
    quasi_identifiers: tuple[str, ...] = ()
    error: str | None = None
    # Where the check out of core reads a record-level release without holding it: its
    # published rows (Parquet) and its lineage (Parquet), when ``frame`` and ``rows`` are not
    # given (:mod:`anonweb.core.conflicts.engine_check`).
    table_file: str | None = None
    rows_file: str | None = None

    def aligned_rows(self, source_rows: int) -> bool:
        """Its records are rows of a source of ``source_rows`` rows (not another upload)."""
        return self.rows is None or not self.rows.size or int(self.rows.max()) < source_rows

    def usable_aggregates(self, source_rows: int) -> tuple[Aggregate, ...]:
        """Its aggregates over groups of a source of ``source_rows`` rows."""
        return tuple(a for a in self.aggregates if np.asarray(a.groups).size == source_rows)


@dataclass
class ConflictCheck:
    """The outcome: ``public`` findings (counts, columns, explanation without figures: for the
    release pages and the gate) and ``private`` ones (records and inferred values: officers
    only), in the same order; ``checked`` the ids of the releases compared with."""

    public: list[dict[str, Any]] = field(default_factory=list)
    private: list[dict[str, Any]] = field(default_factory=list)
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

    def gate_findings(self) -> list[Finding]:
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

    def summary(self) -> dict[str, Any]:
        """Counts only, for the audit trail (no values, no explanations)."""
        by_type: dict[str, int] = {}
        for entry in self.public:
            by_type[entry["type"]] = by_type.get(entry["type"], 0) + 1
        return {"checked": list(self.checked), "findings": by_type}


def _relabel_facts(facts: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(facts)
    if "releases" in out:
        out["releases"] = [GATE_NEW_LABEL if r == NEW_LABEL else r for r in out["releases"]]
    if "statuses" in out:
        out["statuses"] = {
            (GATE_NEW_LABEL if r == NEW_LABEL else r): v for r, v in out["statuses"].items()
        }
    return out


def release_conflicts(
    source: pd.DataFrame,
    *,
    frame: pd.DataFrame | None,
    rows: NDArray[Any] | None,
    earlier: Sequence[EarlierRelease],
    quasi_identifiers: Sequence[str] = (),
    plan_quasi_identifiers: Sequence[str] = (),
    sensitive: Sequence[str] = (),
    aggregates: Sequence[Aggregate] = (),
    dp: bool = False,
    k: int | None = None,
    l: int | None = None,  # noqa: E741 (the literature's letter)
) -> ConflictCheck:
    """Check a new release (its published ``frame``, ``rows[j]`` the source row of row ``j``,
    the ``aggregates`` it publishes, ``dp`` if differentially private) against the ``earlier``
    live releases of ``source``. ``quasi_identifiers`` are the columns tagged as such, which an
    attacker may know; each release is read on those it shows with its own plan's
    (``plan_quasi_identifiers`` for the new one). ``sensitive`` the columns whose values must not be disclosed; ``k`` and ``l`` the
    policy's. Earlier releases made from another upload of the data (rows that do not align)
    are left out."""
    k = DEFAULT_K if k is None else k
    l = DEFAULT_L if l is None else l  # noqa: E741
    out = ConflictCheck()
    if dp:
        out.notes.append("a differentially private release: its noise is counted in the budget")
        out.skipped = True
        return out
    sensitive = [s for s in dict.fromkeys(sensitive) if s in source]
    tagged = list(quasi_identifiers)
    views = [
        ReleaseView(
            NEW_LABEL,
            frame.reset_index(drop=True) if frame is not None else None,
            None if rows is None else np.asarray(rows, dtype=np.int64),
            tuple(relabel(a, NEW_LABEL) for a in aggregates),
            _qis(plan_quasi_identifiers, frame, tagged),
        )
    ]
    ids: dict[str, int | None] = {NEW_LABEL: None}
    out.ids = ids
    out.statuses[NEW_LABEL] = "new"
    for other in earlier:
        if other.error is not None:
            raise DataError(
                f"the lineage of {other.label} cannot be read ({other.error}), so this release "
                "cannot be checked against it"
            )
        if not other.aligned_rows(len(source)):
            continue  # made from another upload of the data: rows do not align
        if other.aggregates and other.aggregates[0].groups.size != len(source):
            continue
        views.append(
            ReleaseView(
                other.label,
                other.frame,
                other.rows,
                other.aggregates,
                _qis(other.quasi_identifiers, other.frame, tagged),
                other.dp,
            )
        )
        ids[other.label] = other.id
        out.statuses[other.label] = other.status
        if other.id is not None:
            out.checked.append(other.id)
    if len(views) == 1:
        return out
    report = check_conflicts(
        source, views, sensitive=sensitive, k=k, l=l, new=NEW_LABEL, unlinked_k=False
    )
    return finish_check(out, report, _l_alone(views, sensitive))


def finish_check(
    out: ConflictCheck, report: ConflictReport, l_alone: Mapping[tuple[str, str], Any]
) -> ConflictCheck:
    """``out`` (its ``ids`` and ``statuses`` filled in) with the core's ``report``: its public
    and private findings, in the same order. ``l_alone[(label, column)]`` is the distinct l of
    each record-level release alone, per sensitive column it shows. The check in memory and the
    one out of core (:mod:`anonweb.core.conflicts.engine_check`) both end here."""
    out.report = report
    out.notes += list(report.notes)
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
                labels={r: out.ids[r] for r in finding.releases if r in out.ids},
                l_by_release=columns_l,
            )
        )
    for text in report.incomplete:
        public, private_entry = undecided_finding(text)
        out.private.append(private_entry)
        out.public.append(public)
    return out


def _qis(
    plan_qis: Sequence[str], frame: pd.DataFrame | None, tagged: Sequence[str]
) -> tuple[str, ...]:
    """The columns an attacker may know: the tagged quasi-identifiers with the release's plan's
    (a plan that lists none is still checked), as the release shows them."""
    if frame is None:
        return ()
    return shown_qis(plan_qis, [str(c) for c in frame.columns], tagged)


def shown_qis(
    plan_qis: Sequence[str], columns: Sequence[str], tagged: Sequence[str]
) -> tuple[str, ...]:
    """The tagged quasi-identifiers with the plan's, among a release's ``columns``."""
    wanted = dict.fromkeys([*tagged, *plan_qis])
    return tuple(q for q in wanted if q in columns)


def _l_alone(views: Sequence[ReleaseView], sensitive: Sequence[str]) -> dict[tuple[str, str], Any]:
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
