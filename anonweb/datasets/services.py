"""Dataset use cases: tag columns, hierarchies, profile, budget, retention, purge. Each write is
one transaction with its audit event. Uploading lives in :mod:`anonweb.datasets.ingest` and is
importable from here."""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

import pandas as pd
from django.db import transaction

from anonweb.accounts.models import Role
from anonweb.accounts.selectors import require_role, user_has_role
from anonweb.audit.services import audit_record
from anonweb.core.assessment.charts import homogeneity_histogram
from anonweb.core.assessment.profile import assess_risk
from anonweb.core.assessment.survey import survey_risk
from anonweb.core.errors import DataError, ParameterError
from anonweb.core.io.hierarchy import Hierarchy as CoreHierarchy
from anonweb.core.io.hierarchy import parse_hierarchy
from anonweb.core.io.hierarchy_builders import build_hierarchy

# Uploading (streamed to disk, read by a background job): importable from here, as every use case.
from anonweb.datasets.ingest import (
    UnsupportedFileType,
    UploadTooLarge,
    dataset_create,
    dataset_discard,
    dataset_parse,
    dataset_parse_failed,
    dataset_store,
)
from anonweb.datasets.models import UNTAGGED, ColumnRole, Dataset, DatasetStatus, Hierarchy
from anonweb.datasets.storage import load_distinct, load_frame

if TYPE_CHECKING:
    from collections.abc import Callable
    from datetime import date

    from django.contrib.auth.models import User
    from django.core.files.uploadedfile import UploadedFile


def describe_columns(df: pd.DataFrame) -> list[dict]:
    return [
        {
            "name": str(c),
            "dtype": "numeric" if pd.api.types.is_numeric_dtype(df[c]) else "text",
            "missing": int(df[c].isna().sum()),
            "distinct": int(df[c].nunique(dropna=True)),
        }
        for c in df.columns
    ]


class DatasetNotReady(DataError):
    """The dataset's upload is still being read, or could not be (the API answers 409)."""


def require_ready(dataset: Dataset) -> None:
    """Refuse to work on a dataset whose upload is still being read, or could not be."""
    if dataset.status == DatasetStatus.PARSING:
        raise DatasetNotReady(f"{dataset.name} is still being read; wait until it is ready")
    if dataset.status == DatasetStatus.FAILED:
        raise DatasetNotReady(f"{dataset.name} could not be read: {dataset.error}")


def dataset_set_tags(*, user: User, dataset: Dataset, tags: dict[str, str]) -> Dataset:
    require_role(user=user, team=dataset.team, role=Role.PRIVACY_OFFICER)
    require_ready(dataset)
    unknown = sorted(set(tags) - set(dataset.column_names))
    if unknown:
        raise DataError(f"unknown column(s): {', '.join(unknown)}")
    bad = sorted({r for r in tags.values() if r and r not in (*ColumnRole.values, UNTAGGED)})
    if bad:
        raise DataError(
            f"unknown role(s): {', '.join(bad)}; use {', '.join(ColumnRole.values)} or {UNTAGGED}"
        )
    # "" or "untagged" (or a column absent from both) leaves the column untagged
    tags = {c: "" if r == UNTAGGED else r for c, r in tags.items()}
    merged = {c: tags.get(c, dataset.tags.get(c)) for c in dataset.column_names}
    new_tags = {c: r for c, r in merged.items() if r}
    changed = {
        c: new_tags.get(c, "")
        for c in dataset.column_names
        if (dataset.tags.get(c) or "") != new_tags.get(c, "")
    }
    with transaction.atomic():
        Dataset.objects.filter(pk=dataset.pk).update(tags=new_tags)
        audit_record(
            actor=user,
            team=dataset.team,
            action="dataset.tagged",
            target=dataset,
            details={"changed": changed},
        )
    dataset.tags = new_tags
    return dataset


