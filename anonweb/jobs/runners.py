"""What each job kind does. A runner gets the job and a progress callback and returns a
JSON-safe result; it raises CoreError for bad input (shown to the user as it is)."""

from __future__ import annotations

import secrets as pysecrets
import time
from collections.abc import Callable, Mapping

import numpy as np

from anonweb.common.files import files
from anonweb.core.release.make import make_release
from anonweb.core.release.plan import plan_from_dict
from anonweb.core.release.publish import fresh_secrets
from anonweb.core.release.report import public_plan
from anonweb.datasets.selectors import plan_with_hierarchies
from anonweb.datasets.services import dataset_hierarchy_from_file, dataset_parse, dataset_profile
from anonweb.datasets.storage import load_frame
from anonweb.jobs.models import Job, JobKind
from anonweb.jobs.planning import check_web_plan
from anonweb.jobs.publication import release_create
from anonweb.jobs.services import JobCancelled, pending_hierarchy_name
from anonweb.releases.attacks import release_attacks_run, save_control_rows
from anonweb.releases.budget import charge_spend
from anonweb.releases.conflicts import earlier_releases
from anonweb.releases.fragments import release_fragments_warm
from anonweb.releases.gate import thresholds_for
from anonweb.releases.models import Release

Progress = Callable[[int, str], None]
RUNNERS: dict[str, Callable[[Job, Progress], dict]] = {}


def runner(kind: str):
    def register(fn):
        RUNNERS[kind] = fn
        return fn

    return register


@runner(JobKind.DEMO_SLEEP)
def run_demo_sleep(job: Job, progress: Progress) -> dict:
    steps = int(job.params.get("steps", 5))
    delay = float(job.params.get("delay", 0.5))
    for i in range(steps):
        time.sleep(delay)
        progress(int(100 * (i + 1) / steps), f"step {i + 1} of {steps}")
    return {"steps": steps}


@runner(JobKind.PARSE)
def run_parse(job: Job, progress: Progress) -> dict:
    assert job.dataset is not None  # parse, profile and release jobs are made for a dataset
    return dataset_parse(
        dataset=job.dataset,
        progress=progress,
        sep=job.params.get("sep"),
        decimal=job.params.get("decimal"),
    )


@runner(JobKind.HIERARCHY)
def run_hierarchy(job: Job, progress: Progress) -> dict:
    assert job.dataset is not None and job.created_by is not None
    pending = pending_hierarchy_name(job.dataset, str(job.params["file"]))
    try:
        with files().open(pending, "rb") as fh:
            raw = fh.read()
        return dataset_hierarchy_from_file(
            user=job.created_by,
            dataset=job.dataset,
            column=str(job.params["column"]),
            raw=raw,
            progress=progress,
        )
    finally:
        files().delete(pending)


@runner(JobKind.PROFILE)
def run_profile(job: Job, progress: Progress) -> dict:
    assert job.dataset is not None
    return dataset_profile(dataset=job.dataset, progress=progress, params=job.params)


@runner(JobKind.ATTACK)
def run_attack(job: Job, progress: Progress) -> dict:
    """Attack an existing release again; the source is read here, by the worker."""
    assert job.dataset is not None
    release = Release.objects.select_related("dataset").get(pk=int(job.params["release_id"]))
    progress(5, "loading the source")
    source = load_frame(job.dataset.storage_key)
    return release_attacks_run(release=release, source=source, progress=progress)


@runner(JobKind.ANONYMIZE)
def run_anonymize(
    job: Job,
    progress: Progress,
    *,
    rng: np.random.Generator | None = None,
    secrets: Mapping[str, bytes] | None = None,
) -> dict:
    """Run a release plan and publish the output as a new release awaiting approval.

    A fresh key per named secret and a fresh seed are drawn for each run and never stored, so
    tokens are stable within a release and unlinkable across releases, and nobody can replay
    the noise. ``rng`` and ``secrets`` let a test fix them; the job queue never passes them
    (:data:`RUNNERS` are called with the job and the progress callback only)."""
    assert job.dataset is not None
    dataset = job.dataset
    plan_dict = job.params["plan"]
    check_web_plan(plan_dict)
    plan = plan_from_dict(plan_with_hierarchies(dataset=dataset, plan=plan_dict))
    progress(5, "loading the table")
    table = load_frame(dataset.storage_key)
    progress(15, f"running {len(plan.steps)} step(s)")
    keys = fresh_secrets(plan, pysecrets.token_bytes, secrets)
    if rng is None:
        rng = np.random.default_rng(pysecrets.randbits(128))

    def before_spending() -> None:
        # The reservation becomes spent before any mechanism reads the data; if it was refunded
        # meanwhile (the job was failed or cancelled), nothing is drawn.
        if not charge_spend(job_id=job.pk):
            raise JobCancelled()

    def made_progress(fraction: float, what: str) -> None:
        progress(15 + round(70 * fraction), what)

    thresholds = thresholds_for(team=dataset.team)
    made = make_release(
        table,
        plan,
        rng=rng,
        secrets=keys,
        tags=dict(dataset.tags or {}),
        thresholds=thresholds,
        # read once the plan has run, so a release written meanwhile is counted
        earlier=lambda: earlier_releases(dataset=dataset),
        before_spending=before_spending,
        progress=made_progress,
    )
    progress(85, "writing the release and measuring its utility")
    release = release_create(
        job=job,
        frame=made.frame,
        plan=public_plan(plan_dict),
        report=made.report,
        title=job.params.get("title") or "release",
        source_rows=made.source_rows,
        aggregates=made.aggregates,
        dp=made.dp,
        conflicts=made.conflicts,
        published_report=made.published,
        gate=made.gate.to_dict(),
        purpose=job.params.get("purpose", ""),
        recipient=job.params.get("recipient", ""),
        recipients=job.params.get("recipients") or [],
        # the whole table: the lineage names its rows (a control held out is not in the release)
        source=table,
    )
    save_control_rows(release=release, control_rows=made.control_rows)
    # Its charts, alternatives, formats and utility pages, for each kind of reader, now: the
    # release never changes, so its first reader need not pay for them.
    release_fragments_warm(release=release)
    return {"release_id": release.pk, "version": release.version, "rows": release.rows}
