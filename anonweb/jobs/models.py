"""The Job row is the truth about background work (not Celery's result backend)."""

from django.conf import settings
from django.db import models


class JobStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


TERMINAL = (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.CANCELLED)


class JobKind(models.TextChoices):
    PARSE = "parse", "Read the uploaded file"
    PROFILE = "profile", "Profile and risk assessment"
    ANONYMIZE = "anonymize", "Anonymize (release plan)"
    DEMO_SLEEP = "demo_sleep", "Queue check (waits a few seconds)"
    HIERARCHY = "hierarchy", "Read an uploaded hierarchy"
    ATTACK = "attack", "Attack a release again"
    UTILITY = "utility", "Measure a release's utility"


class Job(models.Model):
    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="jobs")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    dataset = models.ForeignKey(
        "datasets.Dataset", null=True, blank=True, on_delete=models.CASCADE, related_name="jobs"
    )
    kind = models.CharField(max_length=32, choices=JobKind.choices)
    params = models.JSONField(default=dict, blank=True)
    status = models.CharField(
        max_length=16, choices=JobStatus.choices, default=JobStatus.QUEUED, db_index=True
    )
    progress = models.PositiveSmallIntegerField(default=0)
    message = models.CharField(max_length=300, blank=True)
    # Why it failed, built from facts (the kind of failure, the columns concerned): every
    # reader of the job sees it. ``error_detail`` is the message as written, which may quote
    # the source: privacy officers only, and a purge removes it.
    error = models.TextField(blank=True)
    error_detail = models.TextField(blank=True)
    result = models.JSONField(default=dict, blank=True)
    cancel_requested = models.BooleanField(default=False)
    attempts = models.PositiveSmallIntegerField(default=0)
    worker = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    # When the task was last sent to the queue (a queued job no worker took is sent again).
    sent_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"Job #{self.pk} {self.kind} ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL

    @property
    def duration_seconds(self) -> float | None:
        if self.started_at and self.finished_at:
            return (self.finished_at - self.started_at).total_seconds()
        return None