def survey_params(*, dataset: Dataset, params: dict) -> dict:
    """The survey-risk parameters of a profile job, checked against the dataset's columns:
    ``weights`` and ``household`` (column names or absent), ``suda2`` (bool) and
    ``suda2_max_size`` (1 to 10), ``risk_method`` ("approx", sdcMicro's default, or "exact"; kept
    only when it is "exact"). Raises ParameterError with a sentence for the officer."""
    out: dict = {}
    for key, what in (("weights", "survey-weight"), ("household", "household-id")):
        col = params.get(key) or None
        if col is None:
            continue
        if col not in dataset.column_names:
            raise ParameterError(f"{col!r} is not a column of {dataset.name} ({what} column)")
        if col in dataset.quasi_identifiers:
            raise ParameterError(f"the {what} column {col!r} is tagged quasi-identifier")
        out[key] = col
    if params.get("suda2"):
        out["suda2"] = True
        size = params.get("suda2_max_size") or 3
        try:
            size = int(size)
        except (TypeError, ValueError):
            raise ParameterError(
                f"the largest MSU size must be a whole number, got {size!r}"
            ) from None
        if not 1 <= size <= 10:
            raise ParameterError(f"the largest MSU size must lie between 1 and 10, got {size}")
        out["suda2_max_size"] = size
    method = params.get("risk_method") or "approx"
    if method not in ("approx", "exact"):
        raise ParameterError(
            f"the individual risk method is 'approx' or 'exact' (sdcMicro's), got {method!r}"
        )
    if method == "exact" and out:  # the default is not recorded: old jobs read the same
        out["risk_method"] = method
    return out


def dataset_profile(
    *, dataset: Dataset, progress: Callable[[int, str], None], params: dict | None = None
) -> dict:
    """Column profile plus, when quasi-identifiers are tagged, the full risk profile; with
    ``params`` naming a weight or household column or asking for SUDA2 (see
    :func:`survey_params`), sdcMicro's survey risk measures under ``risk["survey"]``."""
    survey = survey_params(dataset=dataset, params=params or {})
    progress(5, "loading the table")
    df = load_frame(dataset.storage_key)
    progress(25, "profiling columns")
    result: dict = {
        "rows": int(len(df)),
        "columns": describe_columns(df),
        "quasi_identifiers": dataset.quasi_identifiers,
        "sensitive": dataset.sensitive,
    }
    if dataset.quasi_identifiers:
        progress(50, "measuring re-identification and homogeneity risk")

        profile = assess_risk(
            df,
            quasi_identifiers=dataset.quasi_identifiers,
            sensitive=dataset.sensitive,
            population_size=dataset.population_size,
        )
        result["risk"] = profile.to_dict()
        result["risk"]["engine"] = "pandas"  # the profile job reads the table in memory
        result["risk"]["homogeneity"] = {
            name: homogeneity_histogram(pc["top_share"], pc["size"])
            for name, pc in (
                (str(n), sp.diversity.per_class()) for n, sp in profile.sensitive.items()
            )
        }
        if survey:
            progress(75, "measuring individual and household risk and SUDA2")
            measured = survey_risk(
                df,
                quasi_identifiers=dataset.quasi_identifiers,
                weights=survey.get("weights"),
                household=survey.get("household"),
                with_suda2=bool(survey.get("suda2")),
                suda2_max_size=survey.get("suda2_max_size"),
                method=survey.get("risk_method", "approx"),
            )
            result["risk"]["survey"] = {
                "weights_column": survey.get("weights"),
                "household_column": survey.get("household"),
                **measured.summary(df, quasi_identifiers=dataset.quasi_identifiers),
            }
    progress(95, "saving the profile")
    return result


MAX_HIERARCHY_BYTES = 20 * 1024 * 1024


