"""Every API error is JSON: ``{"errors": [...]}`` for a 400 (the request is invalid: each
problem, one line each), ``{"error": "one line"}`` for every other status.

The services raise what the pages already handle (Http404, PermissionDenied, CoreError and its
subclasses, ReviewError); this module maps each to its status, so a view never needs its own
try/except. Anything unexpected is logged with a reference and answered 500 with that reference
only: never a traceback.
"""

from __future__ import annotations

import logging
import uuid

from django.conf import settings
from django.core.exceptions import PermissionDenied, RequestDataTooBig
from django.http import Http404, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, status
from rest_framework.response import Response

from anonweb.core.errors import CoreError, PlanError
from anonweb.datasets.ingest import UnsupportedFileType, UploadTooLarge
from anonweb.datasets.services import DatasetNotReady
from anonweb.releases.services import ReviewError

log = logging.getLogger(__name__)


class Conflict(exceptions.APIException):
    """409: the object is not in a state that allows this (already reviewed, still parsing)."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "the object is not in a state that allows this"


def one_line(text) -> str:
    return " ".join(str(text).split()) or "error"


def _flatten(detail, prefix: str = "") -> list[str]:
    """DRF's nested validation detail as "field: message" lines."""
    if isinstance(detail, dict):
        out = []
        for key, value in detail.items():
            name = "" if key in ("non_field_errors", "detail") else str(key)
            out += _flatten(value, f"{prefix}.{name}" if prefix and name else (name or prefix))
        return out
    if isinstance(detail, list):
        out = []
        for item in detail:
            out += _flatten(item, prefix)
        return out
    return [f"{prefix}: {one_line(detail)}" if prefix else one_line(detail)]


def error_body(message: str, status_code: int) -> dict:
    """The JSON of an error: a 400 lists its problems, as the schema documents (ErrorsOut)."""
    if status_code == status.HTTP_400_BAD_REQUEST:
        return {"errors": [one_line(message)]}
    return {"error": one_line(message)}


def error_response(message: str, status_code: int, **headers) -> Response:
    response = Response(error_body(message, status_code), status=status_code)
    for key, value in headers.items():
        response[key] = value
    return response


def _status_of_core_error(exc: CoreError) -> int:
    if isinstance(exc, DatasetNotReady):
        return status.HTTP_409_CONFLICT
    if isinstance(exc, UploadTooLarge):
        return status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    if isinstance(exc, UnsupportedFileType):
        return status.HTTP_415_UNSUPPORTED_MEDIA_TYPE
    return status.HTTP_400_BAD_REQUEST


def exception_handler(exc, context):
    """DRF's exception handler, for every error a view or a service raises."""

    if isinstance(exc, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return error_response(
            f"the request body is larger than {limit:,} bytes, the most a JSON body may hold "
            "(ANONWEB_MAX_FORM_BYTES); upload files as multipart form data",
            status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, Http404):
        return error_response(str(exc) or "not found", status.HTTP_404_NOT_FOUND)
    if isinstance(exc, PermissionDenied):
        return error_response(str(exc) or "permission denied", status.HTTP_403_FORBIDDEN)
    if isinstance(exc, PlanError):
        return Response({"errors": [one_line(e) for e in exc.errors]}, status=400)
    if isinstance(exc, CoreError):
        return error_response(str(exc), _status_of_core_error(exc))
    if isinstance(exc, ReviewError):
        return error_response(str(exc), status.HTTP_409_CONFLICT)
    if isinstance(exc, exceptions.ValidationError):
        return Response({"errors": _flatten(exc.detail)}, status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, exceptions.APIException):
        headers = {}
        auth_header = getattr(exc, "auth_header", None)
        if auth_header:
            headers["WWW-Authenticate"] = auth_header
        wait = getattr(exc, "wait", None)  # a Throttled exception's seconds
        if wait:
            headers["Retry-After"] = str(int(wait))
        detail = exc.detail
        message = _flatten(detail)[0] if not isinstance(detail, str) else detail
        if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
            # Without an authenticate header DRF would turn 401 into 403.
            headers.setdefault("WWW-Authenticate", 'Token realm="api"')
            return error_response(message, status.HTTP_401_UNAUTHORIZED, **headers)
        return error_response(message, exc.status_code, **headers)
    ref = uuid.uuid4().hex[:8]
    view = context.get("view")
    log.error("API error in %s (reference %s)", type(view).__name__, ref, exc_info=exc)
    return error_response(
        f"internal error (reference {ref}); an administrator can find it in the server log",
        status.HTTP_500_INTERNAL_SERVER_ERROR,
    )


@csrf_exempt
def not_found_json(request, *args, **kwargs):
    """Unknown paths under /api/: 401 for anonymous callers (as every route), else 404.

    Exempt from CSRF: it changes nothing, and a POST to a mistyped route (a missing trailing
    slash) must get this JSON, not the HTML page of a failed CSRF check."""
    from anonweb.api.authentication import HashedTokenAuthentication

    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        try:
            found = HashedTokenAuthentication().authenticate(request)
        except exceptions.AuthenticationFailed:
            found = None
        if found is None:
            response = JsonResponse({"error": "authentication required"}, status=401)
            response["WWW-Authenticate"] = 'Token realm="api"'
            return response
    return JsonResponse({"error": f"no such API route: {request.path}"}, status=404)
