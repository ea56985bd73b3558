from django import forms
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import FileResponse, Http404
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from anonweb.accounts.models import Role
from anonweb.accounts.selectors import teams_for_user, user_has_role
from anonweb.common.charts import risk_charts_cached
from anonweb.common.paging import page_of
from anonweb.core.assessment.charts import alternatives_chart, intruder_chart
from anonweb.core.dp.charts import dp_charts, needs_table
from anonweb.core.errors import CoreError
from anonweb.core.release.policy import PolicyThresholds
from anonweb.releases.gate import release_gate_now, release_policy_update, thresholds_for
from anonweb.releases.models import ReleaseStatus
from anonweb.releases.selectors import (
    conflicts_for,
    release_datasets_for_user,
    release_get_downloadable,
    release_get_for_user,
    releases_for_user,
)
from anonweb.releases.services import ReleaseBlocked, ReviewError, release_record_download
from anonweb.releases.services import release_review as review
from anonweb.releases.signoff import disclosing
from anonweb.releases.storage import release_dir
from anonweb.releases.utility import release_utility_get, utility_charts_cached


def release_list(request):
    """The releases the user may see, a page at a time; optionally only those in one state or
    of one dataset (a value that names none is no filter)."""
    status = request.GET.get("status", "")
    status = status if status in ReleaseStatus.values else ""
    dataset = request.GET.get("dataset", "")
    dataset = dataset if dataset.isdigit() else ""
    releases = releases_for_user(
        user=request.user,
        status=ReleaseStatus(status) if status else None,
        dataset_id=int(dataset) if dataset else None,
    )
    return render(
        request,
        "releases/list.html",
        {
            "page": page_of(request, releases),
            "status": status,
            "dataset": dataset,
            "statuses": ReleaseStatus.choices,
            "datasets": release_datasets_for_user(user=request.user),
        },
    )


def release_detail(request, release_id: int):
    release = release_get_for_user(user=request.user, release_id=release_id)
    can_review = (
        release.status == ReleaseStatus.PENDING
        and user_has_role(user=request.user, team=release.team, role=Role.DATA_STEWARD)
        and release.requested_by_id != request.user.pk
    )
    staff = user_has_role(
        user=request.user, team=release.team, role=Role.PRIVACY_OFFICER
    ) or user_has_role(user=request.user, team=release.team, role=Role.DATA_STEWARD)
    # Analysts read the published report only: what the released data shows, nothing of the source.
    report = (release.report if staff else release.published_report) or {}
    charts = None
    risk_after = report.get("risk_after")
    if risk_after:
        charts = risk_charts_cached(risk_after)

    conflicts = conflicts_for(release=release, user=request.user) if staff else []
    # The findings as they stand now, conflicts with later releases included: what an approval
    # would be decided on.
    gate = release_gate_now(release=release) if staff else None
    intruder = report.get("intruder")
    if intruder:
        chart = intruder_chart(intruder)
        charts = (charts or []) + ([chart] if chart else [])
    dp = _dp_charts(release, report)
    if dp:
        charts = (charts or []) + dp
    # Computed from the source: officers and stewards only, never analysts.
    utility = utility_charts = None
    if staff:
        utility = release_utility_get(release=release)
        utility_charts = utility_charts_cached(utility) if utility else None
    alternatives = _search_alternatives(report) if staff else []
    if alternatives:
        chart = alternatives_chart(alternatives)
        charts = (charts or []) + ([chart] if chart else [])
    return render(
        request,
        "releases/detail.html",
        {
            "release": release,
            "report": report,
            "staff": staff,
            "can_review": can_review,
            "charts": charts,
            "gate": gate,
            "conflicts": conflicts,
            "conflicts_live": [c for c in conflicts if c["live"]],
            "checked": release.conflicts_checked if staff else None,
            "alternatives": alternatives,
            "disclosing": disclosing(report),
            "utility": utility,
            "utility_charts": utility_charts,
        },
    )


def _search_alternatives(report: dict) -> list[dict]:
    """The nodes the search found acceptable besides its optimum (internal report only)."""
    for step in report.get("steps") or []:
        if step.get("kind") == "optimal_generalization" and step.get("alternatives"):
            return list(step["alternatives"])
    return []


