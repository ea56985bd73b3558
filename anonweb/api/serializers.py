"""Request bodies (validated, and documented in the schema) and the JSON form of each object.

The ``*_json`` functions are the only place an object's API form is written, so a list and a
detail never differ."""

from __future__ import annotations

from rest_framework import serializers

from anonweb.core.errors import ParameterError
from anonweb.core.io.export import DOWNLOAD_FORMATS, download_format
from anonweb.core.io.sources import separator_problem
from anonweb.datasets.models import UNTAGGED, ColumnRole
from anonweb.datasets.selectors import dataset_error_for, hierarchies_for
from anonweb.jobs.models import JobStatus
from anonweb.jobs.selectors import job_error_for
from anonweb.releases.links import LINK_HOURS_DEFAULT, LINK_HOURS_MAX
from anonweb.releases.models import Release

# ---- requests ---------------------------------------------------------------------------------


class UploadRequest(serializers.Serializer):
    file = serializers.FileField(help_text="CSV/TSV, Excel (.xlsx) or Parquet")
    name = serializers.CharField(max_length=200)
    sep = serializers.CharField(
        required=False, allow_blank=True, max_length=4, help_text="field separator"
    )
    decimal = serializers.ChoiceField(
        choices=[".", ","],
        required=False,
        allow_blank=True,
        help_text='decimal mark of a text file: "." (default) or ","',
    )
    sheet = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=255,
        help_text="the sheet of an Excel workbook to read; needed when it has several",
    )
    description = serializers.CharField(required=False, allow_blank=True, default="")
    team = serializers.CharField(
        required=False,
        allow_blank=True,
        help_text="team slug or id; needed only when you are a privacy officer in several teams",
    )

    def validate_sep(self, value: str) -> str:
        problem = separator_problem(value) if value else None
        if problem:
            raise serializers.ValidationError(problem)
        return value


class RolesRequest(serializers.Serializer):
    roles = serializers.DictField(
        child=serializers.ChoiceField(choices=[*ColumnRole.values, UNTAGGED]),
        help_text='{"COLUMN": "identifier"|"quasi_identifier"|"sensitive"|"other"|"keep"|'
        '"untagged"}; "untagged" leaves the column (or makes it) untagged, which the release '
        "gate blocks",
    )


class HierarchyRequest(serializers.Serializer):
    """A hierarchy in the plans' own form: rows, or a builder spec (its own fields pass through)."""

    rows = serializers.ListField(
        child=serializers.ListField(child=serializers.JSONField()),
        required=False,
        help_text='[[value, level1, ..., "*"], ...]',
    )
    builder = serializers.CharField(
        required=False, help_text='"interval", "mask", "date", ... with the builder\'s parameters'
    )


class WhatIfRequest(serializers.Serializer):
    """One lattice node: a level per quasi-identifier (missing ones stay at 0) and a limit."""

    levels = serializers.DictField(
        child=serializers.IntegerField(min_value=0),
        required=False,
        help_text="quasi-identifier -> hierarchy level (0 keeps the value)",
    )
    suppression = serializers.FloatField(
        required=False,
        min_value=0,
        help_text="largest fraction of rows that may be suppressed, in [0, 1)",
    )
    k = serializers.IntegerField(
        required=False,
        min_value=1,
        help_text="suppress the classes below k (if they fit the limit) instead of the smallest",
    )


class AssessmentRequest(serializers.Serializer):
    weights = serializers.CharField(
        required=False, allow_null=True, help_text="survey-weight column (individual risk)"
    )
    household = serializers.CharField(
        required=False, allow_null=True, help_text="household-id column (household risk)"
    )
    suda2 = serializers.BooleanField(
        required=False, default=False, help_text="minimal sample uniques and SUDA scores"
    )
    suda2_max_size = serializers.IntegerField(
        required=False, allow_null=True, help_text="largest MSU searched (1 to 10, default 3)"
    )


class ReleaseRequest(serializers.Serializer):
    title = serializers.CharField(max_length=200)
    purpose = serializers.CharField(required=False, allow_blank=True, default="")
    recipient = serializers.CharField(required=False, allow_blank=True, default="")
    recipients = serializers.ListField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False),
        required=False,
        allow_null=True,
        default=None,
        help_text='who receives the release: ["USERNAME", "group:NAME", ...], analysts and '
        "groups of the team; absent or empty: every analyst of the team",
    )
    plan = serializers.JSONField(help_text='a release plan: {"steps": [...], ...}')


class LinkRequest(serializers.Serializer):
    recipient = serializers.CharField(max_length=200, help_text="whom the link is for (audited)")
    format = serializers.CharField(
        default="csv", help_text=f"an export format: {', '.join(DOWNLOAD_FORMATS)}"
    )

    def validate_format(self, value: str) -> str:
        # the export formats as they stand now (a format may be added after this module loads)
        try:
            return download_format(value)
        except ParameterError as exc:
            raise serializers.ValidationError(str(exc)) from None

    hours = serializers.IntegerField(
        min_value=1, max_value=LINK_HOURS_MAX, default=LINK_HOURS_DEFAULT, help_text="validity"
    )


