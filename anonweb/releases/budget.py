"""The privacy budget ledger of a source: one (ε, δ) budget for every release made from it.

**What a source is.** Datasets are recognised by the SHA-256 of their raw file
(``Dataset.source_sha256``): an identical re-upload in the same team shares the ledger of the first
upload, so uploading a file again never yields a fresh budget. Ledgers are per team: a team never
sees another team's releases, and so cannot account for them.

**What is charged.** Every anonymize job whose plan has a privacy cost: the central DP steps'
(ε, δ) from their own privacy maps (``anonweb.jobs.planning.plan_privacy``, computed without data),
and the ε of local-DP steps as well: the server holds the raw table, so a locally randomized copy
is also a release about those people. Local ε is stated per record.

**Composition.** Basic (sequential) composition: ε and δ of all charges add up. It is the loosest
of the valid bounds for many small releases but it holds for any mix of pure and approximate DP
mechanisms, so the figure on the page is a guarantee, not an estimate.

**When a charge counts.** A charge is *reserved* when the job is queued (so two launches cannot
both fit in what remains), becomes *spent* just before the first step with a privacy cost reads
the data, and is *refunded* only if the job ended before that (cancelled while queued, failed
while loading, lost before it ran its plan). Once the mechanisms have drawn their noise the charge
stays, whether the job then fails, is cancelled, or its release is rejected: the noisy output
existed on the server, and rejecting a release does not un-spend it.

**No overspending under concurrency.** A launch reads the ledger and writes its charge in one
transaction that holds the ledger's row lock (PostgreSQL: ``SELECT ... FOR UPDATE``; SQLite: the
transaction is ``BEGIN IMMEDIATE``, which takes the database's write lock before the first read).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from django.db import IntegrityError, transaction
from django.utils import timezone

from anonweb.accounts.models import Role
from anonweb.accounts.selectors import require_role
from anonweb.audit.services import audit_record
from anonweb.core.errors import DataError, ParameterError
from anonweb.datasets.models import Dataset
from anonweb.datasets.selectors import dataset_get_for_user
from anonweb.releases.models import ChargeState, PrivacyCharge, PrivacyLedger

COMPOSITION = "basic"
COMPOSITION_TEXT = (
    "basic composition: the ε and the δ of every release of this source add up "
    "(central DP steps and local-DP releases alike)"
)
# Float sums of exact splits (e.g. three thirds of 2) may exceed the total by a few ulps.
_SLACK = 1e-9


@dataclass(frozen=True)
class Ledger:
    """A read-only view of a source's ledger: the budget, what is spent or reserved, and why."""

    epsilon: float | None
    delta: float | None
    spent_epsilon: float
    spent_delta: float
    reserved_epsilon: float
    reserved_delta: float
    entries: list[dict] = field(default_factory=list)
    source_sha256: str = ""
    datasets: list[dict] = field(default_factory=list)

    @property
    def budget(self) -> float | None:
        """The ε budget (kept for pages written before δ was budgeted)."""
        return self.epsilon

    @property
    def spent(self) -> float:
        """ε that counts against the budget: spent plus reserved."""
        return self.spent_epsilon + self.reserved_epsilon

    @property
    def used_delta(self) -> float:
        return self.spent_delta + self.reserved_delta

    @property
    def remaining(self) -> float | None:
        return None if self.epsilon is None else max(0.0, self.epsilon - self.spent)

    @property
    def remaining_delta(self) -> float | None:
        return None if self.delta is None else max(0.0, self.delta - self.used_delta)

    @property
    def share_used(self) -> float | None:
        return None if not self.epsilon else min(1.0, self.spent / self.epsilon)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (``GET /api/v1/datasets/{id}/budget/``)."""
        return {
            "epsilon": self.epsilon,
            "delta": self.delta,
            "spent": {
                "epsilon": self.spent_epsilon,
                "delta": self.spent_delta,
                "reserved_epsilon": self.reserved_epsilon,
                "reserved_delta": self.reserved_delta,
                "total_epsilon": self.spent,
                "total_delta": self.used_delta,
            },
            "remaining": {"epsilon": self.remaining, "delta": self.remaining_delta},
            "composition": COMPOSITION,
            "source_sha256": self.source_sha256,
            "datasets": list(self.datasets),
            "charges": [
                {**e, "created_at": e["created_at"].isoformat() if e.get("created_at") else None}
                for e in self.entries
            ],
        }


def ledger_row(dataset) -> PrivacyLedger:
    """The ledger of ``dataset``'s source, created on first use (safe under concurrent calls)."""
    key = {"team_id": dataset.team_id, "source_sha256": dataset.source_sha256}
    found = PrivacyLedger.objects.filter(**key).first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            return PrivacyLedger.objects.create(**key)
    except IntegrityError:  # created by a concurrent request in between
        return PrivacyLedger.objects.get(**key)


