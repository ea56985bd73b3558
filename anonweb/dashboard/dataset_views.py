"""The pages of a dataset that reach past the datasets app: uploading (a job reads the file),
the dataset page (its parse and profile jobs, its releases and budget ledger), a risk
assessment and a large hierarchy (jobs), the privacy budget (the releases' ledger) and the
purge (which scrubs jobs and releases too). They sit above the apps they read, as the home page
does; ``anonweb/urls.py`` serves them under the ``datasets`` namespace with the datasets app's
own pages, at the same addresses."""

from dataclasses import asdict

from django.conf import settings
from django.contrib import messages
from django.middleware.csrf import get_token
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from anonweb.accounts.models import Role
from anonweb.accounts.selectors import raw_value_teams, teams_where, user_has_role
from anonweb.common.charts import kept_body, state_digest, view_key, view_kind
from anonweb.core.errors import CoreError
from anonweb.dashboard.dataset_forms import TagForm, UploadForm
from anonweb.datasets.models import Dataset
from anonweb.datasets.selectors import (
    can_see_raw,
    dataset_error_for,
    dataset_get_for_user,
    hierarchies_for,
)
from anonweb.datasets.services import dataset_set_tags, survey_params
from anonweb.datasets.storage import kept_view, load_head_kept
from anonweb.datasets.uploads import upload_refused
from anonweb.jobs.models import JobKind
from anonweb.jobs.profile_page import profile_section
from anonweb.jobs.retention import dataset_purge
from anonweb.jobs.selectors import latest_profile, parse_job
from anonweb.jobs.services import dataset_upload as upload_and_read
from anonweb.jobs.services import hierarchy_upload, job_create
from anonweb.releases.budget import budget_set, ledger_for
from anonweb.releases.selectors import releases_for_user

PREVIEW_ROWS = 20


def dataset_upload(request):
    teams = teams_where(user=request.user, role=Role.PRIVACY_OFFICER)
    if not teams.exists():
        messages.error(request, "Uploading needs the privacy officer role in a team.")
        return redirect("datasets:list")
    form = UploadForm(request.POST or None, request.FILES or None, teams=teams)
    refused = upload_refused(request) if request.method == "POST" else None
    if refused:
        form.is_valid()
        form.errors.clear()
        form.add_error("file", refused)
    elif request.method == "POST" and form.is_valid():
        try:
            dataset, _job = upload_and_read(
                user=request.user,
                team=form.cleaned_data["team"],
                upload=form.cleaned_data["file"],
                name=form.cleaned_data["name"],
                description=form.cleaned_data["description"],
                sep=form.cleaned_data["separator"] or None,
                sheet=form.cleaned_data["sheet"].strip() or None,
                decimal=form.cleaned_data["decimal"] or None,
            )
        except CoreError as exc:
            form.add_error("file", str(exc))
        else:
            messages.success(
                request, f"Uploaded {dataset.original_name}; it is being read in the background."
            )
            return redirect("datasets:detail", dataset_id=dataset.pk)
    return render(
        request,
        "datasets/upload.html",
        {"form": form, "max_upload_bytes": settings.ANONWEB_MAX_UPLOAD_BYTES},
        status=400 if form.errors else 200,
    )


