"""Immutable, versioned releases. Content never changes after creation; only the review
state moves, and only forward (pending -> approved | rejected)."""

import uuid

from django.conf import settings
from django.db import models


class ReleaseStatus(models.TextChoices):
    PENDING = "pending", "Awaiting approval"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"


class Release(models.Model):
    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="releases")
    dataset = models.ForeignKey(
        "datasets.Dataset", on_delete=models.PROTECT, related_name="releases"
    )
    job = models.OneToOneField(
        "jobs.Job", null=True, on_delete=models.SET_NULL, related_name="release"
    )
    version = models.PositiveIntegerField()
    title = models.CharField(max_length=200)
    kind = models.CharField(max_length=32, default="table")
    storage_key = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    plan = models.JSONField(default=dict)  # public parameters only: never keys or seeds
    report = models.JSONField(default=dict)
    rows = models.BigIntegerField(default=0)
    columns = models.JSONField(default=list)
    sha256 = models.CharField(max_length=64)
    status = models.CharField(
        max_length=16, choices=ReleaseStatus.choices, default=ReleaseStatus.PENDING, db_index=True
    )
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    review_note = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "version"], name="unique_release_version"),
        ]

    def __str__(self) -> str:
        return f"{self.dataset.name} v{self.version}: {self.title}"
