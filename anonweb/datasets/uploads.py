"""Receiving large uploads: the request body goes to disk as it arrives, hashed on the way.

* :class:`UploadLimitMiddleware` refuses a request whose declared size is over the upload limit
  with 413 before any of its body is read (nothing is written, no worker time is spent).
* :class:`StreamedUploadHandler` writes each file of a multipart body to
  ``MEDIA_ROOT/incoming`` chunk by chunk, computing its SHA-256 and counting its bytes as they
  come; a file that grows past the limit (a body sent without a truthful length) is dropped
  at once. The dataset service then moves the file into place: it is never read again in the
  request, never held in memory, never copied.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

from django.conf import settings
from django.core.files.uploadedfile import TemporaryUploadedFile, UploadedFile
from django.core.files.uploadhandler import SkipFile, TemporaryFileUploadHandler
from django.http import HttpResponse, JsonResponse
from django.urls import reverse

from anonweb.core.io.sources import size_text as core_size_text

# Room for the form fields next to the file (name, description, CSRF token, multipart framing).
FORM_ALLOWANCE = 1024 * 1024


def incoming_dir() -> Path:
    return Path(settings.MEDIA_ROOT) / "incoming"


def size_text(n: int) -> str:
    return core_size_text(n)


def over_limit_message(size: int) -> str:
    limit = settings.ANONWEB_MAX_UPLOAD_BYTES
    return (
        f"the upload is {size_text(size)}, over the limit of {size_text(limit)} "
        "(ANONWEB_MAX_UPLOAD_BYTES)"
    )


class UploadLimitMiddleware:
    """413 for a body declared larger than the upload limit, before the body is read."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            declared = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            declared = 0
        if declared > settings.ANONWEB_MAX_UPLOAD_BYTES + FORM_ALLOWANCE:
            message = over_limit_message(declared)
            if request.path.startswith("/api/") or "json" in request.headers.get("Accept", ""):
                return JsonResponse({"error": message}, status=413)
            return HttpResponse(
                "<!doctype html><title>Upload too large</title><h1>Upload too large</h1>"
                f"<p>{message[0].upper()}{message[1:]}.</p><p><a href='{reverse('datasets:upload')}'>"
                "Back to the upload page</a></p>",
                status=413,
            )
        return self.get_response(request)


class StagedUpload(TemporaryUploadedFile):
    """An uploaded file already on disk under ``MEDIA_ROOT/incoming`` (mode 0600), with the
    SHA-256 of its bytes. Removed when the request ends unless it was moved away."""

    def __init__(self, name, content_type, size, charset, content_type_extra=None):
        directory = incoming_dir()
        directory.mkdir(parents=True, exist_ok=True)
        file = tempfile.NamedTemporaryFile(suffix=".upload", dir=directory)  # noqa: SIM115
        UploadedFile.__init__(self, file, name, content_type, size, charset, content_type_extra)
        self.sha256: str | None = None


class StreamedUploadHandler(TemporaryFileUploadHandler):
    def new_file(self, *args, **kwargs):
        super(TemporaryFileUploadHandler, self).new_file(*args, **kwargs)
        self.file = StagedUpload(
            self.file_name, self.content_type, 0, self.charset, self.content_type_extra
        )
        self.digest = hashlib.sha256()
        self.received = 0

    def receive_data_chunk(self, raw_data, start):
        self.received += len(raw_data)
        if self.received > settings.ANONWEB_MAX_UPLOAD_BYTES:
            # Only reachable when the declared length lied or was absent; say why the file is
            # missing rather than letting the form report an empty field.
            if self.request is not None:
                # a note for the view on the request, read back by upload_refused()
                self.request.upload_refused = (  # type: ignore[attr-defined]
                    over_limit_message(self.received)
                )
            self.upload_interrupted()
            raise SkipFile()
        self.digest.update(raw_data)
        self.file.write(raw_data)

    def file_complete(self, file_size):
        upload = super().file_complete(file_size)
        assert upload is not None  # the temporary-file handler always hands its file on
        # read back by the dataset service, which records the upload's digest
        upload.sha256 = self.digest.hexdigest()  # type: ignore[attr-defined]
        return upload


def upload_refused(request) -> str | None:
    """Why the request's file was dropped while it arrived, if it was."""
    return getattr(request, "upload_refused", None)


__all__ = [
    "StagedUpload",
    "StreamedUploadHandler",
    "UploadLimitMiddleware",
    "incoming_dir",
    "upload_refused",
]
