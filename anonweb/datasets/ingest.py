"""Uploading a dataset: the file is stored as it arrives, then read by a background job.

* :func:`anonweb.jobs.services.dataset_upload` is what the upload page and the API call: it
  stores the file with :func:`dataset_store` (moved into the dataset's folder of the storage,
  hashed while it was written; the dataset in the ``parsing`` state) and queues the job that
  reads it, in one transaction. The request returns at once.
* :func:`dataset_parse` (the job) converts the file to Parquet in bounded memory with
  :func:`anonweb.core.io.ingest.convert_to_parquet` (a streamed read in batches), checking the
  limits as it reads, stores the Parquet file beside the upload and marks the dataset
  ``ready``. Every later job reads that Parquet file.
* :func:`dataset_parse_failed` marks it ``failed`` with the one-line reason and deletes every
  file of it; the jobs app calls it whenever a read job ends without success (an error, a
  cancellation, a lost worker).
* :func:`dataset_create` does both in the caller's process (the demo, scripts, tests).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import uuid
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction

from anonweb.accounts.models import Role
from anonweb.accounts.selectors import require_role
from anonweb.audit.services import audit_record
from anonweb.common.files import files
from anonweb.core.errors import DataError
from anonweb.core.io.ingest import (
    EXCEL_SUFFIXES,
    PARQUET_SUFFIXES,
    TEXT_SUFFIXES,
    check_sheet,
    convert_to_parquet,
    format_of,
)
from anonweb.core.io.sources import Limits
from anonweb.datasets.models import Dataset, DatasetStatus
from anonweb.datasets.storage import dataset_files_remove, dataset_prefix, parquet_name
from anonweb.datasets.tagging import guess_tags
from anonweb.datasets.uploads import incoming_dir, over_limit_message

ALLOWED_SUFFIXES = (TEXT_SUFFIXES - {""}) | EXCEL_SUFFIXES | PARQUET_SUFFIXES


class UnsupportedFileType(DataError):
    """The upload is not a table format anonweb reads (the API answers 415)."""


class UploadTooLarge(DataError):
    """The upload is over ANONWEB_MAX_UPLOAD_BYTES (the API answers 413)."""


def upload_limits() -> Limits:
    """What one uploaded table may hold, from the settings."""
    return Limits(
        max_columns=settings.ANONWEB_MAX_COLUMNS,
        max_cells=settings.ANONWEB_MAX_CELLS,
        max_expanded_bytes=settings.ANONWEB_MAX_EXPANDED_BYTES,
        max_decoded_bytes=settings.ANONWEB_MAX_DECODED_BYTES,
        max_shared_strings=settings.ANONWEB_MAX_SHARED_STRINGS,
        max_shared_strings_bytes=settings.ANONWEB_MAX_SHARED_STRINGS_BYTES,
    )


def original_name(dataset: Dataset) -> str:
    """The stored upload's name in the storage."""
    return _original_name(dataset.storage_key, dataset.file_format)


def _place_file(upload, dest: Path) -> tuple[int, str]:
    """Put the uploaded bytes at ``dest`` (mode 0600); returns their size and SHA-256.

    A file the streaming handler already wrote to disk is moved, with the digest it computed
    while the bytes arrived. Anything else (a file object from a script or a test) is copied
    in chunks and hashed on the way; never read whole."""
    staged = getattr(upload, "temporary_file_path", None)
    digest = getattr(upload, "sha256", None)
    if staged is not None and digest:
        source = Path(staged())
        with _suppress_cross_device():
            upload.file.flush()
            os.replace(source, dest)
            os.chmod(dest, 0o600)
            return dest.stat().st_size, digest
    sha = hashlib.sha256()
    size = 0
    limit = settings.ANONWEB_MAX_UPLOAD_BYTES
    upload.seek(0)
    fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as out:
        for chunk in upload.chunks():
            size += len(chunk)
            if size > limit:
                raise UploadTooLarge(f"{upload.name}: {over_limit_message(size)}")
            sha.update(chunk)
            out.write(chunk)
    return size, sha.hexdigest()


class _suppress_cross_device:
    """``os.replace`` across file systems fails; the caller then copies instead."""

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        return kind is OSError and getattr(exc, "errno", None) == 18  # EXDEV


