"""A release's file as an HTTP response, in any of the formats of
:data:`anonweb.core.io.export.DOWNLOAD_FORMATS`: one writer for the release page, the API and a
recipient's single-use link."""

from __future__ import annotations

import re

from django.http import FileResponse, HttpResponse

from anonweb.core.io.export import DOWNLOAD_FORMATS, download_format
from anonweb.releases.models import Release
from anonweb.releases.storage import release_file


def download_filename(release: Release, fmt: str) -> str:
    return re.sub(r"[^\w.-]+", "_", f"{release.dataset.name}-v{release.version}.{fmt}")


def download_response(
    *, release: Release, fmt: str, filename: str | None = None
) -> HttpResponse | FileResponse:
    """The release's table in ``fmt`` as an attachment. Raises Http404 when the files are
    missing and a CoreError for an unknown format or an xlsx past a sheet's size; the caller
    records the download once this has succeeded. ``filename``: the attachment's name (by
    default the dataset's name and the version)."""
    fmt = download_format(fmt)
    body = release_file(release.storage_key, fmt)
    name = filename or download_filename(release, fmt)
    if isinstance(body, bytes):
        response = HttpResponse(body, content_type=DOWNLOAD_FORMATS[fmt])
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response
    return FileResponse(
        body,  # the stored object, open for reading; closed by the response
        as_attachment=True,
        filename=name,
        content_type=DOWNLOAD_FORMATS[fmt],
    )
