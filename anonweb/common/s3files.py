"""The S3 backend of the application's storage (see :mod:`anonweb.common.files`), selected by
``ANONWEB_STORAGE=s3``: django-storages' S3Storage with write-once objects, pyarrow access and
prefix deletion of every version."""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any
from urllib.parse import urlsplit

from botocore.exceptions import ClientError
from django.conf import settings
from storages.backends.s3 import S3Storage
from storages.utils import clean_name

from anonweb.common.files import FilesMixin, ObjectExists, Stored, sha256_of

# One PUT carries up to 5 GiB; a larger write-once object goes up in parts and is completed
# with the same condition.
SINGLE_PUT_LIMIT = 5 * 1024**3
PART_SIZE = 256 * 1024**2


class S3Files(FilesMixin, S3Storage):
    """An S3-compatible bucket (the ``AWS_*`` settings of django-storages).

    ``ANONWEB_S3_RELEASE_RETENTION_DAYS`` > 0 puts each write-once object under an object-lock
    retention of that many days (the bucket must have object lock enabled); raw data is never
    locked, so a retention purge can remove it."""

    def _key(self, name: str) -> str:
        return str(self._normalize_name(clean_name(name)))

    @property
    def _client(self) -> Any:
        return self.connection.meta.client

    def _lock_params(self) -> dict[str, Any]:
        days = int(getattr(settings, "ANONWEB_S3_RELEASE_RETENTION_DAYS", 0) or 0)
        if days <= 0:
            return {}
        mode = getattr(settings, "ANONWEB_S3_RELEASE_LOCK_MODE", "GOVERNANCE")
        until = datetime.now(UTC) + timedelta(days=days)
        return {"ObjectLockMode": mode, "ObjectLockRetainUntilDate": until}

    def put(self, name: str, source: Path | bytes, *, once: bool = False) -> Stored:
        key = self._key(name)
        params = self._get_write_parameters(key)
        if not once:
            if isinstance(source, bytes):
                self._client.put_object(Bucket=self.bucket_name, Key=key, Body=source, **params)
            else:
                self._client.upload_file(str(source), self.bucket_name, key, ExtraArgs=params)
                Path(source).unlink()
            return Stored(name, "", None)
        params.update(self._lock_params())
        if isinstance(source, bytes):
            digest = hashlib.sha256(source).hexdigest()
            version = self._put_once(key, source, params)
        else:
            with open(source, "rb") as fh:
                digest = sha256_of(fh)
            size = os.path.getsize(source)
            with open(source, "rb") as fh:
                if size <= SINGLE_PUT_LIMIT:
                    version = self._put_once(key, fh, params)
                else:
                    version = self._put_once_in_parts(key, fh, params)
            Path(source).unlink()
        return Stored(name, digest, version)

    def _put_once(self, key: str, body: Any, params: dict[str, Any]) -> str | None:
        try:
            response = self._client.put_object(
                Bucket=self.bucket_name, Key=key, Body=body, IfNoneMatch="*", **params
            )
        except ClientError as err:
            raise self._refusal(key, err) from None
        return response.get("VersionId")

    def _put_once_in_parts(self, key: str, fh: IO[bytes], params: dict[str, Any]) -> str | None:
        upload = self._client.create_multipart_upload(Bucket=self.bucket_name, Key=key, **params)
        upload_id = upload["UploadId"]
        parts = []
        try:
            number = 1
            while chunk := fh.read(PART_SIZE):
                part = self._client.upload_part(
                    Bucket=self.bucket_name,
                    Key=key,
                    UploadId=upload_id,
                    PartNumber=number,
                    Body=chunk,
                )
                parts.append({"ETag": part["ETag"], "PartNumber": number})
                number += 1
            response = self._client.complete_multipart_upload(
                Bucket=self.bucket_name,
                Key=key,
                UploadId=upload_id,
                MultipartUpload={"Parts": parts},
                IfNoneMatch="*",
            )
        except BaseException as exc:
            with contextlib.suppress(ClientError):
                self._client.abort_multipart_upload(
                    Bucket=self.bucket_name, Key=key, UploadId=upload_id
                )
            if isinstance(exc, ClientError):
                raise self._refusal(key, exc) from None
            raise
        return response.get("VersionId")

    def _refusal(self, key: str, err: ClientError) -> Exception:
        code = err.response.get("Error", {}).get("Code", "")
        status = err.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
        # 412: the object exists; 409: a concurrent conditional write of the same key won.
        if code in ("PreconditionFailed", "ConditionalRequestConflict") or status in (409, 412):
            return ObjectExists(f"{key} is already stored and is written once")
        return err

    def arrow_location(self, name: str) -> tuple[str, Any]:
        import pyarrow.fs as pafs

        endpoint = self.endpoint_url or None
        options: dict[str, Any] = {
            "access_key": self.access_key or None,
            "secret_key": self.secret_key or None,
            "session_token": self.security_token or None,
            "region": self.region_name or "us-east-1",
        }
        if endpoint:
            options["endpoint_override"] = endpoint
            options["scheme"] = urlsplit(endpoint).scheme or "https"
        fs = pafs.S3FileSystem(**{k: v for k, v in options.items() if v is not None})
        return f"{self.bucket_name}/{self._key(name)}", fs

    @contextlib.contextmanager
    def local_copy(self, name: str, *, scratch: Path | None = None) -> Iterator[Path]:
        """A temporary local copy of the object, in ``scratch`` (default: the system's temporary
        folder), removed afterwards."""
        fd, tmp = tempfile.mkstemp(
            prefix=".tmp-copy-", suffix=posixpath.basename(name), dir=scratch
        )
        os.close(fd)
        try:
            try:
                self._client.download_file(self.bucket_name, self._key(name), tmp)
            except ClientError as err:
                if err.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
                    raise FileNotFoundError(name) from None
                raise
            yield Path(tmp)
        finally:
            Path(tmp).unlink(missing_ok=True)

    def delete_prefix(self, prefix: str) -> None:
        key = self._key(prefix).rstrip("/") + "/"
        doomed: list[dict[str, str]] = []
        pages = self._client.get_paginator("list_object_versions").paginate(
            Bucket=self.bucket_name, Prefix=key
        )
        for page in pages:
            for entry in page.get("Versions", []) + page.get("DeleteMarkers", []):
                doomed.append({"Key": entry["Key"], "VersionId": entry["VersionId"]})
        # Raw data is never locked; release objects are removed only when no release row points
        # to them (a publication that failed, a write cut off), so a governance-mode lock may be
        # bypassed for them. A compliance-mode lock holds until its date, as it should.
        for start in range(0, len(doomed), 1000):
            self._client.delete_objects(
                Bucket=self.bucket_name,
                Delete={"Objects": doomed[start : start + 1000], "Quiet": True},
                BypassGovernanceRetention=True,
            )

    def prefix_exists(self, prefix: str) -> bool:
        key = self._key(prefix).rstrip("/") + "/"
        found = self._client.list_objects_v2(Bucket=self.bucket_name, Prefix=key, MaxKeys=1)
        return bool(found.get("KeyCount"))

    def version(self, name: str) -> str | None:
        try:
            head = self._client.head_object(Bucket=self.bucket_name, Key=self._key(name))
        except ClientError as err:
            if err.response.get("ResponseMetadata", {}).get("HTTPStatusCode") == 404:
                raise FileNotFoundError(name) from None
            raise
        return head.get("VersionId")
