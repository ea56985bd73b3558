from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from anonweb.accounts.models import Role
from anonweb.accounts.selectors import raw_value_teams, teams_where
from anonweb.common.paging import page_of
from anonweb.core.errors import CoreError
from anonweb.jobs.models import JobKind, JobStatus
from anonweb.jobs.plan_views import plan_check, plan_page
from anonweb.jobs.selectors import (
    job_error_for,
    job_get_for_user,
    job_status_get_for_user,
    jobs_for_user,
)
from anonweb.jobs.services import (
    job_cancel,
    job_create,
    job_public_params,
    jobs_check_queued_from_page,
    jobs_reap_stale_from_page,
    release_attacks_start,
    release_utility_start,
)

JOB_LIST_FIELDS = (
    "id",
    "kind",
    "status",
    "progress",
    "created_at",
    "dataset__name",
    "created_by__username",
)


def job_list(request):
    jobs_check_queued_from_page()  # a job listed as queued is one a worker may still take
    # The queue check's button is for privacy officers: the menu's roles (read once per
    # request, no query) say whether the reader is one in any team.
    return render(
        request,
        "jobs/list.html",
        {
            # the columns the table shows: not a job's parameters and result (a profile's is
            # the whole risk profile), nor its team's or release's row
            "page": page_of(
                request,
                jobs_for_user(user=request.user)
                .select_related(None)
                .select_related("dataset", "created_by")
                .only(*JOB_LIST_FIELDS),
            ),
        },
    )


def job_detail(request, job_id: int):
    job = job_get_for_user(user=request.user, job_id=job_id)
    if job.status == JobStatus.QUEUED:
        jobs_check_queued_from_page()
        job.refresh_from_db()
    # the parameters as the audit trail records them: no secret, seed or source value
    params = job_public_params(job.params or {})
    error = job_error_for(job=job, officer_teams=raw_value_teams(user=request.user))
    return render(request, "jobs/detail.html", {"job": job, "params": params, "error": error})


def job_status(request, job_id: int):
    job = job_status_get_for_user(user=request.user, job_id=job_id)
    # read again only if a check ran now (it may have failed this job): every few seconds a
    # running job's page polls here, and the row read above is otherwise the current one
    checked = (
        jobs_reap_stale_from_page()
        if job.status == JobStatus.RUNNING
        else jobs_check_queued_from_page()
        if job.status == JobStatus.QUEUED
        else False
    )
    if checked:
        job.refresh_from_db()
    return JsonResponse(
        {
            "id": job.pk,
            "status": job.status,
            "status_label": job.get_status_display(),
            "progress": job.progress,
            "message": job.message,
            "error": job_error_for(job=job, officer_teams=raw_value_teams(user=request.user)),
            "terminal": job.is_terminal,
            # the page shows these as the job moves on, without a reload
            "started_at": job.started_at.strftime("%H:%M:%S") if job.started_at else None,
            "worker": job.worker or None,
        }
    )


@require_POST
def job_cancel_view(request, job_id: int):
    job = job_get_for_user(user=request.user, job_id=job_id)
    job = job_cancel(user=request.user, job=job)
    messages.info(request, f"Job #{job.pk}: {job.message}.")
    return redirect("jobs:detail", job_id=job.pk)


@require_POST
def job_queue_check(request):
    """Launch a short job that only exercises the queue and a worker."""
    teams = teams_where(user=request.user, role=Role.PRIVACY_OFFICER)
    team = teams.filter(pk=request.POST.get("team")).first() or teams.first()
    if team is None:
        messages.error(request, "Launching jobs needs the privacy officer role.")
        return redirect("jobs:list")
    job = job_create(
        user=request.user, team=team, kind=JobKind.DEMO_SLEEP, params={"steps": 5, "delay": 0.4}
    )
    return redirect("jobs:detail", job_id=job.pk)


def job_plan(request, dataset_id: int):
    return plan_page(request, dataset_id=dataset_id)


def job_plan_check(request, dataset_id: int):
    return plan_check(request, dataset_id=dataset_id)


def _release_job(request, release_id: int, start) -> HttpResponse:
    """Start a job on a release with ``start`` (a service taking the user and the release's
    id) and show its page; a reader without the role gets 403, a release that cannot be
    worked on its page again with the reason."""
    try:
        job = start(user=request.user, release_id=release_id)
    except PermissionDenied as exc:
        return render(request, "403.html", {"exception": str(exc)}, status=403)
    except CoreError as exc:
        messages.error(request, str(exc))
        return redirect("releases:detail", release_id=release_id)
    return redirect("jobs:detail", job_id=job.pk)


@require_POST
def release_utility(request, release_id: int):
    """Measure the utility of a release an engine made (officers and stewards): a job, whose
    page shows its progress; served at the release's address (``releases:utility``)."""
    return _release_job(request, release_id, release_utility_start)


@require_POST
def release_attack(request, release_id: int):
    """Run the attacks on the release again (officers and stewards): a job, whose page shows
    its progress. Served at the release's address (``releases:attack``) by ``anonweb/urls.py``:
    the release page's button starts work of this app."""
    return _release_job(request, release_id, release_attacks_start)
