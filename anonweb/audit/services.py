"""Writing to the audit trail. Call inside the transaction of the change being recorded."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from django.db import models, transaction
from django.utils import timezone

from anonweb.audit.keys import anchor_write, keyed_hash
from anonweb.audit.models import CURRENT_SCHEME, KEYED_SCHEME, AuditEvent, AuditHead

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
    from django.db.models import Model

GENESIS = "0" * 64
# Details must never carry secrets. Keys with these words are refused outright so that a
# careless caller fails loudly in tests instead of leaking a key into an immutable log.
FORBIDDEN_KEY_PARTS = ("secret", "password", "token_key", "hmac_key", "seed", "private_key")


class AuditDetailError(ValueError):
    """Audit details that must not be stored (secrets, non-JSON values)."""


def _check_details(value: Any, path: str = "details") -> Any:
    """Refuse secrets and non-JSON values; return the value with every key as text."""
    if isinstance(value, Mapping):
        out = {}
        for key, item in value.items():
            if not isinstance(key, (str, int, float, bool)) and key is not None:
                raise AuditDetailError(f"{path}: key {key!r} is not JSON data")
            name = key if isinstance(key, str) else json.dumps(key)
            lowered = name.lower()
            if any(part in lowered for part in FORBIDDEN_KEY_PARTS):
                raise AuditDetailError(
                    f"{path}.{name}: secrets and seeds never go into the audit trail"
                )
            if name in out:
                raise AuditDetailError(f"{path}: key {name!r} appears twice")
            out[name] = _check_details(item, f"{path}.{name}")
        return out
    if isinstance(value, (list, tuple)):
        return [_check_details(item, f"{path}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, float) and not math.isfinite(value):
        raise AuditDetailError(f"{path}: non-finite number")
    if value is not None and not isinstance(value, (str, int, float, bool)):
        raise AuditDetailError(f"{path}: {type(value).__name__} is not JSON data")
    return value


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, ASCII only: any string (a NUL, an unpaired surrogate) is an
    escape, so both databases store and return the text unchanged."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False
    )


def _text(value: str, limit: int) -> str:
    """A text column's value as the database will return it: no NUL (PostgreSQL refuses it),
    valid UTF-8, at most ``limit`` characters."""
    value = value.replace("\x00", "\ufffd").encode("utf-8", "replace").decode("utf-8")
    return value[:limit]


def _timestamp(event: AuditEvent) -> str:
    return event.created_at.astimezone(dt.UTC).isoformat(timespec="microseconds")


def canonical_payload(event: AuditEvent) -> bytes:
    """The bytes that are hashed, built only from what the database stores and returns."""
    if event.scheme == 1:
        return _payload_scheme_1(event)
    payload = {
        "scheme": event.scheme,
        "seq": event.seq,
        "created_at": _timestamp(event),
        "actor_id": event.actor_id,
        "actor_name": event.actor_name,
        "team_id": event.team_id,
        "team_name": event.team_name,
        "action": event.action,
        "target_type": event.target_type,
        "target_id": event.target_id,
        "details": event.details_text,
        "prev_hash": event.prev_hash,
    }
    return canonical_json(payload).encode("ascii")


def _payload_scheme_1(event: AuditEvent) -> bytes:
    """Events written before scheme 2 are verified the way they were hashed."""
    payload = {
        "seq": event.seq,
        "created_at": _timestamp(event),
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
    """The event's hash: an HMAC with the audit key from scheme 3 on, a SHA-256 before."""
    if event.scheme >= KEYED_SCHEME:
        return keyed_hash(canonical_payload(event))
    return hashlib.sha256(canonical_payload(event)).hexdigest()


def _limit(name: str) -> int:
    """The length limit of one of the event's text fields."""
    field = AuditEvent._meta.get_field(name)
    assert isinstance(field, models.CharField) and field.max_length is not None
    return field.max_length


def audit_record(
    *,
    actor: AbstractBaseUser | AnonymousUser | None,
    action: str,
    target: Any = None,
    team: Model | None = None,
    details: Mapping[str, Any] | None = None,
) -> AuditEvent:
    """Append one event. Joins the caller's transaction, so the event and the change commit
    together or not at all."""
    details_text = canonical_json(_check_details(dict(details or {})))
    with transaction.atomic():
        head, _ = AuditHead.objects.select_for_update().get_or_create(
            id=1, defaults={"last_hash": GENESIS, "count": 0}
        )
        actor_name = getattr(actor, "username", "") or ("system" if actor is None else str(actor))
        event = AuditEvent(
            seq=head.count + 1,
            scheme=CURRENT_SCHEME,
            created_at=timezone.now(),
            actor_id=getattr(actor, "pk", None),
            actor_name=_text(actor_name, _limit("actor_name")),
            team_id=getattr(team, "pk", None),
            team_name=_text(str(team) if team is not None else "", _limit("team_name")),
            action=_text(action, _limit("action")),
            target_type=_text(
                type(target).__name__.lower() if target is not None else "",
                _limit("target_type"),
            ),
            target_id=_text(str(target.pk) if target is not None else "", 64),
            details_text=details_text,
            prev_hash=head.last_hash,
        )
        event.hash = compute_hash(event)
        event.save()
        AuditHead.objects.filter(id=1).update(last_hash=event.hash, count=head.count + 1)
        # The head goes to the anchor once it is committed (a rolled-back event is never
        # anchored, so the anchor is never ahead of the table).
        seq, digest = event.seq, event.hash
        transaction.on_commit(lambda: anchor_write(seq=seq, digest=digest))
    return event
