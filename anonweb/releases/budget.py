"""The privacy budget ledger of a source dataset.

Every anonymize job that runs differential-privacy steps records its cost (from the steps' own
privacy maps, computed without data) in ``job.params["privacy_cost"]``. A job counts against the
budget from the moment it is queued, so two launches cannot race past the limit, and it keeps
counting once it has touched the data, whether or not its release is later approved: rejecting a
release does not un-spend what the mechanism already used. Only jobs that never started (cancelled
while queued, or never sent) are not charged.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q

from anonweb.core.errors import ParameterError
from anonweb.jobs.models import Job, JobKind, JobStatus


@dataclass(frozen=True)
class Ledger:
    budget: float | None
    spent: float
    entries: list[dict]

    @property
    def remaining(self) -> float | None:
        return None if self.budget is None else max(0.0, self.budget - self.spent)

    @property
    def share_used(self) -> float | None:
        return None if not self.budget else min(1.0, self.spent / self.budget)


def _charged_jobs(dataset):
    charged = Q(status__in=[JobStatus.QUEUED, JobStatus.RUNNING, JobStatus.SUCCEEDED]) | Q(
        status=JobStatus.FAILED, started_at__isnull=False
    )
    return Job.objects.filter(charged, dataset=dataset, kind=JobKind.ANONYMIZE).order_by(
        "created_at", "id"
    )


def ledger_for(dataset) -> Ledger:
    entries, spent = [], 0.0
    for job in _charged_jobs(dataset):
        cost = (job.params or {}).get("privacy_cost") or {}
        epsilon = float(cost.get("epsilon", 0.0))
        if epsilon <= 0:
            continue
        spent += epsilon
        entries.append(
            {
                "job_id": job.pk,
                "status": job.status,
                "epsilon": epsilon,
                "delta": float(cost.get("delta", 0.0)),
                "created_at": job.created_at,
                "release_id": getattr(getattr(job, "release", None), "pk", None),
            }
        )
    return Ledger(dataset.epsilon_budget, spent, entries)


def check_budget(dataset, cost: dict) -> None:
    """Raise ParameterError when a plan's central epsilon does not fit the remaining budget."""
    epsilon = float(cost.get("epsilon", 0.0))
    if epsilon <= 0:
        return
    ledger = ledger_for(dataset)
    if ledger.budget is None:
        raise ParameterError(
            f"this plan spends ε = {epsilon:g}, but no privacy budget is set for {dataset.name}: "
            "a data steward sets one on the dataset page"
        )
    if ledger.spent + epsilon > ledger.budget + 1e-12:
        raise ParameterError(
            f"this plan spends ε = {epsilon:g}, but only ε = {ledger.remaining:g} of the budget "
            f"ε = {ledger.budget:g} remains ({ledger.spent:g} already spent on this source)"
        )
