from django.core.paginator import Paginator
from django.shortcuts import render

from anonweb.releases.audit_access import audit_events_for_user


def audit_list(request):
    action = request.GET.get("action", "").strip()
    actor = request.GET.get("actor", "").strip()
    target = request.GET.get("target", "").strip()
    events = audit_events_for_user(user=request.user, action=action, actor=actor, target=target)
    page = Paginator(events, 50).get_page(request.GET.get("page"))
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
