"""What each job kind does. A runner gets the job and a progress callback and returns a
JSON-safe result; it raises CoreError for bad input (shown to the user as it is)."""

from __future__ import annotations

import secrets as pysecrets
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
from django.conf import settings

from anonweb.common.files import files
from anonweb.core.engine.select import choose_engine, make_engine
from anonweb.core.errors import CoreError
from anonweb.core.models.population_table import PopulationTable
from anonweb.core.release.engine_release import engine_problems, make_engine_release
from anonweb.core.release.make import make_release
from anonweb.core.release.plan import plan_from_dict
from anonweb.core.release.publish import fresh_secrets
from anonweb.core.release.report import public_plan
from anonweb.datasets.models import Dataset
from anonweb.datasets.selectors import plan_with_hierarchies
from anonweb.datasets.services import dataset_hierarchy_from_file, dataset_parse, dataset_profile
from anonweb.datasets.storage import load_frame, stored_parquet
from anonweb.jobs.models import Job, JobKind
from anonweb.jobs.planning import check_web_plan, population_dataset_for
from anonweb.jobs.publication import release_create
from anonweb.jobs.services import JobCancelled, pending_hierarchy_name
from anonweb.releases.attacks import release_attacks_run, save_control_rows
from anonweb.releases.budget import charge_spend
from anonweb.releases.conflicts import earlier_releases
from anonweb.releases.fragments import release_fragments_warm
from anonweb.releases.gate import thresholds_for
from anonweb.releases.models import Release
from anonweb.releases.utility import release_utility_measure

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


@runner(JobKind.UTILITY)
def run_utility(job: Job, progress: Progress) -> dict:
    """Measure the utility of a release an engine made; the source is read here, by the
    worker, on the engine that streams it."""
    release = Release.objects.select_related("dataset").get(pk=int(job.params["release_id"]))
    progress(5, "measuring the utility on the source")
    if not release_utility_measure(release=release):
        raise CoreError("The release's files or its source's are gone: nothing to measure.")
    return {"release_id": release.pk}


def _population(dataset: Dataset, plan: dict) -> PopulationTable | None:
    """The population dataset the plan's search names, checked again as at submission (it
    may have been deleted or purged since), read from storage."""
    population = population_dataset_for(dataset, plan)
    if population is None:
        return None
    return PopulationTable.from_frame(load_frame(population.storage_key), name=population.name)


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
    if rng is None:
        rng = np.random.default_rng(pysecrets.randbits(128))
    keys = fresh_secrets(plan, pysecrets.token_bytes, secrets)
    engine = release_engine(dataset.storage_key, plan)
    if engine is not None:
        return _anonymize_on_engine(job, plan, engine, rng=rng, progress=progress, secrets=keys)
    progress(5, "loading the table")
    table = load_frame(dataset.storage_key)
    progress(15, f"running {len(plan.steps)} step(s)")

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
        population=_population(dataset, plan_dict),
    )
    progress(85, "writing the release and measuring its utility")
    made.report["engine"] = made.published["engine"] = "pandas"
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
    return {
        "release_id": release.pk,
        "version": release.version,
        "rows": release.rows,
        "engine": "pandas",
    }


def release_engine(storage_key, plan) -> str | None:
    """The out-of-core engine a release job runs on, or None for in memory: the stored Parquet
    copy is large (``auto``) or ``ANONWEB_ENGINE`` names an engine, and every step of the plan
    runs on it. A large table with an in-memory-only step was refused at submission."""
    path, fs = stored_parquet(storage_key)
    if fs is not None:
        return None  # the engines read a local file; object storage is read into memory
    name = choose_engine(None, path)
    if name == "pandas" or engine_problems(plan, name):
        return None
    return name


def _anonymize_on_engine(
    job: Job, plan, name: str, *, rng, progress: Progress, secrets: Mapping[str, bytes]
) -> dict:
    """The release made out of core (:func:`~anonweb.core.release.engine_release.make_engine_release`):
    the engine reads the stored Parquet copy and writes the release as Parquet, from which the
    stored formats are written batch by batch, and the source row of each released row is kept
    privately beside them. The attacks run on a sample of the source read by the engine; the
    conflict check against the other live releases of the source runs out of core, joining
    their files by lineage (what it cannot count out of core blocks the release with the
    reason: see :mod:`anonweb.core.release.engine_evidence`). Its utility is measured by the
    engine at publication, from the columns' counts of both tables."""
    dataset = job.dataset
    assert dataset is not None
    path, _ = stored_parquet(dataset.storage_key)
    progress(5, f"reading the table with the {name} engine")
    engine = make_engine(name, path)
    scratch = Path(settings.MEDIA_ROOT) / "releases"
    scratch.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=scratch, prefix=".engine-"))
    try:
        made = make_engine_release(
            path,
            plan,
            engine=engine,
            out=work / "release.parquet",
            rng=rng,
            tags=dict(dataset.tags or {}),
            thresholds=thresholds_for(team=dataset.team),
            progress=lambda fraction, what: progress(5 + round(80 * fraction), what),
            secrets=secrets,
            # read once the release is written, so a release written meanwhile is counted; the
            # records of each are read from its files by the check out of core
            earlier=lambda: earlier_releases(dataset=dataset, in_memory=False),
        )
        progress(85, "writing the release")
        release = release_create(
            job=job,
            frame=Path(made.path),
            plan=public_plan(job.params["plan"]),
            report=made.report,
            title=job.params.get("title") or "release",
            published_report=made.published,
            gate=made.gate.to_dict(),
            purpose=job.params.get("purpose", ""),
            recipient=job.params.get("recipient", ""),
            recipients=job.params.get("recipients") or [],
            engine=made.engine,
            lineage_file=None if made.lineage_path is None else Path(made.lineage_path),
            conflicts=made.conflicts,
            measured_by=(engine, path),
        )
    finally:
        engine.close()
        shutil.rmtree(work, ignore_errors=True)
    # Its charts, alternatives, formats and utility pages, for each kind of reader, now: the
    # release never changes, so its first reader need not pay for them.
    release_fragments_warm(release=release)
    return {
        "release_id": release.pk,
        "version": release.version,
        "rows": release.rows,
        "engine": made.engine,
    }