def dataset_set_hierarchy(
    *,
    user: User,
    dataset: Dataset,
    column: str,
    upload: UploadedFile | None = None,
    spec: dict | None = None,
) -> Hierarchy:
    """Attach a hierarchy to a column: an ARX-format file (``upload``, ``value;level1;...;*``)
    or a spec in the plans' own form (``spec``, see :func:`dataset_set_hierarchy_spec`)."""

    if (upload is None) == (spec is None):
        raise ParameterError("give either a hierarchy file or a hierarchy spec")
    if spec is not None:
        return dataset_set_hierarchy_spec(user=user, dataset=dataset, column=column, spec=spec)
    assert upload is not None  # exactly one of upload and spec, checked above
    require_role(user=user, team=dataset.team, role=Role.PRIVACY_OFFICER)
    hierarchy = hierarchy_from_bytes(hierarchy_file_bytes(upload), column=column)
    return dataset_set_hierarchy_spec(
        user=user, dataset=dataset, column=column, spec={"rows": hierarchy.to_rows()}
    )


def hierarchy_file_bytes(upload: UploadedFile) -> bytes:
    """An uploaded hierarchy file's bytes, refused past MAX_HIERARCHY_BYTES."""
    if upload.size is not None and upload.size > MAX_HIERARCHY_BYTES:
        raise DataError("a hierarchy file may be at most 20 MB")
    raw = upload.read(MAX_HIERARCHY_BYTES + 1)
    if len(raw) > MAX_HIERARCHY_BYTES:
        raise DataError("a hierarchy file may be at most 20 MB")
    return raw


def hierarchy_from_bytes(raw: bytes, *, column: str) -> CoreHierarchy:
    """An ARX-format hierarchy file (``value;level1;...;*``, UTF-8 or Latin-1; ``;``, tab or
    ``,`` between fields) as a hierarchy of ``column``."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = raw.decode("latin-1")
    sep = ";" if ";" in text else ("\t" if "\t" in text else ",")
    return parse_hierarchy(text, sep=sep, attribute=column)


def dataset_hierarchy_from_file(
    *, user: User, dataset: Dataset, column: str, raw: bytes, progress: Callable[[int, str], None]
) -> dict:
    """The hierarchy job's work: parse a large uploaded hierarchy file, check it covers the
    column and store it, reporting progress (which raises when the job is cancelled)."""
    progress(5, "reading the hierarchy file")
    hierarchy = hierarchy_from_bytes(raw, column=column)
    progress(50, f"read {len(hierarchy.rows):,} values; checking it covers {column}")
    stored = dataset_set_hierarchy_spec(
        user=user, dataset=dataset, column=column, spec={"rows": hierarchy.to_rows()}
    )
    progress(95, "saved")
    return {"column": column, "levels": stored.levels, "values": stored.values}


def dataset_set_hierarchy_spec(
    *, user: User, dataset: Dataset, column: str, spec: dict
) -> Hierarchy:
    """Attach a hierarchy to a column, in the plans' own form: ``{"rows": [[value, level1, ...,
    "*"], ...]}`` or a builder spec such as ``{"builder": "interval", "width": 10}``.

    The hierarchy must cover every value of the column (the error names the values it misses).
    Only that column's distinct values are read, never the whole table. Setting the same
    hierarchy again changes nothing; a different one becomes the current version."""

    require_role(user=user, team=dataset.team, role=Role.PRIVACY_OFFICER)
    require_ready(dataset)
    if column not in dataset.column_names:
        raise DataError(f"unknown column: {column}")
    if not isinstance(spec, dict) or ("rows" in spec) == ("builder" in spec):
        raise ParameterError(
            f'hierarchy for {column!r}: give either rows ({{"rows": [[value, level1, ..., '
            f'"*"], ...]}}) or a builder ({{"builder": "interval", ...}})'
        )
    distinct = load_distinct(dataset.storage_key, column)
    if "rows" in spec:
        rows = spec["rows"]
        if set(spec) != {"rows"} or not isinstance(rows, list):
            raise ParameterError(f"hierarchy for {column!r}: 'rows' must be a list of rows")
        if not all(isinstance(r, list) and r for r in rows):
            raise ParameterError(f"hierarchy for {column!r}: every row must be a non-empty list")
        hierarchy = CoreHierarchy(rows=tuple(tuple(r) for r in rows), attribute=column)
        spec = {"rows": hierarchy.to_rows()}
    else:
        hierarchy = build_hierarchy(spec, distinct)
    hierarchy.validate_covers(distinct)
    digest = hierarchy_digest(spec)
    with transaction.atomic():
        # Lock the dataset row: two officers setting the same column at once serialise here.
        Dataset.objects.select_for_update().filter(pk=dataset.pk).first()
        current = Hierarchy.objects.filter(dataset=dataset, column=column, is_current=True).only(
            "id", "sha256", "levels", "values"
        )
        existing = current.first()
        if existing is not None and existing.sha256 == digest:
            return existing
        current.update(is_current=False)
        stored, created = Hierarchy.objects.update_or_create(
            dataset=dataset,
            column=column,
            sha256=digest,
            defaults={
                "spec": spec,
                "levels": hierarchy.height,
                "values": len(hierarchy.rows) if "rows" in spec else None,
                "is_current": True,
                "created_by": user,
            },
        )
        audit_record(
            actor=user,
            team=dataset.team,
            action="dataset.hierarchy_set",
            target=dataset,
            details={
                "column": column,
                "kind": "uploaded" if "rows" in spec else spec["builder"],
                "levels": hierarchy.height,
                "values": len(hierarchy.rows),
                "sha256": digest,
            },
        )
    return stored


def hierarchy_digest(spec: dict) -> str:
    """SHA-256 of a hierarchy spec's canonical JSON: the name a plan refers to it by."""
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()


