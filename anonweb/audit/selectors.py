"""Reading and verifying the audit trail."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Q, QuerySet

from anonweb.accounts.selectors import teams_for_user
from anonweb.audit.models import AuditEvent, AuditHead
from anonweb.audit.services import GENESIS, compute_hash


def audit_events_for_user(*, user, action: str = "", actor: str = "", target: str = "") -> QuerySet:
    qs = AuditEvent.objects.select_related("team")
    if not user.is_superuser:
        qs = qs.filter(Q(team__in=teams_for_user(user=user)) | Q(team__isnull=True, actor=user))
    if action:
        qs = qs.filter(action=action)
    if actor:
        qs = qs.filter(actor_name=actor)
    if target:
        kind, _, ident = target.partition(":")
        qs = qs.filter(target_type=kind, **({"target_id": ident} if ident else {}))
    return qs.order_by("-id")


@dataclass(frozen=True)
class ChainReport:
    ok: bool
    checked: int
    broken_id: int | None = None
    reason: str = ""


def audit_verify_chain(*, batch: int = 2000) -> ChainReport:
    """Walk the whole chain in id order; stop at the first event whose hash or link is wrong."""
    prev = GENESIS
    checked = 0
    last_seq = 0
    while True:
        events = list(AuditEvent.objects.filter(seq__gt=last_seq).order_by("seq")[:batch])
        if not events:
            break
        for event in events:
            if event.seq != checked + 1:
                return ChainReport(
                    False,
                    checked,
                    event.pk,
                    f"sequence number {event.seq} where {checked + 1} was expected (an event was removed)",
                )
            if event.prev_hash != prev:
                return ChainReport(
                    False,
                    checked,
                    event.pk,
                    "its previous-hash link does not match the event before it (an event was removed or reordered)",
                )
            if compute_hash(event) != event.hash:
                return ChainReport(
                    False, checked, event.pk, "its content does not match its hash (it was edited)"
                )
            prev = event.hash
            checked += 1
            last_seq = event.seq
    head = AuditHead.objects.filter(id=1).first()
    if head is not None and (head.last_hash != prev or head.count != checked):
        return ChainReport(
            False,
            checked,
            None,
            "the chain ends before the recorded head (the latest events were removed)",
        )
    return ChainReport(True, checked)