def dataset_store(
    *, user, team, upload, name: str, description: str = "", sheet: str | None = None
) -> Dataset:
    """Keep an uploaded file as a new dataset in the ``parsing`` state (no cell read yet).

    Checks the role, the file type, the size and the name, and for a workbook the sheet to read
    (from its directory: one of several must be chosen, by name); a failed upload of the same
    name is replaced. The file is in place before the row is written; a caller whose transaction
    rolls back afterwards removes its files with ``dataset_files_remove(dataset.storage_key)``
    (as the two below do)."""
    require_role(user=user, team=team, role=Role.PRIVACY_OFFICER)
    original_name = Path(upload.name or "upload").name
    suffix = Path(original_name).suffix.lower()
    if suffix not in ALLOWED_SUFFIXES:
        raise UnsupportedFileType(
            f"{original_name}: unsupported file type {suffix or '(none)'}; "
            "upload CSV, TSV, Excel (.xlsx) or Parquet"
        )
    size = getattr(upload, "size", None)
    if size is not None and size > settings.ANONWEB_MAX_UPLOAD_BYTES:
        raise UploadTooLarge(f"{original_name}: {over_limit_message(size)}")
    name = name.strip()
    if not name:
        raise DataError("a dataset needs a name")
    existing = (
        Dataset.objects.filter(team=team, name=name)
        .select_related("team")
        .only("pk", "status", "name", "storage_key", "team")
        .first()
    )
    if existing is not None:
        if existing.status != DatasetStatus.FAILED:
            raise DataError(f"team {team.name} already has a dataset named {name!r}")
        dataset_discard(user=user, dataset=existing)
    dataset = Dataset(
        team=team,
        name=name,
        description=description,
        uploaded_by=user,
        original_name=original_name,
        file_format=suffix.lstrip("."),
        sheet=sheet or "",
        size_bytes=0,
        source_sha256="",
        status=DatasetStatus.PARSING,
    )
    key = dataset.storage_key
    # The bytes are gathered in this host's incoming folder and checked there, then moved into
    # the storage (a rename on the local disk, an upload to a bucket).
    incoming_dir().mkdir(parents=True, exist_ok=True)
    staged = incoming_dir() / f"{uuid.uuid4().hex}{suffix}"
    try:
        dataset.size_bytes, dataset.source_sha256 = _place_file(upload, staged)
        check_sheet(
            staged,
            fmt=format_of(original_name),
            sheet=sheet or None,
            label=original_name,
            limits=upload_limits(),
        )
        files().put(_original_name(key, dataset.file_format), staged)
        with transaction.atomic():
            dataset.save()
            audit_record(
                actor=user,
                team=team,
                action="dataset.uploaded",
                target=dataset,
                details={
                    "name": name,
                    "file": original_name,
                    "sha256": dataset.source_sha256,
                    "bytes": dataset.size_bytes,
                },
            )
    except IntegrityError:
        dataset_files_remove(key)
        raise DataError(f"team {team.name} already has a dataset named {name!r}") from None
    except BaseException:
        dataset_files_remove(key)
        raise
    finally:
        staged.unlink(missing_ok=True)
    return dataset


def _original_name(storage_key, file_format: str) -> str:
    return f"{dataset_prefix(storage_key)}/original.{file_format}"


