"""Verifying the audit trail. Which events a user may read is
:mod:`anonweb.releases.audit_access` (it depends on teams and releases, which sit above)."""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from anonweb.audit.keys import Anchor, anchor_path, anchors_read
from anonweb.audit.models import KEYED_SCHEME, AuditEvent, AuditHead
from anonweb.audit.services import GENESIS, compute_hash


@dataclass(frozen=True)
class ChainProblem:
    """One broken place in the chain: an event (None for the chain's end) and why."""

    event_id: int | None
    seq: int | None
    reason: str

    def describe(self) -> str:
        where = f"event #{self.event_id} (seq {self.seq})" if self.event_id else "the chain's end"
        return f"{where}: {self.reason}"


@dataclass(frozen=True)
class ChainReport:
    ok: bool
    checked: int
    problems: tuple[ChainProblem, ...] = ()

    @property
    def broken_ids(self) -> list[int]:
        return [p.event_id for p in self.problems if p.event_id is not None]

    @property
    def broken_id(self) -> int | None:
        """The first broken event (None when only the chain's end is wrong)."""
        return self.problems[0].event_id if self.problems else None

    @property
    def reason(self) -> str:
        return "; ".join(p.describe() for p in self.problems)


def _event_problems(event: AuditEvent, *, expected_seq: int, prev: AuditEvent | None) -> list[str]:
    reasons = []
    if prev is not None and prev.scheme >= KEYED_SCHEME and event.scheme < KEYED_SCHEME:
        reasons.append(
            f"it claims the unkeyed scheme {event.scheme} after the chain was keyed: it was "
            "rewritten by someone without the audit key"
        )
    if event.seq != expected_seq:
        if event.seq > expected_seq:
            missing = event.seq - expected_seq
            reasons.append(
                f"{missing} event(s) before it are missing (sequence {expected_seq} to "
                f"{event.seq - 1}): removed"
            )
        else:
            reasons.append(f"sequence number {event.seq} where {expected_seq} was expected")
    if event.prev_hash != (prev.hash if prev is not None else GENESIS):
        before = f"event #{prev.pk}" if prev is not None else "the chain's origin"
        reasons.append(
            f"its previous-hash link does not match {before}: events between them were "
            "removed or reordered, or the one before it was rewritten with a new hash"
        )
    try:
        intact = compute_hash(event) == event.hash
    except (TypeError, ValueError, OverflowError):
        intact = False
    if not intact:
        reasons.append("its content does not match its hash (it was edited)")
    return reasons


def audit_verify_chain(*, batch: int = 2000) -> ChainReport:
    """Walk the whole chain in sequence order and report every broken event, not only the
    first: after a break the walk carries on from the stored hash, so each later edit,
    removal or reordering is named too. Then check the table against the anchored heads: each
    must be in it with the hash anchored, and the table may not end before the last one."""
    anchors, problems_of_anchor = anchors_read()
    anchored = {a.seq: a for a in anchors}
    problems: list[ChainProblem] = [ChainProblem(None, None, p) for p in problems_of_anchor]
    prev: AuditEvent | None = None
    expected_seq = 1
    checked = 0
    last_seq = None
    while True:
        rows = AuditEvent.objects.order_by("seq")
        if last_seq is not None:
            rows = rows.filter(seq__gt=last_seq)
        events = list(rows[:batch])
        if not events:
            break
        for event in events:
            reasons = _event_problems(event, expected_seq=expected_seq, prev=prev)
            anchor = anchored.pop(event.seq, None)
            if anchor is not None and anchor.hash != event.hash:
                reasons.append(
                    f"its hash is not the one anchored for sequence {event.seq} at {anchor.at}: "
                    "the chain was rewritten from here on"
                )
            if reasons:
                problems.append(ChainProblem(event.pk, event.seq, "; ".join(reasons)))
            prev, expected_seq, last_seq = event, event.seq + 1, event.seq
            checked += 1
    problems.extend(_end_problems(prev, expected_seq - 1, anchored, anchors, checked))
    return ChainReport(not problems, checked, tuple(problems))


def _end_problems(
    last: AuditEvent | None,
    last_seq: int,
    unmatched: dict[int, Anchor],
    anchors: list[Anchor],
    checked: int,
) -> list[ChainProblem]:
    problems = []
    head = AuditHead.objects.filter(id=1).first()
    last_hash = last.hash if last is not None else GENESIS
    if head is not None and (head.last_hash != last_hash or head.count != last_seq):
        problems.append(
            ChainProblem(
                None,
                None,
                f"the chain ends at sequence {last_seq} but the head records "
                f"{head.count} events (the latest events were removed or rewritten)",
            )
        )
    if unmatched:
        latest = max(unmatched.values(), key=lambda a: a.seq)
        problems.append(
            ChainProblem(
                None,
                None,
                f"sequence {latest.seq} was anchored at {latest.at} but the table "
                + (
                    f"ends at sequence {last_seq}: the latest events were removed"
                    if latest.seq > last_seq
                    else "has no event with it: events were removed and renumbered"
                ),
            )
        )
    keyed = last is not None and last.scheme >= KEYED_SCHEME
    if keyed and not anchors and not settings.ANONWEB_AUDIT_ANCHOR_MAY_BE_ABSENT:
        problems.append(
            ChainProblem(
                None,
                None,
                f"no signed head is anchored in {anchor_path()}, though {checked} events are "
                "stored: the anchor was removed, or is not the one this site writes "
                "(ANONWEB_AUDIT_ANCHOR)",
            )
        )
    return problems
