from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from anonweb.accounts.models import Role
from anonweb.accounts.selectors import user_has_role
from anonweb.releases.models import ReleaseStatus
from anonweb.releases.selectors import release_get_for_user, releases_for_user
from anonweb.releases.services import (
    ReviewError,
    release_approve,
    release_record_download,
    release_reject,
)
from anonweb.releases.storage import release_dir


def release_list(request):
    return render(request, "releases/list.html", {"releases": releases_for_user(user=request.user)})


def release_detail(request, release_id: int):
    release = release_get_for_user(user=request.user, release_id=release_id)
    can_review = (
        release.status == ReleaseStatus.PENDING
        and user_has_role(user=request.user, team=release.team, role=Role.DATA_STEWARD)
        and release.requested_by_id != request.user.pk
    )
    charts = None
    risk_after = (release.report or {}).get("risk_after")
    if risk_after:
        from anonweb.core.assessment.charts import risk_charts

        charts = risk_charts(risk_after)
    from anonweb.releases.selectors import conflicts_for

    conflicts = conflicts_for(release=release, user=request.user)
    staff = any(
        user_has_role(user=request.user, team=release.team, role=role)
        for role in (Role.PRIVACY_OFFICER, Role.DATA_STEWARD)
    )
    intruder = (release.report or {}).get("intruder")
    if intruder:
        from anonweb.core.assessment.charts import intruder_chart

        chart = intruder_chart(intruder)
        charts = (charts or []) + ([chart] if chart else [])
    dp = _dp_charts(release)
    if dp:
        charts = (charts or []) + dp
    return render(
        request,
        "releases/detail.html",
        {
            "release": release,
            "can_review": can_review,
            "charts": charts,
            "conflicts": conflicts,
            "conflicts_live": [c for c in conflicts if c["live"]],
            "checked": release.conflicts_checked if staff else None,
        },
    )


def _dp_charts(release) -> list[dict]:
    """Each DP statistic of the release with its 95% interval, from the released table."""
    from anonweb.core.dp.charts import dp_charts, needs_table

    steps = (release.report or {}).get("steps") or []
    table = None
    if needs_table(steps):
        import pandas as pd

        path = release_dir(release.storage_key) / "data.parquet"
        if path.exists():
            table = pd.read_parquet(path)
    return dp_charts(steps, table)


@require_POST
def release_review(request, release_id: int):
    release = release_get_for_user(user=request.user, release_id=release_id)
    decision = request.POST.get("decision")
    note = request.POST.get("note", "")
    try:
        if decision == "approve":
            release_approve(user=request.user, release=release, note=note)
            messages.success(
                request, f"Version {release.version} approved; analysts can now download it."
            )
        elif decision == "reject":
            release_reject(user=request.user, release=release, note=note)
            messages.info(request, f"Version {release.version} rejected.")
        else:
            messages.error(request, "Choose approve or reject.")
    except PermissionDenied as exc:
        messages.error(request, str(exc))
        return render(request, "403.html", {"exception": str(exc)}, status=403)
    except ReviewError as exc:
        messages.error(request, str(exc))
    return redirect("releases:detail", release_id=release.pk)


def release_download(request, release_id: int):
    from anonweb.releases.selectors import release_get_downloadable

    release = release_get_downloadable(user=request.user, release_id=release_id)
    path = release_dir(release.storage_key) / "data.csv"
    if not path.exists():
        raise Http404("The release file is missing.")
    release_record_download(user=request.user, release=release)
    filename = f"{release.dataset.name}-v{release.version}.csv".replace(" ", "_")
    return FileResponse(
        open(path, "rb"), as_attachment=True, filename=filename, content_type="text/csv"
    )