def dataset_parse(
    *, dataset: Dataset, progress, sep: str | None = None, decimal: str | None = None
) -> dict:
    """Read the stored upload into the dataset's Parquet table and mark it ready.

    ``sep`` and ``decimal`` are a text file's separator (default: detected) and decimal mark
    (default: the point); the sheet of a workbook is the one stored with the upload. What may
    mean the file was read wrongly is kept as the dataset's ``read_warnings``.

    ``progress(percent, message)`` is the job's; it raises when the job is cancelled. On any
    error the table is not written and the error propagates (the job's failure then marks the
    dataset failed and removes its files)."""
    if dataset.status != DatasetStatus.PARSING:
        raise DataError(f"{dataset.name} is not waiting to be read ({dataset.status})")
    progress(1, "checking the file")
    incoming_dir().mkdir(parents=True, exist_ok=True)
    # Read from a local file (the stored one itself on the local disk, a copy from a bucket),
    # converted next to the incoming uploads, then stored: complete, or not at all.
    with contextlib.ExitStack() as stack:
        try:
            source = stack.enter_context(
                files().local_copy(original_name(dataset), scratch=incoming_dir())
            )
        except FileNotFoundError:
            raise DataError(f"{dataset.original_name}: no such file") from None
        staging = stack.enter_context(
            tempfile.TemporaryDirectory(dir=incoming_dir(), prefix="parse-")
        )
        converted = Path(staging) / "data.parquet"
        info = convert_to_parquet(
            source,
            converted,
            fmt=format_of(dataset.original_name),
            sep=sep,
            decimal=decimal or ".",
            sheet=dataset.sheet or None,
            name=dataset.original_name,
            limits=upload_limits(),
            progress=lambda fraction, message: progress(int(2 + 96 * fraction), message),
        )
        files().put(parquet_name(dataset.storage_key), converted)
    names = [c.name for c in info.columns]
    with transaction.atomic():
        changed = Dataset.objects.filter(pk=dataset.pk, status=DatasetStatus.PARSING).update(
            status=DatasetStatus.READY,
            error="",
            rows=info.rows,
            columns=[c.to_dict() for c in info.columns],
            tags=guess_tags(names),
            encoding=info.encoding or "",
            read_warnings=[w.to_dict() for w in info.warnings],
        )
        if not changed:
            # Failed meanwhile (the job was given up as lost): what was written goes too.
            transaction.on_commit(lambda: dataset_files_remove(dataset.storage_key))
            raise DataError("the upload was given up before it was read; upload it again")
        audit_record(
            actor=None,
            team=dataset.team,
            action="dataset.parsed",
            target=dataset,
            details={
                "rows": info.rows,
                "columns": names,
                "format": info.format,
                "encoding": info.encoding,
                "sheet": info.sheet,
                "warnings": [w.code for w in info.warnings],
            },
        )
    return {"dataset_id": dataset.pk, "rows": info.rows, "columns": len(names)}


def dataset_parse_failed(*, dataset_id: int, error: str) -> bool:
    """Mark a dataset whose upload could not be read as failed, with the reason, and delete
    its files (the upload and anything half-written). Does nothing to a dataset that is not
    being read. Runs in the caller's transaction; files go once it commits."""
    reason = (error or "the upload could not be read").strip().splitlines()[0][:1000]
    with transaction.atomic():
        changed = Dataset.objects.filter(pk=dataset_id, status=DatasetStatus.PARSING).update(
            status=DatasetStatus.FAILED, error=reason, rows=0, columns=[], tags={}
        )
        if not changed:
            return False
        dataset = Dataset.objects.select_related("team").get(pk=dataset_id)
        audit_record(
            actor=None,
            team=dataset.team,
            action="dataset.parse_failed",
            target=dataset,
            details={"error": reason},
        )
        key = dataset.storage_key
        transaction.on_commit(lambda: dataset_files_remove(key))
    return True


def dataset_discard(*, user, dataset: Dataset) -> None:
    """Remove an upload that could not be read (its row; its files are already gone)."""
    require_role(user=user, team=dataset.team, role=Role.PRIVACY_OFFICER)
    with transaction.atomic():
        deleted, _ = Dataset.objects.filter(pk=dataset.pk, status=DatasetStatus.FAILED).delete()
        if not deleted:
            raise DataError(
                f"only an upload that could not be read can be removed ({dataset.name})"
            )
        audit_record(
            actor=user,
            team=dataset.team,
            action="dataset.discarded",
            target=dataset,
            details={"name": dataset.name},
        )
    dataset_files_remove(dataset.storage_key)


def dataset_create(
    *,
    user,
    team,
    upload,
    name: str,
    description: str = "",
    sep: str | None = None,
    sheet: str | None = None,
    decimal: str | None = None,
) -> Dataset:
    """Store and read an upload in this process; returns the ready dataset, or raises with
    the reason and keeps nothing (no row, no file). For the demo, scripts and tests; the page
    and the API use :func:`anonweb.jobs.services.dataset_upload`."""
    key = None
    try:
        with transaction.atomic():
            dataset = dataset_store(
                user=user, team=team, upload=upload, name=name, description=description, sheet=sheet
            )
            key = dataset.storage_key
            dataset_parse(
                dataset=dataset,
                progress=lambda percent, message="": None,
                sep=sep,
                decimal=decimal,
            )
    except BaseException:
        if key is not None:
            dataset_files_remove(key)
        raise
    dataset.refresh_from_db()
    return dataset
