"""Security headers Django 5.2 does not send by itself."""

from __future__ import annotations

from django.conf import settings


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
