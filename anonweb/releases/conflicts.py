"""Checking a new release against the earlier releases of the same source."""

from __future__ import annotations

import logging

import pandas as pd

from anonweb.core.conflicts.intersection import release_conflicts
from anonweb.releases.models import Release, ReleaseStatus
from anonweb.releases.storage import load_aligned

log = logging.getLogger(__name__)


def conflicts_with_earlier(
    *, dataset, source: pd.DataFrame, aligned: pd.DataFrame, plan: dict
) -> list[dict]:
    """Compare a new row-per-source-row release (``aligned``: in source order) with every earlier
    release of the source that is not rejected. Returns one entry per comparison."""
    qis = [q for q in plan.get("quasi_identifiers", []) if q in aligned.columns]
    sensitive = [
        s
        for s in dict.fromkeys([*dataset.sensitive, *plan.get("sensitive", [])])
        if s in source.columns
    ]
    if not qis or not sensitive:
        return []
    out = []
    earlier = (
        Release.objects.filter(dataset=dataset)
        .exclude(status=ReleaseStatus.REJECTED)
        .order_by("version")
    )
    for other in earlier:
        other_aligned = load_aligned(other.storage_key)
        other_qis = [
            q
            for q in (other.plan or {}).get("quasi_identifiers", [])
            if other_aligned is not None and q in other_aligned.columns
        ]
        if other_aligned is None or not other_qis or len(other_aligned) != len(source):
            continue
        report = release_conflicts(
            source,
            aligned,
            other_aligned,
            quasi_identifiers_a=qis,
            quasi_identifiers_b=other_qis,
            sensitive=sensitive,
        )
        out.append(
            {
                "release_id": other.pk,
                "version": other.version,
                "status": other.status,
                **report.to_dict(),
            }
        )
    return out
