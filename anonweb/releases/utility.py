"""A release's utility (the released distributions beside the source's, the information loss per
quasi-identifier, DP figures with their intervals), for the team's officers and stewards.

It is computed from the source, so it is never part of the published report. The job that
publishes a release measures it (:func:`utility_measure_at_publication`) with the core's
:func:`~anonweb.core.utility.measures.release_utility` from the source it holds, the released
table and the private row mapping, before the release's row is committed, and keeps it beside the
lineage in the release's private folder (never served), since neither file changes. A release an
out-of-core engine made is measured by that engine at publication
(:func:`utility_measure_on_engine`, the core's
:func:`~anonweb.core.utility.measures.engine_release_utility`: the same measures from the
columns' counts, neither table read into memory). A release published without it (before it
was measured at publication, or when that failed) gets it from its first staff reader,
computed the same way from the stored source; for a release an engine made, by a job
(:func:`release_utility_measure`, started from the page, which shows it pending meanwhile:
:func:`utility_waits_for_job`), never in the request, since the engine ``ANONWEB_ENGINE``
picks for a large stored source may be Spark, whose session a web request must not start. It quotes the source, so it goes
when the source is purged
(:func:`anonweb.releases.source_figures.release_source_figures_forget`)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pandas as pd
from django.core.cache import cache
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe

from anonweb.accounts.selectors import may_see_raw_values
from anonweb.common.charts import INTERNAL, cached_view, charts_markup, view_key
from anonweb.common.files import files
from anonweb.core.engine.base import Engine
from anonweb.core.engine.select import choose_engine, make_engine
from anonweb.core.errors import CoreError
from anonweb.core.io.hierarchy_builders import resolve_hierarchies
from anonweb.core.raw_values import public_utility
from anonweb.core.release.plan import plan_from_dict
from anonweb.core.utility.charts import utility_charts
from anonweb.core.utility.measures import engine_release_utility, release_utility
from anonweb.datasets.storage import load_frame, stored_parquet
from anonweb.releases.models import Release
from anonweb.releases.storage import (
    SOURCE_ROWS_PARQUET,
    private_name,
    read_private_json,
    read_release_table,
    read_source_rows,
    release_object,
    write_private_json,
)

UTILITY_FILE = "utility.json"
# Bumped when the stored figures change shape, so that older files are computed again.
UTILITY_VERSION = 2

log = logging.getLogger(__name__)


def release_utility_read(*, user, release: Release) -> dict[str, Any] | None:
    """The utility of ``release`` as ``user`` (one of its team's officers or stewards, checked
    by the caller) may read it: whole for the team's privacy officers; for everyone else
    without the source's own labels (:func:`~anonweb.core.raw_values.public_utility`: a token
    column's source names, say). The pages and the API read it here."""
    return _utility_for(release, raw=may_see_raw_values(user=user, team=release.team))


def _utility_for(release: Release, *, raw: bool) -> dict[str, Any] | None:
    utility = release_utility_get(release=release)
    if utility is None or raw:
        return utility
    return public_utility(utility)


def release_utility_get(*, release: Release) -> dict[str, Any] | None:
    """The stored utility (measured when the release was published), else computed and stored
    now; None while it waits for its job (:func:`utility_waits_for_job`). The caller checks
    the reader."""
    stored = _stored(release)
    if stored is not None or _made_by_engine(release):
        return stored
    utility = _compute(release)
    if utility is not None:
        _store(release, utility)
    return utility


def _made_by_engine(release: Release) -> bool:
    return (release.published_report or {}).get("engine", "pandas") != "pandas"


def utility_waits_for_job(*, release: Release) -> bool:
    """Whether the utility of ``release`` is not measured yet and is measured by a job only
    (:func:`release_utility_measure`): a release an out-of-core engine made, whose measure
    reads the source on an engine (a Spark session, possibly), never in a web request."""
    return _made_by_engine(release) and _stored(release) is None


def release_utility_measure(*, release: Release) -> bool:
    """Measure and store the utility of ``release`` now (the job's work), on the engine that
    reads its stored source out of core, else in memory; then build its pages. Returns
    whether it was stored (False when the release's or the source's files are gone)."""
    if _stored(release) is not None:
        return True
    utility = _compute(release)
    if utility is None:
        return False
    _store(release, utility)
    # the pages kept while it was pending showed no figures
    cache.delete_many([_utility_key(release, raw=True), _utility_key(release, raw=False)])
    release_utility_pages_warm(release=release)
    return True


