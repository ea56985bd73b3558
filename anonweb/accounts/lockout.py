"""The answer to a refused login (django-axes calls it: ``AXES_LOCKOUT_CALLABLE``): the lockout
page, or JSON for the API and scripts, each with ``Retry-After`` giving the seconds until the
lock lifts (the cool-off restarts with each refused try)."""

from __future__ import annotations

import datetime as dt

from axes.helpers import get_client_username, get_cool_off, get_failure_limit
from django.conf import settings
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render

STATUS = 429


def lockout_seconds(request=None) -> int:
    cool_off = get_cool_off(request)
    return int(cool_off.total_seconds()) if isinstance(cool_off, dt.timedelta) else 3600


def lockout_response(request, original_response=None, credentials=None) -> HttpResponse:
    seconds = lockout_seconds(request)
    limit = get_failure_limit(request, credentials)
    response: HttpResponse
    wants_json = request.path.startswith("/api/") or (
        request.META.get("HTTP_X_REQUESTED_WITH") == "XMLHttpRequest"
    )
    if wants_json:
        response = JsonResponse(
            {
                "error": f"too many failed logins ({limit}): logging in to this account, or from "
                f"this address, is paused; try again in {seconds} seconds"
            },
            status=STATUS,
        )
    else:
        context = {
            "failure_limit": limit,
            "username": get_client_username(request, credentials) or "",
            "cooloff_timedelta": dt.timedelta(seconds=seconds),
        }
        response = render(request, settings.AXES_LOCKOUT_TEMPLATE, context, status=STATUS)
    response["Retry-After"] = str(seconds)
    return response
