"""Checking a new release against the earlier releases of the same source.

A release keeps its lineage privately (:func:`~anonweb.releases.storage.load_lineage`). When a
release job finishes, :func:`release_conflict_check` puts the new release beside every earlier
release of the source that is approved or awaiting review and runs the core check
(:func:`anonweb.core.conflicts.check.check_conflicts`): intersection, exact inference,
differencing and linkage. It is the one function the release gate calls for conflicts. The
check itself is the core's (:mod:`anonweb.core.conflicts.release`); this module reads the earlier
releases from the database and their private files.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from anonweb.core.conflicts.engine_check import TableRelease, engine_release_conflicts
from anonweb.core.conflicts.inference import Aggregate
from anonweb.core.conflicts.release import (
    NEW_LABEL,
    ConflictCheck,
    EarlierRelease,
    release_conflicts,
    release_label,
)
from anonweb.core.engine.select import make_engine
from anonweb.core.errors import DataError
from anonweb.core.release.steps import Plan
from anonweb.releases.models import Release, ReleaseStatus
from anonweb.releases.storage import load_lineage

FINDINGS_FILE = "conflicts.json"
# The live releases of a source: approved or awaiting review (a rejected one is out for good).
CHECKED_STATUSES = (ReleaseStatus.APPROVED, ReleaseStatus.PENDING)


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


def label_for(other: Release, dataset) -> str:
    """How a release of the source is named in findings: its version, and its dataset's name
    when it was made from another upload of the same file."""
    if other.dataset_id == dataset.pk:
        return release_label(other.version)
    return f"{release_label(other.version)} of {other.dataset.name}"


def earlier_releases(
    *, dataset, exclude_id: int | None = None, in_memory: bool = True
) -> list[EarlierRelease]:
    """The live releases of the source of ``dataset`` (see :func:`live_releases`) with their
    lineage, as the core's checks read them. A lineage that cannot be read is handed on with
    the reason: the conflict check refuses it, the reconstruction leaves it out. Without
    ``in_memory``, a record-level release's published rows (and an engine's source rows) are
    named by their files on the local disk, for the check out of core, not read."""
    out = []
    for other in live_releases(dataset=dataset, exclude_id=exclude_id):
        label = label_for(other, dataset)
        qis = tuple((other.plan or {}).get("quasi_identifiers") or ())
        try:
            lineage = load_lineage(other.storage_key, label=label, in_memory=in_memory)
        except (OSError, ValueError, KeyError, DataError) as exc:
            out.append(
                EarlierRelease(label, other.status, other.pk, quasi_identifiers=qis, error=str(exc))
            )
            continue
        out.append(
            EarlierRelease(
                label,
                other.status,
                other.pk,
                lineage.frame,
                lineage.rows,
                lineage.aggregates,
                lineage.dp,
                qis,
                table_file=lineage.table_file,
                rows_file=lineage.rows_file,
            )
        )
    return out


def release_conflict_check_out_of_core(
    *,
    dataset,
    table: str,
    rows: str,
    plan: Mapping[str, Any],
    source_rows: int,
    source_columns: Sequence[str],
    k: int | None = None,
    l: int | None = None,  # noqa: E741 (the literature's letter)
    exclude_id: int | None = None,
) -> ConflictCheck:
    """:func:`release_conflict_check` of a release an engine wrote (its published ``table``
    and its ``rows``, the source rows, as Parquet files on the local disk) against the live
    releases of ``dataset`` other than ``exclude_id``, counted by DuckDB
    (:func:`anonweb.core.conflicts.engine_check.engine_release_conflicts`). Raises
    :class:`~anonweb.core.conflicts.engine_check.NotOutOfCore` for what it cannot count."""
    # DuckDB's memory limit and spill folder as the deployment sets them for its engine
    engine = make_engine("duckdb", table)
    try:
        return engine_release_conflicts(
            engine.con,  # type: ignore[attr-defined]
            TableRelease(NEW_LABEL, table, rows, tuple(plan.get("quasi_identifiers") or ())),
            earlier=earlier_releases(dataset=dataset, exclude_id=exclude_id, in_memory=False),
            source_rows=source_rows,
            source_columns=source_columns,
            quasi_identifiers=dataset.quasi_identifiers,
            sensitive=[*dataset.sensitive, *(plan.get("sensitive") or [])],
            k=k,
            l=l,
        )
    finally:
        engine.close()


def release_conflict_check(
    *,
    dataset,
    source: pd.DataFrame,
    plan: Plan | Mapping[str, Any],
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
    its own id excluded (:func:`anonweb.releases.gate.release_gate_now`). The check itself is
    the core's (:func:`anonweb.core.conflicts.release.release_conflicts`)."""
    if isinstance(plan, Plan):
        plan_qis, plan_sensitive = list(plan.quasi_identifiers), list(plan.sensitive)
    else:  # a stored release's plan, as published with it
        plan_qis = list(plan.get("quasi_identifiers") or [])
        plan_sensitive = list(plan.get("sensitive") or [])
    return release_conflicts(
        source,
        frame=frame,
        rows=rows,
        earlier=[] if dp else earlier_releases(dataset=dataset, exclude_id=exclude_id),
        quasi_identifiers=dataset.quasi_identifiers,
        plan_quasi_identifiers=plan_qis,
        sensitive=[*dataset.sensitive, *plan_sensitive],
        aggregates=aggregates,
        dp=dp,
        k=k,
        l=l,
    )