def _stored(release: Release) -> dict[str, Any] | None:
    stored = read_private_json(release.storage_key, UTILITY_FILE)
    if isinstance(stored, dict) and stored.get("version") == UTILITY_VERSION:
        return stored["utility"]
    return None


def utility_measure_at_publication(*, release: Release, source: pd.DataFrame) -> bool:
    """Measure and store the utility of ``release`` while it is being published: its files are
    written and its row not yet committed, so nobody can read it yet. ``source`` is the table
    the job read (the dataset's stored source). The plan and report are read as the row will
    hold them (JSON), so the figures are those the first reader would compute.

    A failure never stops the publication: it is logged as a warning, no file of it is left (the
    file is written under a hidden name and renamed), and the first staff reader computes the
    utility instead. Returns whether
    it was stored."""
    try:
        as_stored = json.loads(json.dumps({"plan": release.plan, "report": release.report}))
        utility = _compute(
            release, source=source, plan=as_stored["plan"], report=as_stored["report"]
        )
        if utility is None:
            raise FileNotFoundError("the released table is not in the release's folder")
        _store(release, utility)
    except Exception:
        log.warning(
            "release %s of dataset %s: its utility could not be measured at publication; the "
            "first staff reader will compute it",
            release.storage_key,
            release.dataset_id,
            exc_info=True,
        )
        return False
    return True


def utility_measure_on_engine(
    *,
    release: Release,
    engine: Engine,
    source: str | Path,
    released: str | Path,
    lineage: str | Path | None = None,
) -> bool:
    """Measure and store the utility of ``release`` while it is being published, as
    :func:`utility_measure_at_publication` does, for a release ``engine`` wrote out of core:
    ``source`` is the table it read, ``released`` the Parquet it wrote and ``lineage`` the
    source row of each of its rows (local files; with it the cells changed are counted). A
    failure never stops the publication (logged; the release page then offers a job that
    measures it: :func:`utility_waits_for_job`)."""
    try:
        as_stored = json.loads(json.dumps({"plan": release.plan, "report": release.report}))
        utility = _engine_utility(
            engine, source, released, as_stored["plan"], as_stored["report"], lineage
        )
        _store(release, utility)
    except Exception:
        log.warning(
            "release %s of dataset %s: its utility could not be measured on the %s engine at "
            "publication; the first staff reader will compute it",
            release.storage_key,
            release.dataset_id,
            engine.name,
            exc_info=True,
        )
        return False
    return True


def _engine_utility(
    engine: Engine,
    source: str | Path,
    released: str | Path,
    plan: dict | None,
    report: dict,
    lineage: str | Path | None = None,
) -> dict[str, Any]:
    try:
        plan_obj = plan_from_dict(plan) if plan else None
    except CoreError:
        plan_obj = None
    # an engine runs the search, whose loss is in its report: no hierarchy is rebuilt
    return engine_release_utility(
        engine,
        source,
        released,
        report=report or {},
        plan=plan_obj,
        lineage=None if lineage is None else str(lineage),
    ).to_dict()


def _compute_on_engine(release: Release, plan: dict | None, report: dict) -> dict[str, Any] | None:
    """The utility of a release made out of core, measured by the engine that would read its
    stored source, when that is a streaming engine and both tables are local files; None
    otherwise (the caller reads them into memory)."""
    try:
        source, fs = stored_parquet(release.dataset.storage_key)
    except (FileNotFoundError, CoreError):
        return None
    name = release_object(release.storage_key, "data.parquet")
    if fs is not None or not files().exists(name):
        return None
    released, released_fs = files().arrow_location(name)
    chosen = choose_engine(None, source)
    if released_fs is not None or chosen == "pandas":
        return None
    lineage = None
    rows_name = private_name(release.storage_key, SOURCE_ROWS_PARQUET)
    if files().exists(rows_name):
        rows_path, rows_fs = files().arrow_location(rows_name)
        lineage = rows_path if rows_fs is None else None
    engine = make_engine(chosen, source)
    try:
        return _engine_utility(engine, source, released, plan, report, lineage)
    finally:
        engine.close()


def _store(release: Release, utility: dict[str, Any]) -> None:
    write_private_json(
        release.storage_key, UTILITY_FILE, {"version": UTILITY_VERSION, "utility": utility}
    )


