"""Writing to the audit trail. Call inside the transaction of the change being recorded."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.utils import timezone

from anonweb.audit.models import AuditEvent, AuditHead

GENESIS = "0" * 64
# Details must never carry secrets. Keys with these words are refused outright so that a
# careless caller fails loudly in tests instead of leaking a key into an immutable log.
FORBIDDEN_KEY_PARTS = ("secret", "password", "token_key", "hmac_key", "seed", "private_key")


class AuditDetailError(ValueError):
    """Audit details that must not be stored (secrets, non-JSON values)."""


def _check_details(value: Any, path: str = "details") -> None:
    if isinstance(value, Mapping):
        for key, item in value.items():
            lowered = str(key).lower()
            if any(part in lowered for part in FORBIDDEN_KEY_PARTS):
                raise AuditDetailError(
                    f"{path}.{key}: secrets and seeds never go into the audit trail"
                )
            _check_details(item, f"{path}.{key}")
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _check_details(item, f"{path}[{i}]")
    elif isinstance(value, float) and not math.isfinite(value):
        raise AuditDetailError(f"{path}: non-finite number")
    elif value is not None and not isinstance(value, (str, int, float, bool)):
        raise AuditDetailError(f"{path}: {type(value).__name__} is not JSON data")


def canonical_payload(event: AuditEvent) -> bytes:
    """The bytes that are hashed: sorted keys, no whitespace, UTC timestamp in microseconds."""
    payload = {
        "seq": event.seq,
        "created_at": event.created_at.astimezone(dt.UTC).isoformat(timespec="microseconds"),
        "actor_id": event.actor_id,
        "actor_name": event.actor_name,
        "team_id": event.team_id,
        "action": event.action,
        "target_type": event.target_type,
        "target_id": event.target_id,
        "details": event.details,
        "prev_hash": event.prev_hash,
    }
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def compute_hash(event: AuditEvent) -> str:
    return hashlib.sha256(canonical_payload(event)).hexdigest()


def audit_record(
    *,
    actor,
    action: str,
    target: Any = None,
    team=None,
    details: Mapping[str, Any] | None = None,
) -> AuditEvent:
    """Append one event. Joins the caller's transaction, so the event and the change commit
    together or not at all."""
    details = dict(details or {})
    _check_details(details)
    # Round-trip through JSON so the stored value and the hashed value are the same.
    details = json.loads(json.dumps(details, sort_keys=True))
    with transaction.atomic():
        head, _ = AuditHead.objects.select_for_update().get_or_create(
            id=1, defaults={"last_hash": GENESIS, "count": 0}
        )
        event = AuditEvent(
            seq=head.count + 1,
            created_at=timezone.now(),
            actor=actor if getattr(actor, "pk", None) else None,
            actor_name=getattr(actor, "username", "")
            or ("system" if actor is None else str(actor)),
            team=team,
            action=action,
            target_type=type(target).__name__.lower() if target is not None else "",
            target_id=str(target.pk) if target is not None else "",
            details=details,
            prev_hash=head.last_hash,
        )
        event.hash = compute_hash(event)
        event.save()
        AuditHead.objects.filter(id=1).update(last_hash=event.hash, count=head.count + 1)
    return event
