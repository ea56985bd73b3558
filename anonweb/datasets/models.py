"""Uploaded source tables and their column tags. Raw data lives in the application's storage
(MEDIA_ROOT on disk, or a private bucket), never under a public URL; only privacy officers can
read it through the app."""

import uuid

from django.conf import settings
from django.db import models


class ColumnRole(models.TextChoices):
    IDENTIFIER = "identifier", "Identifier"
    QUASI_IDENTIFIER = "quasi_identifier", "Quasi-identifier"
    SENSITIVE = "sensitive", "Sensitive"
    OTHER = "other", "Other"
    # An explicit decision to release the column verbatim (e.g. reviewed free text); the
    # release gate blocks untagged columns and free text until they are tagged.
    KEEP = "keep", "Keep as is (reviewed)"


# A column no one has tagged yet: not a role (it is absent from ``Dataset.tags``), but how the
# API names that state, so that a client can tell it from "other" and send it back unchanged
# (the release gate blocks an untagged column and lets an "other" one through).
UNTAGGED = "untagged"


class DatasetStatus(models.TextChoices):
    PARSING = "parsing", "Reading the file"
    READY = "ready", "Ready"
    FAILED = "failed", "Could not be read"


class Dataset(models.Model):
    team = models.ForeignKey("accounts.Team", on_delete=models.CASCADE, related_name="datasets")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    uploaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    storage_key = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    original_name = models.CharField(max_length=255)
    file_format = models.CharField(max_length=16)
    size_bytes = models.BigIntegerField()
    # SHA-256 of the raw uploaded file, byte for byte: it recognises the source, so an identical
    # re-upload shares the privacy budget ledger (anonweb.releases.budget) of the first one.
    source_sha256 = models.CharField(max_length=64, db_index=True)
    # An upload is read by a background job: "parsing" until then, "ready" with its rows and
    # columns, or "failed" with a one-line reason (and no data kept).
    status = models.CharField(
        max_length=16, choices=DatasetStatus.choices, default=DatasetStatus.READY, db_index=True
    )
    error = models.TextField(blank=True)
    encoding = models.CharField(max_length=32, blank=True)  # of a text upload, as read
    sheet = models.CharField(max_length=255, blank=True)  # of an Excel upload, as chosen
    # What the reader noticed that may mean the file was read wrongly, with the fix:
    # [{"code": "separator"|"decimal_comma", "message", "columns"}] (anonweb.core.io.misreads).
    read_warnings = models.JSONField(default=list, blank=True)
    rows = models.BigIntegerField(default=0)
    # [{"name", "dtype": "numeric"|"text", "type": "integer"|"float"|"text", "missing", "distinct"}]
    columns = models.JSONField(default=list)
    tags = models.JSONField(default=dict)  # {column: ColumnRole}; a column absent: never tagged
    # Size of the population the rows were sampled from (e.g. the census count of the area):
    # with it, journalist risk and population uniqueness are estimated, not just sample risk.
    population_size = models.PositiveBigIntegerField(null=True, blank=True)
    # Data expiration: the raw table is deleted once this date has passed (releases stay).
    retain_until = models.DateField(null=True, blank=True)
    purged_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["team", "name"], name="unique_dataset_name_per_team")
        ]

    def __str__(self) -> str:
        return self.name

    @property
    def is_ready(self) -> bool:
        return self.status == DatasetStatus.READY

    @property
    def is_purged(self) -> bool:
        return self.purged_at is not None

    @property
    def column_names(self) -> list[str]:
        return [c["name"] for c in self.columns]

    def columns_with(self, role: str) -> list[str]:
        return [c for c in self.column_names if self.tags.get(c) == role]

    @property
    def quasi_identifiers(self) -> list[str]:
        return self.columns_with(ColumnRole.QUASI_IDENTIFIER)

    @property
    def sensitive(self) -> list[str]:
        return self.columns_with(ColumnRole.SENSITIVE)

    @property
    def identifiers(self) -> list[str]:
        return self.columns_with(ColumnRole.IDENTIFIER)


class Hierarchy(models.Model):
    """A generalization hierarchy for one column of a dataset.

    Kept apart from the dataset row: an uploaded table lists every distinct value of its column
    (up to 20 MB), so it is read only where it is used, never with a list of datasets. A plan
    refers to it by digest (``{"uploaded": "<sha256>"}``) instead of carrying a copy, and a
    replaced version stays until the dataset goes, so a queued job still finds the version it
    was planned with.
    """

    dataset = models.ForeignKey(Dataset, on_delete=models.CASCADE, related_name="hierarchy_set")
    column = models.CharField(max_length=300)
    # The plans' own form: {"rows": [[value, level1, ..., "*"], ...]} or a builder spec.
    spec = models.JSONField()
    sha256 = models.CharField(max_length=64)
    levels = models.PositiveIntegerField()
    values = models.PositiveIntegerField(null=True, blank=True)  # rows of an uploaded table
    is_current = models.BooleanField(default=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["column", "-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["dataset", "column"],
                condition=models.Q(is_current=True),
                name="one_current_hierarchy_per_column",
            ),
            models.UniqueConstraint(
                fields=["dataset", "column", "sha256"], name="hierarchy_version_once"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.column} ({self.kind})"

    @property
    def kind(self) -> str:
        return "uploaded" if "rows" in self.spec else str(self.spec.get("builder", "?"))
