"""Security headers Django 5.2 does not send by itself."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpResponseBadRequest, JsonResponse


class ContentSecurityPolicyMiddleware:
    """Adds ``Content-Security-Policy`` (settings.ANONWEB_CSP) to every response that has none.

    Scripts come only from the site's own static files (no inline script, no eval), so an
    injected ``<script>`` or ``onerror=`` runs nowhere. Inline styles stay allowed: plotly
    sets chart styles at run time, and the progress bars set their width in the markup."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        policy = getattr(settings, "ANONWEB_CSP", "")
        if policy and "Content-Security-Policy" not in response:
            response["Content-Security-Policy"] = policy
        return response


def client_address(request) -> str:
    """The address logins are throttled and audited by.

    Behind the TLS proxy (``ANONWEB_BEHIND_TLS_PROXY=1``) every request comes from the proxy, so
    the address is the last entry of ``X-Forwarded-For``: the one the proxy appended. Entries
    before it are whatever the client sent and are ignored, so a client cannot pick another
    address to escape its lockout. Otherwise it is ``REMOTE_ADDR``."""
    remote = request.META.get("REMOTE_ADDR", "") or ""
    if getattr(settings, "ANONWEB_BEHIND_TLS_PROXY", False):
        forwarded = request.META.get("HTTP_X_FORWARDED_FOR", "")
        last = forwarded.split(",")[-1].strip() if forwarded else ""
        if last:
            return last[:64]
    return remote


class NulInQueryMiddleware:
    """Refuse a query string holding a NUL character with a 400 before any view reads it: no
    filter, name or id contains one, and PostgreSQL refuses it inside a query parameter, so a
    view that passed it on would answer 500. The API gets its JSON error shape."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if "\x00" in request.META.get("QUERY_STRING", "") or any(
            "\x00" in key or any("\x00" in v for v in values) for key, values in request.GET.lists()
        ):
            message = "the query string holds a NUL character, which no parameter accepts"
            if request.path.startswith("/api/"):
                return JsonResponse({"errors": [message]}, status=400)
            return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")
        return self.get_response(request)
