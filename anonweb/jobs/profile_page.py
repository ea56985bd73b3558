"""The risk section of a dataset page, built once per finished profile job and view kind.

A finished profile job's result never changes (but for a purge, which scrubs it: see below), so
what the dataset page shows of it — the figures, the sensitive columns' table, the survey
measures and the charts with their figure JSON escaped — is rendered once, by the job as it
finishes (:func:`profile_section_warm`), and kept in the shared cache; every view then reads
one string instead of parsing the job's whole result, building plotly figures and rendering
the tables again. Under fifty readers at once, building it on the first view per web process
and view kind was most of the page's CPU.

Two views, never crossed: ``internal`` for the team's privacy officers (the whole profile,
which lists records and values of the source) and ``published`` for everyone else (its public
part, :func:`anonweb.datasets.selectors.risk_for_view`). Each has its own key. A purged
dataset's section has its own key too, built from the scrubbed result, and the sections
built before the purge are dropped with the source's files (:func:`profile_sections_forget`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.core.cache import cache
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe

from anonweb.common.charts import INTERNAL, VIEWS, cached_view, charts_markup, view_key
from anonweb.core.assessment.charts import risk_charts
from anonweb.datasets.models import Dataset
from anonweb.datasets.selectors import risk_for_view
from anonweb.jobs.models import Job, JobKind, JobStatus

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProfileSection:
    """One view of a profile job's risk section: its markup and whether it draws charts (the
    page then loads plotly and the chart script)."""

    view: str
    html: str
    has_charts: bool


def _key(job: Job, *, view: str, purged: bool) -> str:
    # The creation time with the id: a database made again reuses ids, a shared cache does not
    # forget.
    ident = f"{job.pk}.{job.created_at.timestamp():.6f}"
    return view_key(
        kind="profile", ident=ident, view=view, part="risk-section" + ("-purged" if purged else "")
    )


def profile_section(*, job: Job, view: str, purged: bool) -> ProfileSection:
    """The risk section of finished profile ``job`` as a reader of ``view`` sees it on a page
    of a dataset that is (or is not) ``purged``. ``job`` may come without its result (the page
    reads it only when the section must be built)."""
    return cached_view(
        _key(job, view=view, purged=purged),
        lambda: _build(job, view=view, purged=purged),
        counter="profile",
    )


def profile_section_warm(*, job_id: int) -> None:
    """Build both views of a profile job that just succeeded, so that no reader pays for them.
    The job is read back from the database, as a page reads it. A failure is logged and left
    to the first reader: the job's outcome does not depend on it."""
    try:
        job = Job.objects.select_related("dataset").get(
            pk=job_id, kind=JobKind.PROFILE, status=JobStatus.SUCCEEDED
        )
        purged = job.dataset is not None and job.dataset.is_purged
        for view in VIEWS:
            profile_section(job=job, view=view, purged=purged)
    except Job.DoesNotExist:
        return
    except Exception:
        log.warning(
            "profile job %s: its risk section could not be built as it finished; the first "
            "reader builds it",
            job_id,
            exc_info=True,
        )


def profile_sections_forget(*, dataset: Dataset) -> None:
    """Drop the sections built before ``dataset`` was purged: the internal one quotes records
    of the source."""
    keys = [
        _key(job, view=view, purged=False)
        for job in Job.objects.filter(dataset=dataset, kind=JobKind.PROFILE).only(
            "pk", "created_at"
        )
        for view in VIEWS
    ]
    if keys:
        cache.delete_many(keys)


def _build(job: Job, *, view: str, purged: bool) -> ProfileSection:
    result = Job.objects.values_list("result", flat=True).get(pk=job.pk) or {}
    risk = risk_for_view(risk=result["risk"], view=view) if result.get("risk") else None
    charts = risk_charts(risk) if risk else []
    html = render_to_string(
        "datasets/_risk_section.html",
        {
            "profile_job": job,
            "quasi_identifiers": result.get("quasi_identifiers") or [],
            "risk": risk,
            # records and values of the source: internal view, while the source is kept
            "show_disclosing": view == INTERNAL and not purged,
            "charts_html": mark_safe(charts_markup(charts)),  # escaped by format_html
        },
    )
    return ProfileSection(view=view, html=str(html), has_charts=bool(charts))
