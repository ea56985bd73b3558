from django.conf import settings
from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from anonweb.accounts.models import Role
from anonweb.accounts.selectors import raw_value_teams, require_role, teams_where, user_has_role
from anonweb.common.charts import profile_risk_charts, view_kind
from anonweb.common.paging import page_of
from anonweb.core.assessment.charts import loss_chart, risk_charts
from anonweb.core.errors import CoreError
from anonweb.core.io.hierarchy import Hierarchy as CoreHierarchy
from anonweb.core.io.hierarchy_builders import (
    build_hierarchy,
    builder_schemas,
    hierarchy_spec_errors,
)
from anonweb.core.io.hierarchy_preview import hierarchy_preview
from anonweb.core.io.jsontext import json_loads
from anonweb.datasets.forms import TagForm, UploadForm
from anonweb.datasets.hierarchy_suggestion import suggest_hierarchy
from anonweb.datasets.selectors import (
    can_see_raw,
    dataset_error_for,
    dataset_get_for_user,
    datasets_for_user,
    hierarchies_for,
    hierarchy_spec,
    risk_for_user,
)
from anonweb.datasets.services import (
    dataset_discard,
    dataset_set_hierarchy_spec,
    dataset_set_population,
    dataset_set_retention,
    dataset_set_tags,
)
from anonweb.datasets.storage import load_distinct, load_head, load_value_counts
from anonweb.datasets.uploads import upload_refused
from anonweb.datasets.whatif import whatif_evaluate
from anonweb.jobs.models import JobKind
from anonweb.jobs.retention import dataset_purge
from anonweb.jobs.selectors import latest_profile, parse_job
from anonweb.jobs.services import dataset_upload as upload_and_read
from anonweb.jobs.services import hierarchy_upload, job_create
from anonweb.releases.budget import budget_set, ledger_for

PREVIEW_ROWS = 20


def dataset_list(request):
    page = page_of(request, datasets_for_user(user=request.user))
    return render(request, "datasets/list.html", {"page": page})


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
    form = TagForm(request.POST or None, dataset=dataset)
    if request.method == "POST":
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
        frame = load_head(dataset.storage_key, PREVIEW_ROWS)
        preview = {
            "columns": list(frame.columns),
            "rows": frame.astype(object).where(frame.notna(), "").values.tolist(),
        }
    profile_job = latest_profile(dataset=dataset)
    charts = risk = None
    if profile_job and profile_job.result.get("risk"):
        risk = risk_for_user(user=request.user, dataset=dataset, risk=profile_job.result["risk"])
        # Drawn from the profile as this reader may read it, once per job and view kind.
        charts = profile_risk_charts(job=profile_job, view=view_kind(internal=raw), risk=risk)

    hierarchies = hierarchies_for(dataset=dataset)
    return render(
        request,
        "datasets/detail.html",
        {
            "dataset": dataset,
            "form": form,
            "column_rows": [
                (col, field, hierarchies.get(col["name"])) for col, field in form.rows()
            ],
            "is_officer": is_officer,
            "preview": preview,
            "ledger": ledger_for(dataset),
            "releases": dataset.releases.all()[:20],
            "is_steward": user_has_role(
                user=request.user, team=dataset.team, role=Role.DATA_STEWARD
            ),
            "profile_job": profile_job,
            "risk": risk,
            "charts": charts,
            "jobs": dataset.jobs.all()[:10],
        },
    )


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
        job = job_create(
            user=request.user, team=dataset.team, kind=JobKind.PROFILE, dataset=dataset
        )
    except CoreError as exc:
        messages.error(request, str(exc))
        return redirect("datasets:detail", dataset_id=dataset.pk)
    return redirect("jobs:detail", job_id=job.pk)


