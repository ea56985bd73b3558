"""Charts for pages, built once per immutable thing they show and kept in Django's cache.

A finished profile job's risk profile and a written release never change, so their plotly
figures (and a profile's whole risk section, :mod:`anonweb.jobs.profile_page`) are built when
the job finishes or on the first view, and every later view reads them back: building them costs
tens of milliseconds of CPU, and digesting the data to find them again cost almost as much.

Every entry is keyed by what it shows *and* by the view kind of its reader: ``internal`` (the
team's readers who may see everything the figure can quote) or ``published`` (everyone else).
A figure built for one kind is never served to the other."""

from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from collections.abc import Callable
from typing import TypeVar

from django.core.cache import cache
from django.utils.html import format_html, json_script

INTERNAL = "internal"
PUBLISHED = "published"
VIEWS = (INTERNAL, PUBLISHED)
# Bumped whenever what is kept changes shape: older entries are then never read again.
CHARTS_VERSION = 5
# Keys name immutable things, so an entry is never stale: the time only bounds the space taken
# by what nobody opens any more.
CHART_SECONDS = 7 * 24 * 3600

# How many times each kind of fragment was built in this process (tests and the bench read it).
builds: Counter[str] = Counter()

T = TypeVar("T")


def view_kind(*, internal: bool) -> str:
    return INTERNAL if internal else PUBLISHED


def view_key(*, kind: str, ident: str, view: str, part: str) -> str:
    """The cache key of ``part`` of the object of ``kind`` named ``ident`` as ``view`` shows it.
    ``ident`` must name the object for ever, not only its row: a database made again starts its
    ids at 1 while a shared cache still holds the old rows' entries."""
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}: {', '.join(VIEWS)}")
    return f"anonweb:{kind}:v{CHARTS_VERSION}:{ident}:{view}:{part}"


# While one request builds an entry, the others that miss it wait for it this long (polling
# the cache) instead of building it too: under load every web thread that opened the page in
# the same second built the same figures, each on the saturated cores. The lock expires on
# its own if its holder dies; a waiter that gives up builds the entry itself.
BUILD_LOCK_SECONDS = 30
BUILD_WAIT_SECONDS = 10.0
BUILD_POLL_SECONDS = 0.05


def cached_view(key: str, build: Callable[[], T], *, counter: str) -> T:
    """The value kept under ``key``, or ``build()`` kept there now (counted in :data:`builds`).
    A value is stored wrapped, so that a built ``None`` is kept as well. Only one caller at a
    time builds a missing entry (a lock in the cache); the others wait for it."""
    found = cache.get(key)
    if isinstance(found, tuple) and len(found) == 1:
        return found[0]
    lock = f"{key}:building"
    if not cache.add(lock, 1, BUILD_LOCK_SECONDS):
        deadline = time.monotonic() + BUILD_WAIT_SECONDS
        while time.monotonic() < deadline:
            time.sleep(BUILD_POLL_SECONDS)
            found = cache.get(key)
            if isinstance(found, tuple) and len(found) == 1:
                return found[0]
            if cache.get(lock) is None:  # its builder failed: build it here
                break
    try:
        builds[counter] += 1
        value = build()
        cache.set(key, (value,), CHART_SECONDS)
    finally:
        cache.delete(lock)
    return value


def charts_markup(charts, *, testid: str = "") -> str:
    """The markup of ``charts`` as a page shows them: a ``<figure>`` per chart with its figure
    JSON in a script element that ``js/charts.js`` draws. Built with the charts and kept beside
    them: serialising and escaping the figures' JSON was a fixed part of every view's time."""
    attr = format_html(' data-testid="{}"', testid) if testid else ""
    return "".join(
        format_html(
            '<figure class="chart"{}><div id="{}" class="plot"></div>{}</figure>',
            attr,
            chart["id"],
            json_script(chart["figure"], chart["data_id"]),
        )
        for chart in charts or ()
    )


# Where a kept page body holds each view's CSRF token (``{% csrf_token %}`` renders it as the
# value of this input): Django masks the token anew for every request, so a body with forms
# that post is kept with this mark and each view puts its own token in. Only a template writes
# the input with its quotes unescaped, so no text a page shows can look like it.
CSRF_MARK = "csrf-token-of-this-view"
CSRF_INPUT = 'name="csrfmiddlewaretoken" value="{}"'


def kept_body(key: str, build: Callable[[str], str], *, token: str, counter: str) -> str:
    """A page's body kept under ``key`` (:func:`cached_view`), which must name everything it
    shows; ``build(mark)`` renders it with ``mark`` as its CSRF token (render the template
    without the request, ``csrf_token`` set to ``mark``: the body then holds nothing of the
    request). The body returned carries ``token``, this view's."""
    body = cached_view(key, lambda: build(CSRF_MARK), counter=counter)
    return body.replace(CSRF_INPUT.format(CSRF_MARK), CSRF_INPUT.format(token))


def state_digest(state: object) -> str:
    """A digest of what a kept body shows (JSON of it: dates and the like as text)."""
    text = json.dumps(state, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()
