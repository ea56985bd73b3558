"""A release's file as an HTTP response, in any of the formats of
:data:`anonweb.core.io.export.EXPORT_FORMATS`: one writer for the release page, the API and a
recipient's single-use link."""

from __future__ import annotations

import re

from django.http import FileResponse, HttpResponse

from anonweb.core.io.export import export_format
from anonweb.releases.models import Release
from anonweb.releases.storage import release_file


def download_filename(release: Release, fmt: str) -> str:
    name = f"{release.dataset.name}-v{release.version}{export_format(fmt).suffix}"
    return re.sub(r"[^\w.-]+", "_", name)


def download_response(
    *, release: Release, fmt: str, filename: str | None = None
) -> HttpResponse | FileResponse:
    """The release's table in ``fmt`` as an attachment. Raises Http404 when the files are
    missing and a CoreError for an unknown format or an xlsx past a sheet's size; the caller
    records the download once this has succeeded. ``filename``: the attachment's name (by
    default the dataset's name and the version)."""
    export = export_format(fmt)
    body = release_file(release.storage_key, export.name)
    name = filename or download_filename(release, export.name)
    if isinstance(body, bytes):
        response = HttpResponse(body, content_type=export.content_type)
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response
    return FileResponse(
        body,  # the stored object, open for reading; closed by the response
        as_attachment=True,
        filename=name,
        content_type=export.content_type,
    )
