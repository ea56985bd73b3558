"""Rows of the audit trail rendered once and kept.

Events are append-only and never change, so each one's markup in a given template is rendered
once and kept in the shared cache, keyed by the template's part and the event's hash (unique for
ever: it chains every event before it). A row shows the event as stored, the same to every
reader; which events a reader gets is the query's rule, never the cache's. A page listing
hundreds of events (the sign-off report lists every download of its release) then reads them
back in one cache call instead of rendering each event's details again."""

from __future__ import annotations

from collections.abc import Iterable

from django.core.cache import cache
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from anonweb.audit.models import AuditEvent
from anonweb.common.charts import builds

ROW_SECONDS = 7 * 24 * 3600


def event_rows_html(
    events: Iterable[AuditEvent], *, template: str, part: str, counter: str
) -> list[SafeString]:
    """The markup of each of ``events`` in ``template`` (its context: ``e``, the event), in
    their order: read back in one cache call under ``part`` and each event's hash, the missing
    ones rendered (counted in :data:`anonweb.common.charts.builds` as ``counter``) and kept."""
    events = list(events)
    keys = [f"anonweb:audit:{part}:v1:{e.hash}" for e in events]
    found = cache.get_many(keys)
    missing = {}
    for key, event in zip(keys, events, strict=True):
        if key not in found:
            builds[counter] += 1
            missing[key] = str(render_to_string(template, {"e": event}))
    if missing:
        cache.set_many(missing, ROW_SECONDS)
    return [mark_safe(found.get(key) or missing[key]) for key in keys]  # escaped when rendered
