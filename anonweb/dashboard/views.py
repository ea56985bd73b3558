from __future__ import annotations

from typing import Any

from django.shortcuts import render

from anonweb.accounts.models import Membership
from anonweb.audit.rows import event_rows_html
from anonweb.common.paging import page_of
from anonweb.datasets.selectors import datasets_for_user
from anonweb.jobs.selectors import jobs_for_user
from anonweb.releases.audit_access import audit_events_for_user
from anonweb.releases.selectors import releases_for_user


def home(request):
    """The user's teams and their latest datasets, jobs and releases."""
    memberships = (
        Membership.objects.filter(user=request.user)
        .select_related("team")
        .only("role", "team__name")
    )
    # Each list reads the columns the page shows, under its selector's rule: the rows' JSON
    # (a job's result is a whole risk profile, a dataset's its columns' statistics) and the
    # joins the page does not show cost more than the query itself.
    context: dict[str, Any] = {
        "memberships": memberships,
        "datasets": datasets_for_user(user=request.user)
        .select_related(None)
        .select_related("team")
        .only("id", "name", "rows", "team__name")[:5],
        "jobs": jobs_for_user(user=request.user)
        .select_related(None)
        .only("id", "kind", "status")[:5],
        "releases": releases_for_user(user=request.user, documents=False)
        .select_related(None)
        .select_related("dataset")
        .only("id", "version", "status", "dataset__name")[:5],
    }
    return render(request, "home.html", context)


def audit_list(request):
    """The audit trail the user may read (who may read which event is decided with the releases
    they may read, so the page sits above both apps)."""
    action = request.GET.get("action", "").strip()
    actor = request.GET.get("actor", "").strip()
    target = request.GET.get("target", "").strip()
    events = audit_events_for_user(user=request.user, action=action, actor=actor, target=target)
    page = page_of(request, events)
    # The filter's choices: the distinct actions, as the database finds them (reading every
    # event's action to dedupe here cost a row per event on every view).
    actions = list(
        audit_events_for_user(user=request.user)
        .order_by("action")
        .values_list("action", flat=True)
        .distinct()
    )
    return render(
        request,
        "audit/list.html",
        {
            "page": page,
            "rows": audit_rows_html(page.object_list),
            "action": action,
            "actor": actor,
            "target": target,
            "actions": actions,
        },
    )


def audit_rows_html(events) -> list[str]:
    """The table rows of ``events``, in their order, each rendered once and kept
    (:mod:`anonweb.audit.rows`; counted in :data:`anonweb.common.charts.builds` as
    ``audit-row``)."""
    return list(
        event_rows_html(events, template="audit/_row.html", part="row", counter="audit-row")
    )