def _compute(
    release: Release,
    *,
    source: pd.DataFrame | None = None,
    plan: dict | None = None,
    report: dict | None = None,
) -> dict[str, Any] | None:
    """The utility of ``release`` from its stored files and ``source`` (read from the dataset's
    storage when not given); its plan and report unless others are given."""

    if source is None and (release.published_report or {}).get("engine", "pandas") != "pandas":
        measured = _compute_on_engine(
            release,
            release.plan if plan is None else plan,
            release.report if report is None else report,
        )
        if measured is not None:
            return measured
    released = read_release_table(release.storage_key)
    if released is None:
        return None
    if source is None:
        try:
            source = load_frame(release.dataset.storage_key)
        except (FileNotFoundError, CoreError):
            return None
    plan = release.plan if plan is None else plan
    report = release.report if report is None else report
    source_rows = read_source_rows(release.storage_key)
    if source_rows is not None and (len(source_rows) != len(released) or len(source) == 0):
        source_rows = None
    try:
        plan_obj = plan_from_dict(plan) if plan else None
    except CoreError:
        plan_obj = None
    hierarchies = _hierarchies(plan or {}, source)
    result = release_utility(
        source,
        released,
        report=report or {},
        plan=plan_obj,
        hierarchies=hierarchies,
        source_rows=source_rows,
    )
    return result.to_dict()


def _hierarchies(plan: dict, source: pd.DataFrame) -> dict:
    """The plan's hierarchies that can be rebuilt: builders over the source (deterministic).
    An uploaded table is summarised in the stored plan, so its column gets no fixed-levels loss
    (a search's loss is in its report and needs none)."""

    out = {}
    for column, spec in (plan.get("hierarchies") or {}).items():
        if not isinstance(spec, dict) or "builder" not in spec or column not in source.columns:
            continue
        try:
            out.update(resolve_hierarchies({column: spec}, source))
        except CoreError:
            continue
    return out


def utility_cache_forget(*, dataset) -> None:
    """Drop the kept utility pages of every release of ``dataset`` (they quote the source's
    values and figures): called with the removal of its stored utility when the source is
    purged."""
    for release in Release.objects.filter(dataset=dataset).only("pk", "storage_key"):
        cache.delete_many([_utility_key(release, raw=True), _utility_key(release, raw=False)])


# The utility, its charts without their figures (their ids), markup apart from the section's
# (none: the charts' markup is in the section) and the page's whole utility section (markup).
UtilityPage = tuple[dict[str, Any] | None, list[dict[Any, Any]] | None, str, str]


def release_utility_page(*, user, release: Release) -> UtilityPage:
    """The utility of ``release`` as ``user`` reads it (:func:`release_utility_read`; one of
    its team's officers or stewards, checked by the caller), its charts, their markup and the
    page's section showing them (rendered once, escaped then), built
    at publication (:func:`release_utility_pages_warm`) or on the first view and kept in the
    cache: internal view only, one entry for the readers who see the source's labels and one
    for those who do not. :func:`utility_cache_forget` removes both."""
    return _utility_page(release, raw=may_see_raw_values(user=user, team=release.team))


def release_utility_pages_warm(*, release: Release) -> None:
    """Build both utility pages of a release just published (its staff readers' two kinds)
    from the utility measured at publication. If it could not be measured then, nothing is
    tried again here: its first staff reader computes it, as for an older release."""
    if _stored(release) is None:
        return
    for raw in (True, False):
        _utility_page(release, raw=raw)


def _utility_page(release: Release, *, raw: bool) -> UtilityPage:
    def build() -> UtilityPage:
        utility = _utility_for(release, raw=raw)
        charts = utility_charts(utility) if utility else None
        charts_html = charts_markup(charts, testid="utility-chart")
        # The section is a function of the utility alone (its tables and its charts' markup):
        # rendered here, with the figures, and kept beside them.
        section = (
            str(
                render_to_string(
                    "releases/_utility.html",
                    {"utility": utility, "utility_charts_html": mark_safe(charts_html)},
                )
            )
            if utility
            else ""
        )
        # What a view reads of the charts is which there are: their figures are in the
        # section's markup, and kept beside it they were most of the entry (unpickled on every
        # staff reader's view) for nothing.
        named = [{k: v for k, v in c.items() if k != "figure"} for c in charts] if charts else None
        return utility, named, "", section

    if utility_waits_for_job(release=release):  # nothing to keep until its job has run
        return None, None, "", ""
    return cached_view(_utility_key(release, raw=raw), build, counter="utility")


def _utility_key(release: Release, *, raw: bool) -> str:
    # The ident of anonweb.releases.fragments.fragment_key (which imports this module's
    # neighbours, so it cannot be imported here).
    part = "utility-raw" if raw else "utility-public"
    ident = f"{release.pk}.{release.storage_key}"
    return view_key(kind="release", ident=ident, view=INTERNAL, part=part)