def dataset_set_retention(
    *, user: User, dataset: Dataset, retain_until: date | None, confirm: str | None = None
) -> Dataset:
    """Officers and stewards set the date after which the raw table is deleted.

    A date already past makes the next retention run purge the data: only a privacy officer
    may set one, typing the dataset's name as ``confirm``."""
    from django.utils import timezone

    if not any(
        user_has_role(user=user, team=dataset.team, role=r)
        for r in (Role.PRIVACY_OFFICER, Role.DATA_STEWARD)
    ):
        require_role(user=user, team=dataset.team, role=Role.PRIVACY_OFFICER)
    past = retain_until is not None and retain_until < timezone.localdate()
    if past:
        if not user_has_role(user=user, team=dataset.team, role=Role.PRIVACY_OFFICER):
            raise ParameterError(
                f"{retain_until} is in the past: the raw data would be purged at the "
                "next retention run, which only a privacy officer can confirm"
            )
        if (confirm or "").strip() != dataset.name:
            raise ParameterError(
                f"{retain_until} is in the past: the raw data will be purged at the "
                "next retention run; type the dataset's name to confirm"
            )
    with transaction.atomic():
        Dataset.objects.filter(pk=dataset.pk).update(retain_until=retain_until)
        audit_record(
            actor=user,
            team=dataset.team,
            action="dataset.retention_set",
            target=dataset,
            details={
                "retain_until": retain_until.isoformat() if retain_until else None,
                "in_the_past_confirmed": past,
            },
        )
    dataset.retain_until = retain_until
    return dataset


def dataset_set_population(*, user: User, dataset: Dataset, population_size: int | None) -> Dataset:
    """The officer states how many people the table was sampled from (None: the table is the
    whole population, or the size is unknown)."""
    require_role(user=user, team=dataset.team, role=Role.PRIVACY_OFFICER)
    if population_size is not None and population_size < dataset.rows:
        raise DataError(
            f"the population ({population_size:,}) cannot be smaller than the table ({dataset.rows:,} rows)"
        )
    with transaction.atomic():
        Dataset.objects.filter(pk=dataset.pk).update(population_size=population_size)
        audit_record(
            actor=user,
            team=dataset.team,
            action="dataset.population_set",
            target=dataset,
            details={"population_size": population_size},
        )
    dataset.population_size = population_size
    return dataset


__all__ = [
    "UnsupportedFileType",
    "UploadTooLarge",
    "dataset_create",
    "dataset_discard",
    "dataset_parse",
    "dataset_parse_failed",
    "dataset_store",
]
