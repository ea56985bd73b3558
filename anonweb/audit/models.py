"""An append-only, hash-chained audit trail.

Each event stores the hash of the previous event and its own SHA-256 over a canonical JSON
encoding of its fields, so editing or deleting a stored event breaks the chain and
``manage.py audit_verify`` names the first broken event.
"""

from django.conf import settings
from django.db import models


class AuditEvent(models.Model):
    # Position in the chain, assigned under the head lock; hashed, so reordering is detected.
    seq = models.BigIntegerField(unique=True)
    created_at = models.DateTimeField(db_index=True)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Kept as text so the chain still verifies after a user is deleted.
    actor_name = models.CharField(max_length=150, blank=True)
    team = models.ForeignKey(
        "accounts.Team", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    action = models.CharField(max_length=64, db_index=True)
    target_type = models.CharField(max_length=64, blank=True)
    target_id = models.CharField(max_length=64, blank=True)
    details = models.JSONField(default=dict)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64, unique=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"#{self.pk} {self.action} {self.target_type}:{self.target_id} by {self.actor_name}"

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
