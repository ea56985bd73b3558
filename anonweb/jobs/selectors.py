from __future__ import annotations

from typing import TYPE_CHECKING

from django.db.models import QuerySet
from django.http import Http404

from anonweb.accounts.models import Membership
from anonweb.datasets.selectors import STAFF_ROLES
from anonweb.jobs.models import Job, JobKind, JobStatus

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from anonweb.datasets.models import Dataset


def jobs_for_user(*, user: User) -> QuerySet[Job]:
    teams = Membership.objects.filter(user=user, role__in=STAFF_ROLES).values("team")
    return Job.objects.filter(team__in=teams).select_related("team", "dataset", "created_by")


def job_get_for_user(*, user: User, job_id: int) -> Job:
    try:
        return jobs_for_user(user=user).get(pk=job_id)
    except (Job.DoesNotExist, ValueError, TypeError):
        raise Http404("No such job.") from None


def latest_profile(*, dataset: Dataset) -> Job | None:
    return (
        Job.objects.filter(dataset=dataset, kind=JobKind.PROFILE, status=JobStatus.SUCCEEDED)
        .order_by("-finished_at", "-id")
        .first()
    )


def parse_job(*, dataset: Dataset) -> Job | None:
    """The job that read (or is reading) the dataset's upload."""
    return Job.objects.filter(dataset=dataset, kind=JobKind.PARSE).order_by("-id").first()