@require_POST
def dataset_discard_view(request, dataset_id: int):
    dataset = dataset_get_for_user(user=request.user, dataset_id=dataset_id)
    try:
        dataset_discard(user=request.user, dataset=dataset)
    except CoreError as exc:
        messages.error(request, str(exc))
        return redirect("datasets:detail", dataset_id=dataset.pk)
    messages.success(request, f"Removed the upload {dataset.name}.")
    return redirect("datasets:list")


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
def dataset_retention(request, dataset_id: int):
    import datetime as dt

    dataset = dataset_get_for_user(user=request.user, dataset_id=dataset_id)
    raw = request.POST.get("retain_until", "").strip()
    try:
        day = dt.date.fromisoformat(raw) if raw else None
    except ValueError:
        messages.error(request, f"{raw!r} is not a date (YYYY-MM-DD).")
    else:
        try:
            dataset_set_retention(
                user=request.user,
                dataset=dataset,
                retain_until=day,
                confirm=request.POST.get("confirm", ""),
            )
        except CoreError as exc:
            messages.error(request, f"{str(exc)[0].upper()}{str(exc)[1:]}.")
        else:
            messages.success(
                request,
                f"Raw data kept until {day.isoformat()}." if day else "No retention date set.",
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


@require_POST
def dataset_population(request, dataset_id: int):
    dataset = dataset_get_for_user(user=request.user, dataset_id=dataset_id)
    raw = request.POST.get("population_size", "").replace(",", "").strip()
    try:
        size = int(raw) if raw else None
        if size is not None and size < 1:
            raise ValueError
    except ValueError:
        messages.error(request, f"{raw!r} is not a whole number of people.")
        return redirect("datasets:detail", dataset_id=dataset.pk)
    try:
        dataset_set_population(user=request.user, dataset=dataset, population_size=size)
    except CoreError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(
            request, "Population size saved. Assess the risk again to see journalist risk."
        )
    return redirect("datasets:detail", dataset_id=dataset.pk)


def dataset_whatif(request, dataset_id: int):
    """What-if, answered at once (no job): GET for level 0 everywhere, POST a JSON body
    ``{"levels": {column: level}, "suppression": fraction}``. The figures and charts of the
    records kept; example level labels (values of the source) for privacy officers only."""

    from django.http import JsonResponse

    dataset = dataset_get_for_user(user=request.user, dataset_id=dataset_id)
    if request.method not in ("GET", "POST"):
        return JsonResponse({"error": "use GET or POST"}, status=405)
    if not dataset.is_ready or dataset.is_purged:
        return JsonResponse({"error": "the raw data of this dataset is not available"}, status=409)
    body: object = {}
    if request.method == "POST":
        try:
            body = json_loads(request.body or b"{}", what="the request body")
        except CoreError as exc:
            return JsonResponse({"error": str(exc)}, status=400)
    try:
        result = whatif_evaluate(
            dataset, body, raw_labels=can_see_raw(user=request.user, dataset=dataset)
        )
    except CoreError as exc:
        return JsonResponse({"error": str(exc)}, status=400)
    charts = risk_charts(result)
    loss = loss_chart(result["loss_per_qi"], result["information_loss_measure"])
    if loss:
        charts.append(loss)
    return JsonResponse(
        {"result": result, "charts": charts}, json_dumps_params={"ensure_ascii": False}
    )


HIERARCHY_KINDS = (
    ("interval", "Intervals (numbers: width, bounds, top/bottom coding)"),
    ("grouping", "Ordered groups (consecutive values)"),
    ("categories", "Ordered categories (your order, grouped)"),
    ("mask", "Masking (characters from the right: ZIP codes)"),
    ("date", "Dates (day → month → year → decade)"),
    ("upload", "Uploaded ARX table (value;level1;…;*)"),
)


def _column_for_officer(request, dataset_id: int, column: str):
    from django.http import Http404

    dataset = dataset_get_for_user(user=request.user, dataset_id=dataset_id)
    require_role(user=request.user, team=dataset.team, role=Role.PRIVACY_OFFICER)
    if column not in dataset.column_names:
        raise Http404("No such column.")
    return dataset


def dataset_hierarchy_wizard(request, dataset_id: int, column: str):
    """A hierarchy for one column, built with a form per builder (from the builders' declared
    schemas) and previewed on this dataset before it is saved."""

    dataset = _column_for_officer(request, dataset_id, column)
    if not dataset.is_ready or dataset.is_purged:
        messages.error(request, "The raw data of this dataset is not available.")
        return redirect("datasets:detail", dataset_id=dataset.pk)
    error = None
    if request.method == "POST":
        try:
            spec = json_loads(request.POST.get("spec") or "null", what="the hierarchy")
        except CoreError:
            spec = None
        try:
            if not isinstance(spec, dict):
                raise CoreError("build a hierarchy first: the preview shows it before it is saved")
            dataset_set_hierarchy_spec(user=request.user, dataset=dataset, column=column, spec=spec)
        except CoreError as exc:
            error = str(exc)
        else:
            messages.success(request, f"Hierarchy for {column} saved.")
            return redirect("datasets:detail", dataset_id=dataset.pk)
    current = hierarchy_spec(dataset=dataset, column=column)
    distinct = load_distinct(dataset.storage_key, column)

    start = current or suggest_hierarchy(dataset, column, distinct, stored={})
    values = sorted(map(str, distinct.tolist()))
    return render(
        request,
        "datasets/hierarchy.html",
        {
            "dataset": dataset,
            "column": column,
            "kinds": HIERARCHY_KINDS,
            "wizard": {
                "schemas": builder_schemas(),
                "start": start,
                "values": values[:10_000],
                "numeric": pd_numeric(distinct),
                "preview_url": reverse("datasets:hierarchy-preview", args=[dataset.pk, column]),
            },
            "error": error,
        },
        status=400 if error else 200,
    )


def pd_numeric(series) -> bool:
    import pandas as pd

    return bool(pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series))


@require_POST
def dataset_hierarchy_preview(request, dataset_id: int, column: str):
    """Preview a hierarchy spec on the column: per level its groups and their records, and the
    values it does not cover. 400 lists every problem of the spec (its builder's schema)."""

    from django.http import JsonResponse

    dataset = _column_for_officer(request, dataset_id, column)
    try:
        spec = json_loads(request.body or b"null", what="the request body")
    except CoreError as exc:
        return JsonResponse({"errors": [str(exc)]}, status=400)
    errors = hierarchy_spec_errors(column, spec, files=False)
    if not errors and isinstance(spec, dict) and "uploaded" in spec:
        errors = ["preview a builder or rows; a stored hierarchy is shown on the dataset page"]
    if errors:
        return JsonResponse({"errors": errors}, status=400)
    try:
        values, counts, missing = load_value_counts(dataset.storage_key, column)
        if "rows" in spec:
            hierarchy = CoreHierarchy(rows=tuple(tuple(r) for r in spec["rows"]), attribute=column)
        else:
            hierarchy = build_hierarchy(spec, values)
        preview = hierarchy_preview(hierarchy, values, counts, missing=missing)
    except CoreError as exc:
        return JsonResponse({"errors": [str(exc)]}, status=400)
    return JsonResponse(preview.to_dict(), json_dumps_params={"ensure_ascii": False})
