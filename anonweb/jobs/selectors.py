from __future__ import annotations

from typing import TYPE_CHECKING

from django.db.models import QuerySet
from django.http import Http404

from anonweb.accounts.selectors import team_ids_where
from anonweb.datasets.selectors import STAFF_ROLES
from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.releases.selectors import DOCUMENTS

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from anonweb.datasets.models import Dataset


def jobs_for_user(
    *, user: User, dataset_id: int | None = None, status: JobStatus | None = None
) -> QuerySet[Job]:
    """The jobs of the teams where the user is an officer or a steward (an analyst sees none),
    newest first; optionally only those of one dataset, or in one state."""
    jobs = _visible(user=user)
    if dataset_id is not None:
        jobs = jobs.filter(dataset_id=dataset_id)
    if status is not None:
        jobs = jobs.filter(status=status)
    # A job's release is joined for its id: not its JSON documents (reports, plan, gate).
    return (
        jobs.select_related("team", "dataset", "created_by", "release")
        .defer(*(f"release__{name}" for name in DOCUMENTS))
        .order_by("-created_at", "-id")
    )


def _visible(*, user: User) -> QuerySet[Job]:
    """The one access rule: the jobs of the teams where the user is an officer or a steward."""
    teams = team_ids_where(user=user, roles=STAFF_ROLES)
    return Job.objects.filter(team__in=teams)


def job_status_get_for_user(*, user: User, job_id: int) -> Job:
    """A job's own row as its status poll reads it, under :func:`jobs_for_user`'s rule: nothing
    joined, no params or result (a profile's result is the whole risk profile). Pages poll it
    every few seconds while a job runs."""
    try:
        return _visible(user=user).defer("params", "result").get(pk=job_id)
    except (Job.DoesNotExist, ValueError, TypeError):
        raise Http404("No such job.") from None


def job_get_for_user(*, user: User, job_id: int) -> Job:
    try:
        return jobs_for_user(user=user).get(pk=job_id)
    except (Job.DoesNotExist, ValueError, TypeError):
        raise Http404("No such job.") from None


def latest_profile(*, dataset: Dataset, documents: bool = True) -> Job | None:
    """The dataset's newest finished profile job; with ``documents=False`` without its params
    and result (a page that shows the kept section reads neither)."""
    jobs = Job.objects.filter(dataset=dataset, kind=JobKind.PROFILE, status=JobStatus.SUCCEEDED)
    if not documents:
        jobs = jobs.defer("params", "result")
    return jobs.order_by("-finished_at", "-id").first()


def parse_job(*, dataset: Dataset) -> Job | None:
    """The job that read (or is reading) the dataset's upload."""
    return Job.objects.filter(dataset=dataset, kind=JobKind.PARSE).order_by("-id").first()


def job_error_for(*, job: Job, officer_teams: frozenset[int]) -> str:
    """The failure message of ``job`` for a reader who is a privacy officer of
    ``officer_teams`` (:func:`~anonweb.accounts.selectors.raw_value_teams`): the message as
    written for the job's officers while it is kept, the summary built from facts for everyone
    else."""
    if job.team_id in officer_teams and job.error_detail:
        return job.error_detail
    return job.error