class ReviewRequest(serializers.Serializer):
    decision = serializers.ChoiceField(choices=["approve", "reject"])
    note = serializers.CharField(required=False, allow_blank=True, default="")
    override = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="justification for approving despite blocking findings",
    )
    gate_version = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        help_text="the `version` of the gate/ answer the justification was written for: an "
        "override for findings that have changed since is refused (409)",
    )


class BudgetRequest(serializers.Serializer):
    epsilon = serializers.FloatField(allow_null=True)
    delta = serializers.FloatField(required=False, allow_null=True, default=None)


# ---- responses ----------------------------------------------------------------------------------


class AcceptedUpload(serializers.Serializer):
    id = serializers.IntegerField()
    job = serializers.IntegerField()


class AcceptedJob(serializers.Serializer):
    job = serializers.IntegerField()


class ColumnOut(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.CharField()
    role = serializers.ChoiceField(
        choices=[*ColumnRole.values, UNTAGGED],
        help_text='"untagged": never tagged (the release gate blocks it), unlike "other"',
    )


class DatasetOut(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    team = serializers.CharField()
    status = serializers.ChoiceField(choices=["parsing", "ready", "failed"])
    error = serializers.CharField()
    rows = serializers.IntegerField()
    columns = ColumnOut(many=True)
    hierarchies = serializers.DictField(child=serializers.DictField())
    population_size = serializers.IntegerField(allow_null=True)
    purged = serializers.BooleanField()
    created_at = serializers.DateTimeField()


class JobOut(serializers.Serializer):
    id = serializers.IntegerField()
    kind = serializers.CharField()
    status = serializers.ChoiceField(choices=JobStatus.values)
    progress = serializers.IntegerField()
    message = serializers.CharField()
    error = serializers.CharField(
        help_text="why it failed: the message as written (it may quote the data) for the team's "
        "privacy officers until a purge, else the kind of failure and the columns concerned"
    )
    dataset = serializers.IntegerField(allow_null=True)
    release = serializers.IntegerField(allow_null=True)


class AuditEventOut(serializers.Serializer):
    id = serializers.IntegerField()
    seq = serializers.IntegerField()
    at = serializers.DateTimeField()
    actor = serializers.CharField()
    team = serializers.CharField()
    action = serializers.CharField(help_text="e.g. release.approved")
    target = serializers.CharField(help_text='"TYPE:ID", e.g. "dataset:7", or ""')
    details = serializers.DictField()
    hash = serializers.CharField()


class ErrorOut(serializers.Serializer):
    error = serializers.CharField()


class ErrorsOut(serializers.Serializer):
    # the response's key is "errors", the name Serializer gives its validation errors
    errors = serializers.ListField(child=serializers.CharField())  # type: ignore[assignment]


class TokenOut(serializers.Serializer):
    token = serializers.CharField()


# ---- object forms -----------------------------------------------------------------------------


def dataset_json(dataset, *, officer_teams: frozenset[int]) -> dict:
    """A dataset as its reader may see it (``officer_teams``: see :func:`job_json`)."""
    hierarchies = hierarchies_for(dataset=dataset) if dataset.is_ready else {}
    return {
        "id": dataset.pk,
        "name": dataset.name,
        "team": dataset.team.slug,
        "status": dataset.status,
        "error": dataset_error_for(dataset=dataset, officer_teams=officer_teams),
        "rows": dataset.rows,
        "columns": [
            {
                "name": c["name"],
                "type": c.get("type") or c.get("dtype") or "text",
                "role": dataset.tags.get(c["name"]) or UNTAGGED,
            }
            for c in dataset.columns
        ],
        "hierarchies": {
            col: {"kind": h.kind, "levels": h.levels, "values": h.values, "sha256": h.sha256}
            for col, h in hierarchies.items()
        },
        "population_size": dataset.population_size,
        "sheet": dataset.sheet or None,
        "warnings": list(dataset.read_warnings),
        "purged": dataset.is_purged,
        "created_at": dataset.created_at.isoformat(),
    }


def job_json(job, *, officer_teams: frozenset[int]) -> dict:
    """A job as its reader may see it: ``officer_teams`` are the teams whose raw values the
    reader may see (:func:`~anonweb.accounts.selectors.raw_value_teams`)."""
    # the job's release (one to one): read with the job when the selector joined it
    try:
        release_id = job.release.pk
    except Release.DoesNotExist:
        release_id = None
    return {
        "id": job.pk,
        "kind": job.kind,
        "status": job.status,
        "progress": job.progress,
        "message": job.message,
        "error": job_error_for(job=job, officer_teams=officer_teams),
        "dataset": job.dataset_id,
        "release": release_id,
    }


def audit_json(event) -> dict:
    return {
        "id": event.pk,
        "seq": event.seq,
        "at": event.created_at.isoformat(),
        "actor": event.actor_name,
        "team": event.team_name,
        "action": event.action,
        "target": f"{event.target_type}:{event.target_id}" if event.target_type else "",
        "details": event.details,
        "hash": event.hash,
    }