def _dp_charts(release, report: dict) -> list[dict]:
    """Each DP statistic of the release with its 95% interval, from the released table and the
    report the viewer may read (the published one for analysts: it keeps every DP step's public
    figures)."""

    steps = report.get("steps") or []
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
    try:
        release = review(
            user=request.user,
            release=release,
            decision=decision,
            note=request.POST.get("note", ""),
            override=request.POST.get("override", ""),
            seen=request.POST.get("gate_version", ""),
        )
    except PermissionDenied as exc:
        messages.error(request, str(exc))
        return render(request, "403.html", {"exception": str(exc)}, status=403)
    except ReleaseBlocked as exc:
        messages.error(request, str(exc))
    except ReviewError as exc:
        messages.error(request, str(exc))
    else:
        if release.status == ReleaseStatus.APPROVED:
            over = (
                " over its blocking findings (justification recorded)" if release.override else ""
            )
            messages.success(
                request,
                f"Version {release.version} approved{over}; analysts can now download it.",
            )
        else:
            messages.info(request, f"Version {release.version} rejected.")
    return redirect("releases:detail", release_id=release.pk)


def release_download(request, release_id: int):
    release = release_get_downloadable(user=request.user, release_id=release_id)
    path = release_dir(release.storage_key) / "data.csv"
    if not path.exists():
        raise Http404("The release file is missing.")
    release_record_download(user=request.user, release=release)
    filename = f"{release.dataset.name}-v{release.version}.csv".replace(" ", "_")
    return FileResponse(
        open(path, "rb"), as_attachment=True, filename=filename, content_type="text/csv"
    )


def release_signoff(request, release_id: int):
    """The sign-off report as a self-contained HTML file (officers and stewards of the team)."""
    from anonweb.releases.selectors import release_get_for_signoff
    from anonweb.releases.signoff import signoff_download

    release = release_get_for_signoff(user=request.user, release_id=release_id)
    return signoff_download(release=release, user=request.user)


class PolicyForm(forms.Form):
    k = forms.IntegerField(min_value=1, label="Smallest class (k)")
    l = forms.IntegerField(  # noqa: E741
        min_value=1, label="Distinct sensitive values per class (l; 2: none disclosed)"
    )
    t = forms.FloatField(
        required=False, min_value=0.0, max_value=1.0, label="t-closeness (blank: not checked)"
    )
    max_prosecutor_risk = forms.FloatField(
        min_value=0.0, max_value=1.0, label="Highest prosecutor risk"
    )
    max_attack_excess = forms.FloatField(
        required=False,
        min_value=0.0,
        max_value=1.0,
        label="Highest excess success of an attack over chance, e.g. 0.05 (blank: not checked)",
    )
    max_membership_auc = forms.FloatField(
        required=False,
        min_value=0.5,
        max_value=1.0,
        label="Highest membership-inference AUC, 0.5 is chance (blank: not checked)",
    )


def policy_page(request, team_id: int | None = None):
    """The team's release policy; a data steward edits it."""

    teams = list(teams_for_user(user=request.user))
    if not teams:
        raise Http404("No team.")
    team = next((t for t in teams if t.pk == team_id), None) if team_id else teams[0]
    if team is None:
        raise Http404("No such team.")
    current = thresholds_for(team=team)
    can_edit = user_has_role(user=request.user, team=team, role=Role.DATA_STEWARD)
    form = PolicyForm(request.POST or None, initial=current.to_dict())
    if request.method == "POST":
        if not can_edit:
            raise PermissionDenied("Only a data steward of the team edits its release policy.")
        if form.is_valid():
            try:
                release_policy_update(
                    user=request.user, team=team, thresholds=PolicyThresholds(**form.cleaned_data)
                )
            except CoreError as exc:
                form.add_error(None, str(exc))
            else:
                messages.success(request, f"Release policy of {team.name} saved.")
                return redirect("releases:policy_team", team_id=team.pk)
    return render(
        request,
        "releases/policy.html",
        {"team": team, "teams": teams, "form": form, "can_edit": can_edit, "current": current},
        status=400 if form.errors else 200,
    )