def _view(row: PrivacyLedger) -> Ledger:
    sums = {(s, k): 0.0 for s in ChargeState.values for k in ("epsilon", "delta")}
    entries = []
    charges = row.charges.select_related("job", "dataset", "job__release").order_by(
        "created_at", "id"
    )
    for c in charges:
        sums[(c.state, "epsilon")] += c.epsilon
        sums[(c.state, "delta")] += c.delta
        release = getattr(c.job, "release", None)
        entries.append(
            {
                "job_id": c.job_id,
                "dataset_id": c.dataset_id,
                "dataset": c.dataset.name,
                "status": c.job.status,
                "state": c.state,
                "epsilon": c.epsilon,
                "delta": c.delta,
                "central_epsilon": float(c.cost.get("epsilon", 0.0)),
                "local_epsilon": float(c.cost.get("local_epsilon", 0.0)),
                "created_at": c.created_at,
                "release_id": getattr(release, "pk", None),
            }
        )
    datasets = [
        {"id": d.pk, "name": d.name}
        for d in Dataset.objects.filter(team_id=row.team_id, source_sha256=row.source_sha256)
        .only("id", "name")
        .order_by("created_at", "id")
    ]
    return Ledger(
        epsilon=row.epsilon,
        delta=row.delta,
        spent_epsilon=sums[(ChargeState.SPENT, "epsilon")],
        spent_delta=sums[(ChargeState.SPENT, "delta")],
        reserved_epsilon=sums[(ChargeState.RESERVED, "epsilon")],
        reserved_delta=sums[(ChargeState.RESERVED, "delta")],
        entries=entries,
        source_sha256=row.source_sha256,
        datasets=datasets,
    )


def ledger_for(dataset) -> Ledger:
    """The ledger of ``dataset``'s source. Callers fetched ``dataset`` through a selector scoped
    to the user (``dataset_get_for_user``), which is the access check."""
    row = PrivacyLedger.objects.filter(
        team_id=dataset.team_id, source_sha256=dataset.source_sha256
    ).first()
    if row is None:
        return Ledger(None, None, 0.0, 0.0, 0.0, 0.0, [], dataset.source_sha256, [])
    return _view(row)


def budget_get_for_user(*, user, dataset_id: int) -> Ledger:
    """Selector: the ledger of a dataset the user can see (404 otherwise)."""

    return ledger_for(dataset_get_for_user(user=user, dataset_id=dataset_id))


def _check_amount(value: Any, *, name: str, upper: float | None = None) -> float | None:
    if value is None or value == "":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise DataError(f"the {name} budget must be a number, not {value!r}") from None
    if not math.isfinite(number) or number <= 0 or (upper is not None and number >= upper):
        bound = f" below {upper:g}" if upper is not None else ""
        raise DataError(f"the {name} budget must be a positive, finite number{bound} (or empty)")
    return number


def _check_not_below_used(
    amount: float | None, *, name: str, spent: float, reserved: float
) -> None:
    """A budget below what the ledger has already used would read as if that privacy loss had
    not happened: refuse it, naming the amount used. (Removing the budget stays possible.)"""
    used = spent + reserved
    if amount is None or amount >= used - _SLACK:
        return
    held = f", of which {reserved:g} is reserved by jobs still running" if reserved else ""
    raise DataError(
        f"the {name} budget cannot be lowered to {amount:g}: this source has already used "
        f"{name} = {used:g}{held}. Set it to at least {used:g}, or remove it to stop further "
        "differentially private releases."
    )


def budget_set(*, user, dataset, epsilon: Any, delta: Any = None) -> Ledger:
    """A data steward sets the (ε, δ) budget of the dataset's source. A budget below what the
    ledger has already spent or reserved is refused with the amount used; removing the budget
    (it stops further DP releases) is allowed."""
    require_role(user=user, team=dataset.team, role=Role.DATA_STEWARD)
    eps = _check_amount(epsilon, name="ε")
    dlt = _check_amount(delta, name="δ", upper=1.0)
    row = ledger_row(dataset)
    with transaction.atomic():
        locked = PrivacyLedger.objects.select_for_update().get(pk=row.pk)
        before = _view(locked)  # read under the lock: no launch can charge in between
        _check_not_below_used(
            eps, name="ε", spent=before.spent_epsilon, reserved=before.reserved_epsilon
        )
        _check_not_below_used(
            dlt, name="δ", spent=before.spent_delta, reserved=before.reserved_delta
        )
        previous = {"epsilon": locked.epsilon, "delta": locked.delta}
        locked.epsilon, locked.delta = eps, dlt
        locked.save(update_fields=["epsilon", "delta", "updated_at"])
        view = _view(locked)
        audit_record(
            actor=user,
            team=dataset.team,
            action="dataset.budget_set",
            target=dataset,
            details={
                "epsilon": eps,
                "delta": dlt,
                "previous": previous,
                "ledger_id": locked.pk,
                "spent_epsilon": view.spent,
                "spent_delta": view.used_delta,
                "composition": COMPOSITION,
            },
        )
    return view


