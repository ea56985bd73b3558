from __future__ import annotations

from typing import Any

from django.shortcuts import render

from anonweb.accounts.models import Membership
from anonweb.datasets.selectors import datasets_for_user
from anonweb.jobs.selectors import jobs_for_user
from anonweb.releases.selectors import releases_for_user


def home(request):
    """The user's teams and their latest datasets, jobs and releases."""
    memberships = Membership.objects.filter(user=request.user).select_related("team")
    context: dict[str, Any] = {
        "memberships": memberships,
        "datasets": datasets_for_user(user=request.user)[:5],
        "jobs": jobs_for_user(user=request.user)[:5],
        "releases": releases_for_user(user=request.user)[:5],
    }
    return render(request, "home.html", context)
