"""What each job kind does. A runner gets the job and a progress callback and returns a
JSON-safe result; it raises CoreError for bad input (shown to the user as it is)."""

from __future__ import annotations

import time
from collections.abc import Callable

from anonweb.common.files import files
from anonweb.core.attacks.options import attack_options
from anonweb.core.attacks.release import attack_release, hold_out
from anonweb.core.conflicts.lineage import microaggregated
from anonweb.core.release.plan import plan_from_dict
from anonweb.core.release.publish import fresh_secrets, publish
from anonweb.core.release.report import public_plan
from anonweb.core.risk.intruder import intruder_check
from anonweb.datasets.selectors import plan_with_hierarchies
from anonweb.datasets.services import dataset_hierarchy_from_file, dataset_parse, dataset_profile
from anonweb.datasets.storage import load_frame
from anonweb.jobs.models import Job, JobKind
from anonweb.jobs.planning import check_web_plan
from anonweb.jobs.publication import release_create
from anonweb.jobs.services import JobCancelled, pending_hierarchy_name
from anonweb.releases.attacks import (
    release_attacks_run,
    release_reconstruction,
    save_control_rows,
)
from anonweb.releases.budget import charge_spend
from anonweb.releases.conflicts import release_conflict_check
from anonweb.releases.gate import gate_evaluate, thresholds_for
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
def run_anonymize(job: Job, progress: Progress) -> dict:
    """Run a release plan and publish the output as a new release awaiting approval.

    A fresh key per named secret and a fresh seed are drawn for each run and never stored, so
    tokens are stable within a release and unlinkable across releases, and nobody can replay
    the noise."""
    import secrets as pysecrets

    import numpy as np

    assert job.dataset is not None
    plan_dict = job.params["plan"]
    check_web_plan(plan_dict)
    plan = plan_from_dict(plan_with_hierarchies(dataset=job.dataset, plan=plan_dict))
    progress(5, "loading the table")
    frame = load_frame(job.dataset.storage_key)
    progress(15, f"running {len(plan.steps)} step(s)")
    keys = fresh_secrets(plan, pysecrets.token_bytes)
    rng = np.random.default_rng(pysecrets.randbits(128))

    def before_spending() -> None:
        # The reservation becomes spent before any mechanism reads the data; if it was refunded
        # meanwhile (the job was failed or cancelled), nothing is drawn.
        if not charge_spend(job_id=job.pk):
            raise JobCancelled()

    # Attack evaluation: the control is held out at random before the plan runs, so it is
    # people of the same population who are not in the release.
    options = attack_options(plan_dict["attacks"]) if plan_dict.get("attacks") else None
    whole = frame
    frame, control, kept = hold_out(whole, options, rng=rng)

    def step_progress(fraction: float, what: str) -> None:
        progress(15 + int(60 * fraction), what)

    made = publish(
        frame,
        plan,
        rng=rng,
        secrets=keys,
        before_spending=before_spending,
        progress=step_progress,
    )
    report_dict, published, output = made.report, made.published, made.frame
    thresholds = thresholds_for(team=job.dataset.team)
    released = made.aligned if made.aligned is not None else output
    # The lineage names rows of the whole source, as every other release's does.
    source_rows = made.source_rows if kept is None else _whole_rows(made.source_rows, kept)
    aggregates: tuple = ()
    dp = not _row_preserving(plan_dict)
    if not dp and made.aligned is not None:
        aligned = made.aligned
        intruder = _intruder(frame, aligned, plan_dict, rng)
        if intruder is not None:
            progress(75, "verifying the perturbation against a maximum-knowledge intruder")
            report_dict["intruder"] = intruder
        # The lineage: which source record each row is, and the means microaggregation published.
        aggregates = microaggregated(
            whole,
            aligned,
            np.arange(len(aligned)) if kept is None else kept,
            columns=_microaggregated_columns(plan_dict),
            label="this release",
        )
    if made.source_rows is not None or _synthetic(plan_dict):
        progress(77, "attacking the release: linkage, inference, singling out, membership")
        report_dict["attacks"] = attack_release(
            frame,
            output,
            known=(options.known if options and options.known else None)
            or [*plan.quasi_identifiers, *job.dataset.quasi_identifiers],
            sensitive=(options.sensitive if options and options.sensitive else None)
            or [*plan.sensitive, *job.dataset.sensitive],
            control=control,
            lineage=made.source_rows,
            targets=options.targets if options else 2000,
            rng=rng,
        )
    progress(79, "reconstructing values from the aggregates of every live release of the source")
    report_dict["reconstruction"] = release_reconstruction(
        dataset=job.dataset, source=whole, new=aggregates, new_dp=dp
    )
    conflicts = None
    if dp or source_rows is not None:
        progress(80, "checking for conflicts with earlier releases")
        conflicts = release_conflict_check(
            dataset=job.dataset,
            source=whole,
            plan=plan_dict,
            frame=output if source_rows is not None else None,
            rows=source_rows,
            aggregates=aggregates,
            dp=dp,
            k=thresholds.k,
            l=thresholds.l,
        )
    progress(82, "checking the release against the team's release policy")
    gate = gate_evaluate(
        dataset=job.dataset,
        source=frame,
        released=released,
        plan=plan_dict,
        published_report=published,
        internal_report=report_dict,
        thresholds=thresholds,
        conflicts=conflicts.gate_findings() if conflicts is not None else (),
        attacks=report_dict.get("attacks"),
    )
    progress(85, "writing the release and measuring its utility")
    release = release_create(
        job=job,
        frame=output,
        plan=public_plan(plan_dict),
        report=report_dict,
        title=job.params.get("title") or "release",
        source_rows=source_rows,
        aggregates=aggregates,
        dp=dp,
        conflicts=conflicts,
        published_report=published,
        gate=gate.to_dict(),
        purpose=job.params.get("purpose", ""),
        recipient=job.params.get("recipient", ""),
        recipients=job.params.get("recipients") or [],
        source=frame,
    )
    if kept is not None:
        save_control_rows(release=release, control_rows=np.setdiff1d(np.arange(len(whole)), kept))
    return {"release_id": release.pk, "version": release.version, "rows": release.rows}


