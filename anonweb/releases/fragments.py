"""What a release page shows that the release alone decides, built once per release and view.

A release never changes once written: its reports, plan and files are fixed. So its charts
(plotly figure JSON: risk after, intruder test, DP intervals, the search's alternatives), the
search's alternatives and the disclosing sensitive columns are built by the job that publishes
it (:func:`release_fragments_warm`; or on the first view, if the cache lost them) and kept in
Django's cache, and every view assembles them. Building them costs figure construction, the
figures' JSON escaping and, for DP statistics, reading the released Parquet; a cached view costs
one cache read.

A page is either the *internal* view (the team's officers and stewards: the internal report,
which may describe the source) or the *published* one (everyone else: the published report,
which describes only the released data). Each view has its own key, so a fragment built for an
officer is never what an analyst receives; who gets which is decided by the caller, from the
reader's role. Nothing here depends on the live state of other releases (the gate is kept by
its own state digest in :mod:`anonweb.releases.gate`) or on the reader beyond the view kind.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.template.loader import render_to_string
from django.utils.safestring import mark_safe

from anonweb.common.charts import (
    INTERNAL,
    PUBLISHED,
    VIEWS,
    cached_view,
    charts_markup,
    kept_body,
    state_digest,
    view_key,
)
from anonweb.common.templatetags.display import as_table
from anonweb.core.assessment.charts import alternatives_chart, intruder_chart, risk_charts
from anonweb.core.dp.charts import dp_charts, needs_table
from anonweb.releases.gate import release_gate_now
from anonweb.releases.models import Release
from anonweb.releases.selectors import DOCUMENTS, report_for_view
from anonweb.releases.signoff import disclosing
from anonweb.releases.storage import formats_offered, read_release_table
from anonweb.releases.utility import release_utility_pages_warm

__all__ = [
    "INTERNAL",
    "PUBLISHED",
    "ReleaseFragments",
    "release_fragments",
    "release_fragments_warm",
    "release_published_body",
    "release_staff_body",
]

log = logging.getLogger(__name__)


def fragment_key(*, release: Release, view: str, part: str) -> str:
    """Keyed by the release's storage key as well as its id: the one is unique for ever."""
    return view_key(
        kind="release", ident=f"{release.pk}.{release.storage_key}", view=view, part=part
    )


@dataclass(frozen=True)
class ReleaseFragments:
    """The built parts of one release's page for one view."""

    view: str
    charts: list[dict[Any, Any]] | None = None
    alternatives: list[dict[str, Any]] = field(default_factory=list)
    disclosing: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    formats: list[str] = field(default_factory=list)
    # the charts' markup (figure JSON in script elements), escaped once when built
    charts_html: str = ""
    # the top of the report section (figures, tables, the charts, the alternatives) and the
    # table of what each step did, rendered once when built (escaped then)
    report_html: str = ""
    steps_html: str = ""


def release_fragments(
    *, release: Release, view: str, report: Mapping[str, Any]
) -> ReleaseFragments:
    """The page parts of ``release`` for ``view`` (``internal`` or ``published``, with the
    report of that view, as :func:`anonweb.releases.selectors.release_view_for_user` gives
    both), from the cache or built now and kept."""
    if view not in VIEWS:
        raise ValueError(f"unknown view {view!r}: {', '.join(VIEWS)}")
    key = fragment_key(release=release, view=view, part="page")
    return cached_view(key, lambda: _build(release, view, report), counter="release")


def release_fragments_warm(*, release: Release) -> None:
    """Build the page parts of a release just published, for each view kind, and the utility
    pages of its staff readers, so that no first reader pays for them; and its gate as it
    stands now (kept under the live releases' state, :func:`anonweb.releases.gate.
    release_gate_now`: it reads the source, which a page should not). The reports are read
    back from the database, as a page reads them (JSON as stored). A failure is logged and
    left to the first reader: the release is published whatever happens here."""
    try:
        stored = Release.objects.get(pk=release.pk)
        for view in VIEWS:
            release_fragments(
                release=stored, view=view, report=report_for_view(release=stored, view=view)
            )
        release_utility_pages_warm(release=stored)
        release_gate_now(release=stored)
    except Exception:
        log.warning(
            "release %s: its page fragments could not be built at publication; the first "
            "reader builds them",
            release.pk,
            exc_info=True,
        )