def dataset_detail(request, dataset_id: int):
    dataset = dataset_get_for_user(user=request.user, dataset_id=dataset_id)
    is_officer = user_has_role(user=request.user, team=dataset.team, role=Role.PRIVACY_OFFICER)
    if not dataset.is_ready:
        return render(
            request,
            "datasets/reading.html",
            {
                "dataset": dataset,
                "is_officer": is_officer,
                "job": parse_job(dataset=dataset),
                "error": dataset_error_for(
                    dataset=dataset, officer_teams=raw_value_teams(user=request.user)
                ),
            },
        )
    form = TagForm(request.POST, dataset=dataset) if request.method == "POST" else None
    if form is not None:
        if not is_officer:
            messages.error(request, "Tagging columns needs the privacy officer role.")
            return redirect("datasets:detail", dataset_id=dataset.pk)
        if form.is_valid():
            try:
                dataset_set_tags(user=request.user, dataset=dataset, tags=form.tags())
            except CoreError as exc:
                messages.error(request, str(exc))
            else:
                messages.success(
                    request, "Column tags saved. Run a risk assessment to see their effect."
                )
            return redirect("datasets:detail", dataset_id=dataset.pk)
    preview = None
    raw = can_see_raw(user=request.user, dataset=dataset)
    if raw and not dataset.is_purged:
        # The table never changes under its key: its first rows are read and rendered once.
        preview = mark_safe(
            kept_view(
                dataset.storage_key,
                "preview-html",
                PREVIEW_ROWS,
                lambda: _preview_html(dataset.storage_key),
            )
        )
    profile_job = latest_profile(dataset=dataset, documents=False)
    # Rendered from the profile as this reader may read it, once per job and view kind (by
    # the job as it finished), and kept.
    risk_section = (
        profile_section(job=profile_job, view=view_kind(internal=raw), purged=dataset.is_purged)
        if profile_job
        else None
    )
    context = {
        "dataset": dataset,
        "hierarchies": hierarchies_for(dataset=dataset),
        "is_officer": is_officer,
        "raw": raw,
        "preview": preview,
        "ledger": ledger_for(dataset),
        # the one access rule, and the rows without their JSON documents (a list of links)
        "releases": list(
            releases_for_user(user=request.user, dataset_id=dataset.pk, documents=False)
            .select_related(None)
            .only("id", "version", "title", "status")[:20]
        ),
        "is_steward": user_has_role(user=request.user, team=dataset.team, role=Role.DATA_STEWARD),
        "profile_job": profile_job,
        "risk_section": risk_section,
        # rendered (and escaped) when built
        "risk_html": mark_safe(risk_section.html) if risk_section else "",
        "jobs": list(dataset.jobs.only("id", "dataset", "kind", "status")[:10]),
    }
    if form is None:  # a view, not a refused POST (which shows what was posted)
        context["body"] = mark_safe(_kept_body(request, context))  # escaped when built
    else:
        context.update(form=form, column_rows=_column_rows(form, context["hierarchies"]))
    return render(request, "datasets/detail.html", context)


def _column_rows(form, hierarchies) -> list:
    return [(col, field, hierarchies.get(col["name"])) for col, field in form.rows()]


def _kept_body(request, context) -> str:
    """The page's content, kept under everything it shows: the dataset's row (its columns,
    tags, state and dates) and team name, what the reader's roles allow (tagging, the raw
    rows, the budget), the current hierarchies, the latest profile job (its risk section is
    kept by the job), the budget ledger, the releases and jobs listed. Any change to one of
    them is another key; the reader's roles are part of it, so what an officer is shown never
    reaches a steward. Built from the same context as the page renders it whole, but for the
    risk section and the first rows, which quote the source: marks stand for them, replaced on
    each view by their own kept entries (a purge forgets those)."""
    dataset = context["dataset"]
    job = context["profile_job"]
    raw = bool(context["preview"])
    state = {
        "dataset": {f.attname: getattr(dataset, f.attname) for f in Dataset._meta.concrete_fields},
        "team": dataset.team.name,
        "reader": [context["is_officer"], context["raw"], context["is_steward"], raw],
        # a hierarchy's digest names its table or builder (its kind: read from it on a build)
        "hierarchies": [(h.column, h.levels, h.sha256) for h in context["hierarchies"].values()],
        "profile": (job.pk, job.created_at) if job else None,
        "ledger": asdict(context["ledger"]),
        "releases": [(r.pk, r.version, r.title, r.status) for r in context["releases"]],
        "jobs": [(j.pk, j.kind, j.status) for j in context["jobs"]],
    }

    def build(csrf_mark: str) -> str:
        form = TagForm(dataset=dataset)
        page = {**context, "form": form, "column_rows": _column_rows(form, context["hierarchies"])}
        page["csrf_token"] = csrf_mark  # the body holds no part of this request
        page.update(
            risk_html=mark_safe(RISK_MARK), preview=mark_safe(PREVIEW_MARK) if raw else None
        )
        return str(render_to_string("datasets/_detail_body.html", page))

    key = view_key(
        kind="dataset",
        ident=f"{dataset.pk}.{dataset.storage_key}",
        view=view_kind(internal=context["raw"]),
        part=f"page-body:{state_digest(state)}",
    )
    body = kept_body(key, build, token=get_token(request), counter="dataset-body")
    # The parts that quote the source's records and values are kept on their own, and a purge
    # forgets them (the risk section with the profile job's, the first rows with the files):
    # the kept body holds marks where they go, never them.
    body = body.replace(RISK_MARK, context["risk_html"], 1)
    return body.replace(PREVIEW_MARK, context["preview"] or "", 1)


