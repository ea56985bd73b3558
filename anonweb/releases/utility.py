"""A release's utility (the released distributions beside the source's, the information loss per
quasi-identifier, DP figures with their intervals), for the team's officers and stewards.

It is computed from the source, so it is never part of the published report: the first staff
reader computes it with the core's :func:`~anonweb.core.utility.measures.release_utility` from the
stored source, the released table and the private row mapping, and it is kept beside the
lineage in the release's private folder (never served), since neither file changes. It quotes
the source, so it goes when the source is purged (:func:`utility_forget`)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from django.core.exceptions import PermissionDenied

from anonweb.accounts.models import Membership
from anonweb.common.charts import cached_by_digest
from anonweb.core.errors import CoreError
from anonweb.core.io.hierarchy_builders import resolve_hierarchies
from anonweb.core.release.plan import plan_from_dict
from anonweb.core.utility.charts import utility_charts
from anonweb.core.utility.measures import release_utility
from anonweb.datasets.selectors import STAFF_ROLES
from anonweb.datasets.storage import load_frame
from anonweb.releases.models import Release
from anonweb.releases.selectors import release_get_for_user
from anonweb.releases.storage import (
    PRIVATE_DIR,
    read_private_json,
    release_dir,
    write_private_json,
)

UTILITY_FILE = "utility.json"
# Bumped when the stored figures change shape, so that older files are computed again.
UTILITY_VERSION = 2


def is_staff(*, user, release: Release) -> bool:
    return Membership.objects.filter(user=user, team=release.team, role__in=STAFF_ROLES).exists()


def release_utility_for_user(*, user, release_id: int) -> tuple[Release, dict[str, Any] | None]:
    """The release and its utility, for its team's officers and stewards (others: 404 for a
    release they cannot see, 403 for one they can). None when its files are gone."""
    release = release_get_for_user(user=user, release_id=release_id)
    if not is_staff(user=user, release=release):
        raise PermissionDenied(
            "The utility is computed from the source: officers and stewards only."
        )
    return release, release_utility_get(release=release)


def release_utility_get(*, release: Release) -> dict[str, Any] | None:
    """The stored utility, computed and stored on first use. The caller checks the reader."""
    stored = read_private_json(release.storage_key, UTILITY_FILE)
    if isinstance(stored, dict) and stored.get("version") == UTILITY_VERSION:
        return stored["utility"]
    utility = _compute(release)
    if utility is not None:
        write_private_json(
            release.storage_key, UTILITY_FILE, {"version": UTILITY_VERSION, "utility": utility}
        )
    return utility


def _compute(release: Release) -> dict[str, Any] | None:

    folder = release_dir(release.storage_key)
    if not (folder / "data.parquet").exists():
        return None
    try:
        source = load_frame(release.dataset.storage_key)
    except (FileNotFoundError, CoreError):
        return None
    released = pd.read_parquet(folder / "data.parquet")
    rows_path = folder / PRIVATE_DIR / "source_rows.npy"
    source_rows = np.load(rows_path) if rows_path.exists() else None
    if source_rows is not None and (len(source_rows) != len(released) or len(source) == 0):
        source_rows = None
    try:
        plan = plan_from_dict(release.plan) if release.plan else None
    except CoreError:
        plan = None
    hierarchies = _hierarchies(release.plan or {}, source)
    result = release_utility(
        source,
        released,
        report=release.report or {},
        plan=plan,
        hierarchies=hierarchies,
        source_rows=source_rows,
    )
    return result.to_dict()


def _hierarchies(plan: dict, source: pd.DataFrame) -> dict:
    """The plan's hierarchies that can be rebuilt: builders over the source (deterministic).
    An uploaded table is summarised in the stored plan, so its column gets no fixed-levels loss
    (a search's loss is in its report and needs none)."""

    out = {}
    for column, spec in (plan.get("hierarchies") or {}).items():
        if not isinstance(spec, dict) or "builder" not in spec or column not in source.columns:
            continue
        try:
            out.update(resolve_hierarchies({column: spec}, source))
        except CoreError:
            continue
    return out


def utility_forget(*, dataset) -> int:
    """Remove the stored utility of every release of ``dataset`` (it quotes the source's values
    and figures): called when the source is purged. Returns how many files went."""
    removed = 0
    for key in Release.objects.filter(dataset=dataset).values_list("storage_key", flat=True):
        path = release_dir(key) / PRIVATE_DIR / UTILITY_FILE
        if path.exists():
            path.unlink(missing_ok=True)
            removed += 1
    return removed


def utility_charts_cached(utility: dict[str, Any]) -> list[dict[Any, Any]]:

    return cached_by_digest("utility-charts", utility, lambda: utility_charts(utility))
