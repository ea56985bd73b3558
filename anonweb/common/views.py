from __future__ import annotations

import time

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache

from anonweb.celery import app


def _check_database() -> dict:
    start = time.perf_counter()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:
        return {"ok": False, "engine": connection.vendor, "error": type(exc).__name__}
    return {
        "ok": True,
        "engine": connection.vendor,
        "ms": round((time.perf_counter() - start) * 1000, 1),
    }


def _check_broker() -> dict:
    url = settings.CELERY_BROKER_URL
    transport = url.split("://", 1)[0]
    start = time.perf_counter()
    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
    except Exception as exc:
        return {"ok": False, "transport": transport, "error": type(exc).__name__}
    return {
        "ok": True,
        "transport": transport,
        "ms": round((time.perf_counter() - start) * 1000, 1),
    }


@login_not_required
@never_cache
def healthz(request):
    """Liveness and dependencies. 200 when the database and the broker answer, 503 otherwise.

    Anonymous callers (a load balancer) get the status alone; which database and broker run,
    and how they failed, is shown to staff only."""
    state = {"database": _check_database(), "broker": _check_broker()}
    ok = all(part["ok"] for part in state.values())
    body: dict = {"status": "ok" if ok else "degraded"}
    if request.user.is_authenticated and request.user.is_staff:
        body.update(state)
    return JsonResponse(body, status=200 if ok else 503)
