"""Where the application's files live: one named storage, ``storages["anonweb"]``.

Uploads, their Parquet copies and release files go through it, so every process (web and
workers, on one host or many) sees the same files. Two backends, chosen by ``ANONWEB_STORAGE``:

* :class:`LocalFiles` (the default): ``MEDIA_ROOT`` on the local disk, the layout of before.
* :class:`anonweb.common.s3files.S3Files`: an S3-compatible bucket through django-storages
  (AWS S3, MinIO, ...).

Both add to Django's storage API what the application needs of it:

* :meth:`put` writes an object so that no reader ever sees it half-written (locally: a
  temporary name in the same folder, then a rename; on S3 a PUT is visible only once complete).
  ``once=True`` refuses a second write of the same name (:class:`ObjectExists`): locally by an
  exclusive link, on S3 by a conditional PUT (``If-None-Match: *``), with an object-lock
  retention when one is configured; it returns the object's SHA-256 and version.
* :meth:`arrow_location` lets pyarrow read a stored Parquet file where it is, so a read of
  a few columns fetches only those column chunks: on S3 through pyarrow's own S3 file system
  (ranged GETs), not a download of the whole object.
* :meth:`local_copy` gives a local path for readers that need one (the upload converter).
* :meth:`delete_prefix` removes every object under a folder (on a versioned bucket every
  version of it, so that purged raw data does not linger as an old version).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import shutil
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import IO, Any, Protocol, cast

from django.core.files.storage import FileSystemStorage, storages

STORAGE_ALIAS = "anonweb"
CHUNK = 1 << 20


class ObjectExists(FileExistsError):
    """A write-once object was written again: the stored one stays as it is."""


@dataclass(frozen=True)
class Stored:
    """A written object: its name, SHA-256 (of the bytes written) and the backend's version
    id (None where the backend keeps no versions, such as the local disk)."""

    name: str
    sha256: str
    version: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "sha256": self.sha256, "version": self.version}


class AppFiles(Protocol):
    """Django's storage API with what :class:`LocalFiles` and the S3 backend add to it."""

    def put(self, name: str, source: Path | bytes, *, once: bool = False) -> Stored: ...
    def arrow_location(self, name: str) -> tuple[str, Any]: ...
    def local_copy(
        self, name: str, *, scratch: Path | None = None
    ) -> contextlib.AbstractContextManager[Path]: ...
    def delete_prefix(self, prefix: str) -> None: ...
    def prefix_exists(self, prefix: str) -> bool: ...
    def version(self, name: str) -> str | None: ...
    def walk(self, prefix: str) -> list[str]: ...
    def sha256(self, name: str) -> str: ...
    def open(self, name: str, mode: str = "rb") -> Any: ...
    def exists(self, name: str) -> bool: ...
    def delete(self, name: str) -> None: ...
    def size(self, name: str) -> int: ...
    def listdir(self, path: str) -> tuple[list[str], list[str]]: ...
    def get_modified_time(self, name: str) -> datetime: ...


def files() -> AppFiles:
    """The application's storage (configured in settings.STORAGES)."""
    return cast(AppFiles, storages[STORAGE_ALIAS])


def sha256_of(fh: IO[bytes]) -> str:
    digest = hashlib.sha256()
    while chunk := fh.read(CHUNK):
        digest.update(chunk)
    return digest.hexdigest()


class FilesMixin:
    """What both backends share, written with the storage API alone."""

    def walk(self, prefix: str) -> list[str]:
        """Every object under ``prefix``, as names relative to it (sorted)."""
        out: list[str] = []
        pending = [""]
        while pending:
            sub = pending.pop()
            where = posixpath.join(prefix, sub) if sub else prefix
            try:
                dirs, names = cast(Any, self).listdir(where)
            except FileNotFoundError:
                continue
            out += [posixpath.join(sub, n) if sub else n for n in names]
            pending += [posixpath.join(sub, d) if sub else d for d in dirs]
        return sorted(out)

    def sha256(self, name: str) -> str:
        """The SHA-256 of the stored object, read in chunks."""
        with cast(Any, self).open(name, "rb") as fh:
            return sha256_of(fh)


class LocalFiles(FilesMixin, FileSystemStorage):
    """MEDIA_ROOT on the local disk (``location`` follows the MEDIA_ROOT setting)."""

    def put(self, name: str, source: Path | bytes, *, once: bool = False) -> Stored:
        """Write ``source`` (bytes, or a local file that is moved) as ``name``, atomically;
        with ``once`` a second write of ``name`` raises :class:`ObjectExists`."""
        dest = Path(self.path(name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.parent / f".tmp-{uuid.uuid4().hex[:12]}-{dest.name}"
        try:
            if isinstance(source, bytes):
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as out:
                    out.write(source)
            else:
                try:
                    os.replace(source, tmp)
                except OSError:  # another file system: copied, then the original removed
                    shutil.copyfile(source, tmp)
                    Path(source).unlink()
                os.chmod(tmp, 0o600)
            digest = ""
            if once:
                with tmp.open("rb") as fh:
                    digest = sha256_of(fh)
                try:
                    # A hard link fails if the name exists: an exclusive create of a file that
                    # is complete the moment it appears.
                    os.link(tmp, dest)
                except FileExistsError:
                    raise ObjectExists(f"{name} is already stored and is written once") from None
            else:
                os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
        return Stored(name, digest, None)

    def arrow_location(self, name: str) -> tuple[str, Any]:
        return self.path(name), None

    @contextlib.contextmanager
    def local_copy(self, name: str, *, scratch: Path | None = None) -> Iterator[Path]:
        """The stored file itself (``scratch``, where a copy would go, is not needed)."""
        path = Path(self.path(name))
        if not path.exists():
            raise FileNotFoundError(name)
        yield path

    def delete_prefix(self, prefix: str) -> None:
        shutil.rmtree(self.path(prefix), ignore_errors=True)

    def prefix_exists(self, prefix: str) -> bool:
        return Path(self.path(prefix)).exists()

    def version(self, name: str) -> str | None:
        return None
