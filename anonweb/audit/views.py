from django.shortcuts import render

from anonweb.common.paging import page_of
from anonweb.releases.audit_access import audit_events_for_user


def audit_list(request):
    action = request.GET.get("action", "").strip()
    actor = request.GET.get("actor", "").strip()
    target = request.GET.get("target", "").strip()
    events = audit_events_for_user(user=request.user, action=action, actor=actor, target=target)
    page = page_of(request, events)
    actions = sorted(set(audit_events_for_user(user=request.user).values_list("action", flat=True)))
    return render(
        request,
        "audit/list.html",
        {
            "page": page,
            "action": action,
            "actor": actor,
            "target": target,
            "actions": actions,
        },
    )
