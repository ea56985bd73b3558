"""Who may do what is read once per request."""

from __future__ import annotations

from anonweb.accounts.selectors import roles_read_once


class RolesOncePerRequestMiddleware:
    """A request reads each user's memberships in one query, however many selectors, views and
    templates ask about roles (:func:`anonweb.accounts.selectors.roles_by_team`)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        with roles_read_once():
            return self.get_response(request)
