"""An append-only, hash-chained audit trail.

Each event stores the hash of the previous event and its own HMAC-SHA256 (keyed with a key kept
outside the database) over a canonical encoding of its fields, so editing, deleting or
reordering stored events breaks the chain, a rewrite cannot recompute it without the key, and
``manage.py audit_verify`` names every broken event. The head is also anchored, signed, in an
append-only file outside the database, so cutting the chain's end is detected too.

What is hashed is exactly what the database gives back: the details are stored as their
canonical JSON text (never re-encoded by the database, as jsonb does with numbers), and the
actor and team are kept as ids that no deletion rewrites plus the names they had.
"""

import json

from django.conf import settings
from django.db import models

# Hashing scheme of events written by this code. Scheme 1 (the first version) hashed the
# details as the database returned them and the nullable actor/team ids; scheme 2 hashed the
# canonical payload with SHA-256; scheme 3 takes an HMAC of it with the audit key
# (anonweb/audit/keys.py). Earlier events are still verified as they were written, and no
# unkeyed event may follow a keyed one.
CURRENT_SCHEME = 3
KEYED_SCHEME = 3


class AuditEvent(models.Model):
    # Position in the chain, assigned under the head lock; hashed, so reordering is detected.
    seq = models.BigIntegerField(unique=True)
    scheme = models.PositiveSmallIntegerField(default=CURRENT_SCHEME)
    created_at = models.DateTimeField(db_index=True)
    # Ids kept as they were (no database constraint, nothing nulls them): deleting a user or a
    # team leaves the chain verifiable. The names they had are hashed too.
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    actor_name = models.CharField(max_length=150, blank=True)
    team = models.ForeignKey(
        "accounts.Team",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
    )
    team_name = models.CharField(max_length=120, blank=True)
    action = models.CharField(max_length=64, db_index=True)
    target_type = models.CharField(max_length=64, blank=True)
    target_id = models.CharField(max_length=64, blank=True)
    # Canonical JSON (sorted keys, no whitespace, ASCII escapes): stored and hashed as is.
    details_text = models.TextField(default="{}")
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"#{self.pk} {self.action} {self.target_type}:{self.target_id} by {self.actor_name}"

    @property
    def details(self):
        return json.loads(self.details_text)

    @property
    def details_display(self) -> str:
        """The details for reading: the same JSON with letters instead of escapes."""
        try:
            return json.dumps(self.details, ensure_ascii=False, sort_keys=True)
        except ValueError:
            return self.details_text

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise RuntimeError("audit events are append-only")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise RuntimeError("audit events are append-only")


class AuditHead(models.Model):
    """A single row holding the latest hash; locking it serialises appends to the chain."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    last_hash = models.CharField(max_length=64)
    count = models.BigIntegerField(default=0)
