"""The release gate in the app: the team's thresholds, and the core policy run on a new release.

The decision itself is :func:`anonweb.core.release.policy.evaluate_release`; this module only
gathers what it reads (the dataset's tags, the team's thresholds, the earlier releases of the
source that are approved or awaiting review) and records the steward's changes to the policy.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pandas as pd
from django.db import transaction

from anonweb.accounts.models import Role
from anonweb.accounts.selectors import require_role
from anonweb.audit.services import audit_record
from anonweb.core.findings import Finding
from anonweb.core.release.policy import PolicyResult, PolicyThresholds, evaluate_release
from anonweb.releases.models import ReleasePolicy

log = logging.getLogger(__name__)


def thresholds_for(*, team) -> PolicyThresholds:
    row = ReleasePolicy.objects.filter(team=team).first()
    if row is None:
        return PolicyThresholds()
    return PolicyThresholds(k=row.k, l=row.l, t=row.t, max_prosecutor_risk=row.max_prosecutor_risk)


def release_policy_update(*, user, team, thresholds: PolicyThresholds) -> ReleasePolicy:
    """A data steward sets the team's thresholds (validated by the core's dataclass)."""
    require_role(user=user, team=team, role=Role.DATA_STEWARD)
    before = thresholds_for(team=team).to_dict()
    with transaction.atomic():
        row, _ = ReleasePolicy.objects.select_for_update().get_or_create(team=team)
        row.k, row.l, row.t = thresholds.k, thresholds.l, thresholds.t
        row.max_prosecutor_risk = thresholds.max_prosecutor_risk
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


def gate_evaluate(
    *,
    dataset,
    source: pd.DataFrame,
    released: pd.DataFrame,
    plan: dict,
    published_report: dict,
    thresholds: PolicyThresholds | None = None,
    conflicts: Sequence[Finding] = (),
) -> PolicyResult:
    """The core policy on a new release of ``dataset``; ``conflicts`` are the gate findings of
    its conflict check (:meth:`anonweb.releases.conflicts.ConflictCheck.gate_findings`)."""
    return evaluate_release(
        source,
        released,
        plan=plan,
        tags=dict(dataset.tags or {}),
        thresholds=thresholds or thresholds_for(team=dataset.team),
        report=published_report,
        conflicts=list(conflicts),
    )