# Where the kept body holds the risk section and the first rows (HTML comments: no escaped text
# of the page can look like them).
RISK_MARK = "<!--kept: risk section-->"
PREVIEW_MARK = "<!--kept: first rows-->"


def _preview_html(storage_key) -> str:
    frame = load_head_kept(storage_key, PREVIEW_ROWS)
    preview = {
        "columns": list(frame.columns),
        "rows": frame.astype(object).where(frame.notna(), "").values.tolist(),
    }
    return str(render_to_string("datasets/_preview_rows.html", {"preview": preview}))


@require_POST
def dataset_assess(request, dataset_id: int):
    dataset = dataset_get_for_user(user=request.user, dataset_id=dataset_id)
    if dataset.is_purged:
        messages.error(
            request, "The raw data of this dataset has been purged; nothing can be run on it."
        )
        return redirect("datasets:detail", dataset_id=dataset.pk)
    if dataset.is_ready and not dataset.quasi_identifiers:
        messages.error(
            request,
            "No column is tagged quasi-identifier, so there is no risk to measure: tag the "
            "columns an attacker could know (age, sex, postcode, dates, ...) and save the tags.",
        )
        return redirect("datasets:detail", dataset_id=dataset.pk)
    try:
        params = survey_params(
            dataset=dataset,
            params={
                "weights": request.POST.get("weights") or None,
                "household": request.POST.get("household") or None,
                "suda2": bool(request.POST.get("suda2")),
                "suda2_max_size": request.POST.get("suda2_max_size") or None,
                "risk_method": request.POST.get("risk_method") or None,
            },
        )
        job = job_create(
            user=request.user,
            team=dataset.team,
            kind=JobKind.PROFILE,
            dataset=dataset,
            params=params,
        )
    except CoreError as exc:
        messages.error(request, str(exc))
        return redirect("datasets:detail", dataset_id=dataset.pk)
    return redirect("jobs:detail", job_id=job.pk)


@require_POST
def dataset_hierarchy(request, dataset_id: int):
    dataset = dataset_get_for_user(user=request.user, dataset_id=dataset_id)
    column = request.POST.get("column", "")
    upload = request.FILES.get("file")
    if upload is None:
        messages.error(request, "Choose a hierarchy file (ARX format: value;level1;...;*).")
    else:
        try:
            job = hierarchy_upload(user=request.user, dataset=dataset, column=column, upload=upload)
        except CoreError as exc:
            messages.error(request, str(exc))
        else:
            if job is not None:
                messages.success(
                    request,
                    f"The hierarchy for {column} is large: it is being read in the background.",
                )
                return redirect("jobs:detail", job_id=job.pk)
            messages.success(request, f"Hierarchy for {column} saved.")
    return redirect("datasets:detail", dataset_id=dataset.pk)


@require_POST
def dataset_budget(request, dataset_id: int):
    dataset = dataset_get_for_user(user=request.user, dataset_id=dataset_id)
    epsilon = request.POST.get("epsilon", "").strip()
    delta = request.POST.get("delta", "").strip()
    try:
        budget_set(user=request.user, dataset=dataset, epsilon=epsilon, delta=delta)
    except CoreError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request,
            f"Privacy budget set to ε = {epsilon}" + (f", δ = {delta}." if delta else ".")
            if epsilon
            else "Privacy budget removed: no differentially private release can run.",
        )
    return redirect("datasets:detail", dataset_id=dataset.pk)


@require_POST
def dataset_purge_view(request, dataset_id: int):
    dataset = dataset_get_for_user(user=request.user, dataset_id=dataset_id)
    if request.POST.get("confirm", "").strip() != dataset.name:
        messages.error(
            request, "Type the dataset's name to confirm that its raw data is to be deleted."
        )
        return redirect("datasets:detail", dataset_id=dataset.pk)
    try:
        dataset_purge(
            user=request.user,
            dataset=dataset,
            reason=request.POST.get("reason", "") or "purged by a privacy officer",
        )
    except CoreError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request, "The raw data was deleted. Metadata, the audit trail and releases remain."
        )
    return redirect("datasets:detail", dataset_id=dataset.pk)
