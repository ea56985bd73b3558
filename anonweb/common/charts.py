"""Charts for pages, built once per immutable thing they show and kept in Django's cache.

A finished profile job's risk profile and a written release never change, so their plotly
figures are built on the first view and every later view reads them back: building them costs
tens of milliseconds of CPU, and digesting the data to find them again cost almost as much.

Every entry is keyed by what it shows *and* by the view kind of its reader: ``internal`` (the
team's readers who may see everything the figure can quote) or ``published`` (everyone else).
A figure built for one kind is never served to the other."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from django.core.cache import cache
from django.utils.html import format_html, json_script

from anonweb.core.assessment.charts import risk_charts

INTERNAL = "internal"
PUBLISHED = "published"
VIEWS = (INTERNAL, PUBLISHED)
# Bumped whenever what is kept changes shape: older entries are then never read again.
CHARTS_VERSION = 2
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


def cached_view(key: str, build: Callable[[], T], *, counter: str) -> T:
    """The value kept under ``key``, or ``build()`` kept there now (counted in :data:`builds`).
    A value is stored wrapped, so that a built ``None`` is kept as well."""
    found = cache.get(key)
    if isinstance(found, tuple) and len(found) == 1:
        return found[0]
    builds[counter] += 1
    value = build()
    cache.set(key, (value,), CHART_SECONDS)
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


def profile_risk_charts(*, job, view: str, risk: Mapping[str, Any]) -> list[dict[Any, Any]]:
    """The risk charts of finished profile ``job``, from ``risk`` as a reader of ``view`` may
    read it (the caller passes the matching one)."""
    ident = f"{job.pk}.{job.created_at.timestamp():.6f}"
    key = view_key(kind="profile", ident=ident, view=view, part="risk-charts")
    return cached_view(key, lambda: risk_charts(risk), counter="profile")
