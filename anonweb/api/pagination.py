"""The one pagination of the API's lists.

A paged list is still the JSON array it always was (so ``GET /api/v1/audit/`` and
``GET /api/v1/releases/`` answer every client as before); the paging is in the query and the
headers:

* ``?limit=`` (default 200, or the view's ``page_default``; at most 1000, more is a 400) and
  ``?offset=`` (from 0, at most 10^9);
* ``X-Total-Count``: how many objects the list has in all (with its filters);
* ``Link``: the ``next`` and ``prev`` pages' URLs (RFC 8288), each only when there is one.

A limit or an offset that is not a whole number, or past its maximum, is a 400, like any bad
query parameter (an id past a 64-bit integer too)."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter
from rest_framework.exceptions import ValidationError
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.response import Response

DEFAULT_LIMIT = 200
MAX_LIMIT = 1000
# The largest id a database row can have (a 64-bit integer): a larger one in a query or a path
# is refused before it reaches the database, whose driver would fail on it.
MAX_ID = 2**63 - 1
MAX_OFFSET = 1_000_000_000


def whole_number(request, name: str, *, maximum: int = MAX_ID) -> int | None:
    """A query parameter that must be a whole number up to ``maximum`` (None when absent): a
    400 otherwise."""
    raw = request.query_params.get(name, "").strip()
    if not raw:
        return None
    if not (raw.isascii() and raw.isdigit()):
        raise ValidationError({name: f"expected a whole number, got {raw[:40]!r}"})
    if len(raw) > len(str(maximum)) or int(raw) > maximum:
        raise ValidationError({name: f"at most {maximum:,}, got {raw[:40]}"})
    return int(raw)


class ApiPagination(LimitOffsetPagination):
    default_limit = DEFAULT_LIMIT
    max_limit = MAX_LIMIT

    def paginate_queryset(self, queryset, request, view=None):
        self.default_limit = getattr(view, "page_default", DEFAULT_LIMIT)
        return super().paginate_queryset(queryset, request, view)

    def get_limit(self, request) -> int:
        limit = whole_number(request, self.limit_query_param, maximum=MAX_LIMIT)
        return limit or self.default_limit

    def get_offset(self, request) -> int:
        return whole_number(request, self.offset_query_param, maximum=MAX_OFFSET) or 0

    def get_paginated_response(self, data) -> Response:
        links = [
            f'<{url}>; rel="{rel}"'
            for rel, url in (("next", self.get_next_link()), ("prev", self.get_previous_link()))
            if url
        ]
        headers = {"X-Total-Count": str(self.count)}
        if links:
            headers["Link"] = ", ".join(links)
        return Response(data, headers=headers)


def page_parameters(default: int = DEFAULT_LIMIT) -> list[OpenApiParameter]:
    """The paging of a list in the schema: its query parameters and its response headers."""
    return [
        OpenApiParameter(
            "limit",
            {"type": "integer", "minimum": 0, "maximum": MAX_LIMIT},
            description=f"at most this many (default {default}, max {MAX_LIMIT}; 0: the default)",
        ),
        OpenApiParameter(
            "offset",
            {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET},
            description="skip this many (the `Link` header gives the next page)",
        ),
        OpenApiParameter(
            "X-Total-Count",
            OpenApiTypes.INT,
            location=OpenApiParameter.HEADER,
            response=[200],
            description="how many objects the list has in all",
        ),
        OpenApiParameter(
            "Link",
            OpenApiTypes.STR,
            location=OpenApiParameter.HEADER,
            response=[200],
            description='the next and previous pages: `<URL>; rel="next", <URL>; rel="prev"`',
        ),
    ]