# Steps that perturb numeric values; their output is checked by record linkage (seed 003).
PERTURBING_STEPS = {
    "add_noise",
    "multiplicative_noise",
    "rank_swap",
    "microaggregation",
    "shuffle",
    "ldp_laplace",
}


def _intruder(source, aligned, plan_dict: dict, rng) -> dict | None:
    """Maximum-knowledge intruder check on the numeric columns the plan perturbed, if any."""
    import pandas as pd

    columns: list[str] = []
    for step in plan_dict.get("steps", []):
        if step.get("kind") in PERTURBING_STEPS:
            params = step.get("params", {})
            columns += list(params.get("columns") or []) + (
                [params["column"]] if params.get("column") else []
            )
    columns = [
        c
        for c in dict.fromkeys(columns)
        if c in aligned.columns
        and pd.api.types.is_numeric_dtype(source[c])
        and pd.api.types.is_numeric_dtype(aligned[c])
    ]
    if not columns or len(source) < 20:
        return None
    return intruder_check(source, aligned, columns=columns, rng=rng).to_dict()


def _microaggregated_columns(plan_dict: dict) -> list[str]:
    return [
        c
        for step in plan_dict.get("steps", [])
        if step.get("kind") == "microaggregation"
        for c in step.get("params", {}).get("columns") or []
    ]


# Steps whose output rows are not the source's rows (aggregates, synthetic records).
ROW_CHANGING_STEPS = {"dp_release", "dp_synthetic"}


def _synthetic(plan_dict: dict) -> bool:
    return any(step.get("kind") == "dp_synthetic" for step in plan_dict.get("steps", []))


def _whole_rows(rows, kept):
    """Rows of the records the plan ran on, as rows of the whole source."""
    return None if rows is None else kept[rows]


def _row_preserving(plan_dict: dict) -> bool:
    return not any(step.get("kind") in ROW_CHANGING_STEPS for step in plan_dict.get("steps", []))