def _build(release: Release, view: str, report: Mapping[str, Any]) -> ReleaseFragments:
    charts: list[dict[Any, Any]] = []
    risk_after = report.get("risk_after")
    if risk_after:
        charts += risk_charts(risk_after)
    intruder = report.get("intruder")
    if intruder and not intruder.get("skipped"):
        chart = intruder_chart(intruder)
        charts += [chart] if chart else []
    charts += _dp_charts(release, report)
    # The search's other acceptable nodes describe the source: internal view only.
    alternatives = _search_alternatives(report) if view == INTERNAL else []
    if alternatives:
        chart = alternatives_chart(alternatives)
        charts += [chart] if chart else []
    charts_html = charts_markup(charts)
    # Everything the section shows is fixed by the release and the report of this view, which
    # is the internal one exactly for the team's staff.
    report_html = render_to_string(
        "releases/_report.html",
        {
            "rep": report,
            "staff": view == INTERNAL,
            "release": release,
            "charts_html": mark_safe(charts_html),  # escaped by format_html
            "alternatives": alternatives,
        },
    )
    return ReleaseFragments(
        view=view,
        charts=charts or None,
        charts_html=charts_html,
        alternatives=alternatives,
        disclosing=disclosing(dict(report)),
        formats=formats_offered(release.rows),
        report_html=str(report_html),
        steps_html=str(as_table(report.get("steps"))),
    )


def _search_alternatives(report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The nodes the search found acceptable besides its optimum (internal report only)."""
    for step in report.get("steps") or []:
        if step.get("kind") == "optimal_generalization" and step.get("alternatives"):
            return list(step["alternatives"])
    return []


def _dp_charts(release: Release, report: Mapping[str, Any]) -> list[dict[Any, Any]]:
    """Each DP statistic of the release with its 95% interval, from the released table and the
    report of the view (the published one keeps every DP step's public figures)."""
    steps = report.get("steps") or []
    table = read_release_table(release.storage_key) if needs_table(steps) else None
    return dp_charts(steps, table)


def release_published_body(
    *, release: Release, versions: Sequence[Release], build: Callable[[], str]
) -> str:
    """The whole content of ``release``'s page as a reader of the published view receives it
    (``build()`` renders it), kept under the state it shows: everything of the release row the
    page reads (its fields, plan, override, the names it joins) and the other versions this
    reader sees (the compare list), as a digest. Any change to one of them is another key, so a
    kept body is never stale; the published key is never the internal one, and the body holds
    no per-request part (a published reader gets no form that posts: no review, no link). The
    caller decides who is a published reader, from the reader's role."""
    key = fragment_key(
        release=release, view=PUBLISHED, part=f"body:{_shown_state(release, versions)}"
    )
    return cached_view(key, build, counter="release-body")


def _shown_state(release: Release, versions: Sequence[Release]) -> str:
    row = {
        f.attname: getattr(release, f.attname)
        for f in Release._meta.concrete_fields
        if f.name not in DOCUMENTS
    }
    state = {
        "row": row,
        "plan": release.plan,
        "override": release.override,
        "engine": (release.published_report or {}).get("engine"),
        "names": [
            release.team.name,
            release.dataset.name,
            release.requested_by.username if release.requested_by else None,
            release.reviewed_by.username if release.reviewed_by else None,
        ],
        "versions": [(v.pk, v.version, v.title, v.status) for v in versions],
    }
    text = json.dumps(state, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def release_staff_body(
    *,
    release: Release,
    reader: Mapping[str, Any],
    shown: Mapping[str, Any],
    versions: Sequence[Release],
    build: Callable[[str], str],
    token: str,
) -> str:
    """The content of ``release``'s page for one of its team's officers or stewards, but its
    utility section (kept apart, :mod:`anonweb.releases.utility`), kept under a digest of
    everything it shows: the release row as the published body's key has it, its recorded gate
    and checks, ``reader`` (what the reader's roles decide: officer or not, the review and link
    forms) and ``shown`` (the gate as it stands, the conflict findings with their releases'
    states, the links, the attack figures), all read on this view. Any change to one of them is
    another key, so a kept body is never stale, and the key is the internal view's, never a
    published reader's. ``build(mark)`` renders it with ``mark`` as its CSRF token; the body
    returned carries ``token``. A page that quotes the source's records (an officer's, with
    the values a conflict infers or the records an attack determines) is not kept: the caller
    renders it on each view, so that a purge leaves none of it behind."""
    state = {
        "shown": _shown_state(release, versions),
        "documents": [release.gate, release.conflicts_checked],
        "reader": reader,
        "now": shown,
    }
    key = fragment_key(release=release, view=INTERNAL, part=f"staff-body:{state_digest(state)}")
    return kept_body(key, build, token=token, counter="release-staff-body")