def charged_amounts(cost: dict) -> tuple[float, float]:
    """(ε, δ) a plan's cost charges to the ledger: central ε plus local ε (per record), and δ."""
    epsilon = float(cost.get("epsilon", 0.0)) + float(cost.get("local_epsilon", 0.0))
    return epsilon, float(cost.get("delta", 0.0))


def _fits(spent: float, cost: float, budget: float) -> bool:
    return spent + cost <= budget * (1 + _SLACK) + _SLACK * 1e-3


def check_budget(ledger: Ledger, cost: dict, *, name: str = "this source") -> None:
    """Raise :class:`ParameterError` when ``cost`` does not fit what remains of the budget."""
    epsilon, delta = charged_amounts(cost)
    if epsilon <= 0 and delta <= 0:
        return
    what = f"ε = {epsilon:g}" + (f", δ = {delta:g}" if delta else "")
    if ledger.epsilon is None:
        raise ParameterError(
            f"this plan spends {what}, but no privacy budget is set for {name}: "
            "a data steward sets one on the dataset page"
        )
    if not _fits(ledger.spent, epsilon, ledger.epsilon):
        raise ParameterError(
            f"this plan spends ε = {epsilon:g}, but only ε = {ledger.remaining:g} of the budget "
            f"ε = {ledger.epsilon:g} remains ({ledger.spent:g} already spent or reserved on this "
            "source)"
        )
    if delta > 0:
        if not ledger.delta:
            raise ParameterError(
                f"this plan spends δ = {delta:g}, but the budget of {name} allows no δ: a data "
                "steward sets a δ budget on the dataset page (or declare the categories, which "
                "needs no δ)"
            )
        if not _fits(ledger.used_delta, delta, ledger.delta):
            raise ParameterError(
                f"this plan spends δ = {delta:g}, but only δ = {ledger.remaining_delta:g} of the "
                f"budget δ = {ledger.delta:g} remains ({ledger.used_delta:g} already spent or "
                "reserved on this source)"
            )


def charge_reserve(*, dataset, job, cost: dict) -> PrivacyCharge | None:
    """Reserve ``cost`` for ``job``. Call inside the launch's transaction, after
    :func:`ledger_lock` and :func:`check_budget`, so nothing runs between the check and the write."""
    epsilon, delta = charged_amounts(cost)
    if epsilon <= 0 and delta <= 0:
        return None
    row = PrivacyLedger.objects.get(team_id=dataset.team_id, source_sha256=dataset.source_sha256)
    return PrivacyCharge.objects.create(
        ledger=row,
        job=job,
        dataset=dataset,
        epsilon=epsilon,
        delta=delta,
        cost={k: float(v) for k, v in cost.items()},
    )


def ledger_lock(dataset) -> Ledger:
    """Inside a transaction: lock the source's ledger row and read it. On PostgreSQL this is a
    row lock held to the end of the transaction; on SQLite the transaction already holds the
    database's write lock (``transaction_mode = IMMEDIATE`` in the settings)."""
    row = ledger_row(dataset)
    locked = PrivacyLedger.objects.select_for_update().get(pk=row.pk)
    return _view(locked)


def charge_spend(*, job_id: int) -> bool:
    """Mark the job's reservation as spent, just before its mechanisms read the data.

    False when the reservation is gone (refunded because the job was failed or cancelled in the
    meantime): the caller must then not run the mechanisms. True when there is nothing to charge.
    """
    updated = PrivacyCharge.objects.filter(job_id=job_id, state=ChargeState.RESERVED).update(
        state=ChargeState.SPENT, spent_at=timezone.now()
    )
    if updated:
        return True
    return not PrivacyCharge.objects.filter(job_id=job_id, state=ChargeState.REFUNDED).exists()


def charge_refund_unspent(*, job_id: int) -> bool:
    """Refund the job's charge if its mechanisms never ran; a spent charge stays."""
    return bool(
        PrivacyCharge.objects.filter(job_id=job_id, state=ChargeState.RESERVED).update(
            state=ChargeState.REFUNDED, refunded_at=timezone.now()
        )
    )
