"""The pages of a dataset that read and write the datasets app alone: the list, the column
tags' companions (population, retention, what-if, hierarchy wizard), discarding an upload.

The pages that also start jobs or read releases (upload, the dataset page with its jobs, risk
and budget ledger, assessment, hierarchy upload, budget, purge) sit above both apps, in
:mod:`anonweb.dashboard.dataset_views`; ``anonweb/urls.py`` serves both under the ``datasets``
namespace."""

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from anonweb.accounts.models import Role
from anonweb.accounts.selectors import require_role
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
from anonweb.datasets.hierarchy_suggestion import suggest_hierarchy
from anonweb.datasets.selectors import (
    can_see_raw,
    dataset_get_for_user,
    datasets_for_user,
    hierarchy_spec,
)
from anonweb.datasets.services import (
    dataset_discard,
    dataset_set_hierarchy_spec,
    dataset_set_population,
    dataset_set_retention,
)
from anonweb.datasets.storage import load_distinct, load_value_counts
from anonweb.datasets.whatif import whatif_evaluate


def dataset_list(request):
    page = page_of(request, datasets_for_user(user=request.user))
    return render(request, "datasets/list.html", {"page": page})


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
