"""The release-plan page: a suggested plan from the column tags, editable as JSON, validated
before anything is launched."""

from __future__ import annotations

import functools
import json
from typing import Any

from django import forms
from django.contrib import messages
from django.core.serializers.json import DjangoJSONEncoder
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.html import _json_script_escapes, format_html  # type: ignore[attr-defined]
from django.utils.safestring import SafeString, mark_safe

from anonweb.accounts.models import Role
from anonweb.accounts.selectors import require_role
from anonweb.common.form_markup import form_fields_html
from anonweb.core.errors import CoreError, PlanError
from anonweb.core.io.jsontext import json_loads
from anonweb.core.release.plan import plan_from_json, plan_to_dict, step_kinds, step_schemas
from anonweb.core.release.policy import evaluate_plan
from anonweb.core.release.recipients import RecipientError, split_recipients
from anonweb.core.release.steps import Plan
from anonweb.datasets.selectors import dataset_get_for_user
from anonweb.datasets.storage import load_distinct_kept
from anonweb.jobs.planning import (
    EACH_ROW,
    default_unit,
    plan_privacy,
    privacy_unit,
    suggest_plan,
    unconfirmed_problems,
    unit_choices,
    unit_contributions,
    validate_web_plan,
)
from anonweb.jobs.services import anonymize_launch
from anonweb.releases.budget import check_budget, ledger_for
from anonweb.releases.gate import thresholds_for
from anonweb.releases.selectors import release_get_for_user


class SuggestForm(forms.Form):
    # Asked first, as OpenDP's DP Wizard does: every DP figure depends on who is protected.
    unit = forms.ChoiceField(
        choices=[], required=False, label="Privacy unit of DP steps: one person is"
    )
    mode = forms.ChoiceField(
        choices=[
            ("k_anonymity", "k-anonymity by optimal generalization"),
            ("dp_histogram", "Differentially private histograms"),
            ("ldp", "Local DP (randomized response) on sensitive columns"),
        ],
        initial="k_anonymity",
        required=False,
        label="Kind of release",
    )
    epsilon = forms.FloatField(
        min_value=0.001, max_value=100, initial=1.0, required=False, label="ε (DP only)"
    )
    k = forms.IntegerField(min_value=1, initial=5, label="k (smallest class)")
    suppression = forms.FloatField(
        min_value=0, max_value=0.99, initial=0.02, label="Suppression limit (fraction of rows)"
    )
    l_diversity = forms.IntegerField(
        min_value=1, required=False, label="Distinct l-diversity for sensitive columns"
    )
    metric = forms.ChoiceField(
        choices=[
            ("loss", "Loss (ARX's default)"),
            ("entropy", "Non-uniform entropy"),
            ("precision", "Precision"),
            ("height", "Generalization height"),
            ("discernibility", "Discernibility"),
            ("aecs", "Average class size"),
        ],
        initial="loss",
        required=False,
        label="Information loss to minimise",
    )
    aggregate = forms.ChoiceField(
        choices=[
            ("", "The metric's default (geometric mean for Loss)"),
            ("geometric", "Geometric mean"),
            ("arithmetic", "Arithmetic mean"),
            ("rank", "Rank (largest first)"),
            ("sum", "Sum"),
            ("max", "Maximum"),
        ],
        initial="",
        required=False,
        label="Combined over quasi-identifiers by",
    )
    identifiers = forms.ChoiceField(
        choices=[("drop", "Drop them"), ("tokenize", "Replace with keyed HMAC tokens")],
        initial="drop",
        label="Direct identifiers",
    )

    def __init__(self, *args, dataset, **kwargs):
        super().__init__(*args, **kwargs)
        unit = self.fields["unit"]
        assert isinstance(unit, forms.ChoiceField)
        unit.choices = unit_choices(dataset)
        unit.initial = default_unit(dataset) or EACH_ROW


# A plan's title until the officer writes one, by the kind of release suggested.
TITLES = {
    "k_anonymity": "k-anonymous extract",
    "dp_histogram": "Differentially private statistics",
    "ldp": "Locally differentially private extract",
}


class PlanForm(forms.Form):
    title = forms.CharField(max_length=200, initial=TITLES["k_anonymity"])
    purpose = forms.CharField(
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Why the data goes out; analysts see it where they download.",
    )
    recipient = forms.CharField(max_length=200, help_text="Who receives the release.")
    recipients = forms.CharField(
        required=False,
        max_length=4000,
        label="Recipients in the team",
        help_text="Analysts (usernames) and groups (group:NAME) of the team who may see and "
        "download the release, separated by commas. Empty: every analyst of the team receives it.",
    )
    plan = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 24, "spellcheck": "false", "class": "code"})
    )

    def __init__(self, *args, dataset, **kwargs):
        super().__init__(*args, **kwargs)
        self.dataset = dataset
        self.parsed: Plan | None = None

    def clean_plan(self):
        text = self.cleaned_data["plan"]
        try:
            plan = validate_web_plan(self.dataset, plan_to_dict(plan_from_json(text)))
        except PlanError as exc:
            raise forms.ValidationError(exc.errors) from None
        except CoreError as exc:
            raise forms.ValidationError(str(exc)) from None
        self.parsed = plan  # checked and parsed once; the page costs it from this
        return plan_to_dict(plan)


def plan_page(request, *, dataset_id: int):
    dataset = dataset_get_for_user(user=request.user, dataset_id=dataset_id)
    require_role(user=request.user, team=dataset.team, role=Role.PRIVACY_OFFICER)
    if dataset.is_purged:
        messages.error(
            request, "The raw data of this dataset has been purged; nothing can be run on it."
        )
        return redirect("datasets:detail", dataset_id=dataset.pk)
    if not dataset.is_ready:
        return redirect("datasets:detail", dataset_id=dataset.pk)
    data = request.GET.copy()
    if data and "unit" not in data:  # a link that names no unit gets the default one
        data["unit"] = default_unit(dataset) or EACH_ROW
    suggest = SuggestForm(data or None, dataset=dataset)
    options: dict[str, Any] = suggest.cleaned_data if suggest.is_valid() else {}
    chosen = options.get("unit")
    unit = privacy_unit(dataset, chosen)
    privacy = None
    current: dict = {}
    if request.method == "POST":
        form = PlanForm(request.POST, dataset=dataset)
        if form.is_valid():
            plan = current = form.cleaned_data["plan"]
            privacy = plan_privacy(form.parsed or plan)
            if "preview" not in request.POST:
                try:
                    job = anonymize_launch(
                        user=request.user,
                        dataset=dataset,
                        plan=plan,
                        title=form.cleaned_data["title"],
                        purpose=form.cleaned_data["purpose"],
                        recipient=form.cleaned_data["recipient"],
                        recipients=split_recipients(form.cleaned_data["recipients"]),
                    )
                except RecipientError as exc:
                    form.add_error("recipients", str(exc))
                except CoreError as exc:
                    form.add_error(None, str(exc))
                else:
                    messages.success(
                        request,
                        "Anonymization launched. The release appears when the job finishes.",
                    )
                    return redirect("jobs:detail", job_id=job.pk)
    else:
        # A suggestion needs only the distinct values of the tagged columns, not the table;
        # read once per column and kept, not on every view.
        needed = dict.fromkeys([*dataset.quasi_identifiers, *dataset.sensitive])
        values = load_distinct_kept(dataset.storage_key, list(needed))
        suppression = options.get("suppression")
        plan = suggest_plan(
            dataset,
            values,
            mode=options.get("mode") or "k_anonymity",
            epsilon=options.get("epsilon") or 1.0,
            k=options.get("k") or 5,
            suppression=suppression if suppression is not None else 0.02,
            l_diversity=options.get("l_diversity"),
            identifiers=options.get("identifiers") or "drop",
            metric=options.get("metric") or "loss",
            aggregate=options.get("aggregate") or None,
            unit=chosen,
        )
        picked = _plan_from_alternative(request, dataset)
        if picked is not None:
            plan = picked
        current = plan
        form = PlanForm(
            initial={
                "plan": json.dumps(plan, indent=2, ensure_ascii=False),
                "title": TITLES.get(options.get("mode") or "k_anonymity", TITLES["k_anonymity"]),
            },
            dataset=dataset,
        )

    return render(
        request,
        "jobs/plan.html",
        {
            "dataset": dataset,
            "form": form,
            "suggest": suggest,
            "suggest_html": form_fields_html(suggest),
            "kinds": step_kinds(),
            "privacy": privacy,
            "ledger": ledger_for(dataset),
            "unit": unit,
            # rows per person under that unit: a source figure, and this page is the officer's
            "contributions": unit_contributions(dataset, unit["identifier"]),
            # categories or bounds a suggestion read from the data: shown until confirmed
            "unconfirmed": unconfirmed_problems(current),
            "builder_html": builder_markup(dataset),
            "dp_mode": (options.get("mode") or "k_anonymity") != "k_anonymity",
        },
        status=400 if form.errors else 200,
    )


def plan_check(request, *, dataset_id: int):
    """Check a plan as it is typed (POST, JSON): every problem against the declared schemas and
    the dataset, with its reason, and for a plan that passes its privacy cost and the release
    gate's findings that can be judged before it runs. Nothing runs."""
    from django.http import JsonResponse

    dataset = dataset_get_for_user(user=request.user, dataset_id=dataset_id)
    require_role(user=request.user, team=dataset.team, role=Role.PRIVACY_OFFICER)
    if request.method != "POST":
        return JsonResponse({"errors": ["POST a plan"]}, status=405)
    try:
        plan = json_loads(request.body or b"null", what="the plan")
    except CoreError as exc:
        return JsonResponse({"errors": [str(exc)], "privacy": None})
    if not isinstance(plan, dict):
        return JsonResponse({"errors": ["a plan is a JSON object"], "privacy": None})
    try:
        privacy = plan_privacy(validate_web_plan(dataset, plan))
    except PlanError as exc:
        return JsonResponse({"errors": list(exc.errors), "privacy": None})
    except CoreError as exc:
        return JsonResponse({"errors": [str(exc)], "privacy": None})
    return JsonResponse(
        {
            "errors": [],
            "privacy": privacy,
            "unconfirmed": unconfirmed_problems(plan),
            "findings": plan_findings(dataset, plan),
            "budget": plan_budget(dataset, privacy["total"]),
        },
        json_dumps_params={"ensure_ascii": False},
    )


def plan_budget(dataset, cost: dict) -> dict:
    """What remains of the source's budget, and why the plan's cost would be refused at launch
    (the launch's own check, on the ledger as it stands; nothing is reserved)."""
    ledger = ledger_for(dataset)
    try:
        check_budget(ledger, cost, name=dataset.name)
    except CoreError as exc:
        return {"remaining": ledger.to_dict()["remaining"], "problem": str(exc)}
    return {"remaining": ledger.to_dict()["remaining"], "problem": None}


def plan_findings(dataset, plan: dict) -> list[dict]:
    """The release gate's findings that the plan and the tags decide before it runs (the core
    policy's own subset); the rest are measured on the release."""

    result = evaluate_plan(
        plan,
        tags=dict(dataset.tags or {}),
        columns=[c["name"] for c in dataset.columns],
        rows=dataset.rows,
        thresholds=thresholds_for(team=dataset.team),
    )
    return [f.to_dict() for f in result.findings]


@functools.cache
def _schemas_json() -> str:
    """:func:`step_schemas` as JSON, escaped as json_script escapes it: a function of the code
    alone, serialised once per process (35 kB that every view of the plan page built and
    serialised again)."""
    return json.dumps(step_schemas(), cls=DjangoJSONEncoder).translate(_json_script_escapes)


def builder_markup(dataset) -> SafeString:
    """``json_script(builder_data(dataset), "builder-data")``, the same markup, with the
    schemas' JSON serialised once (:func:`_schemas_json`): json.dumps writes a dict's items in
    order, so the whole is its parts' JSON joined, each escaped (character by character) as
    json_script escapes it."""
    data = builder_data(dataset, schemas=False)
    rest = ", ".join(
        f"{json.dumps(k)}: {json.dumps(v, cls=DjangoJSONEncoder)}" for k, v in data.items()
    )
    text = '{"schemas": ' + _schemas_json() + ", " + rest.translate(_json_script_escapes) + "}"
    return format_html(
        '<script id="{}" type="application/json">{}</script>', "builder-data", mark_safe(text)
    )


def builder_data(dataset, *, schemas: bool = True) -> dict:
    """What the plan builder's forms are made from: every declared schema, and the columns
    with their tags and types."""

    data: dict[str, Any] = {"schemas": step_schemas()} if schemas else {}
    return data | {
        "columns": [
            {
                "name": c["name"],
                "tag": dataset.tags.get(c["name"], "other"),
                "dtype": c.get("dtype", "text"),
            }
            for c in dataset.columns
        ],
        "check_url": reverse("jobs:plan_check", args=[dataset.pk]),
    }


def _plan_from_alternative(request, dataset) -> dict | None:
    """The plan of a release with its search fixed at a node picked among the search's
    alternatives (``?release=ID&levels={"age": 2, ...}``); None without those parameters."""

    release_id, raw = request.GET.get("release"), request.GET.get("levels")
    if not release_id or not raw:
        return None
    release = release_get_for_user(user=request.user, release_id=release_id)
    try:
        levels = json_loads(raw, what="the levels")
    except CoreError:
        levels = None
    plan = ((release.job.params or {}).get("plan") if release.job is not None else None) or None
    if release.dataset_id != dataset.pk or not isinstance(levels, dict) or plan is None:
        messages.error(request, "That node cannot be made into a plan for this dataset.")
        return None
    plan = json.loads(json.dumps(plan))
    for step in plan.get("steps", []):
        if step.get("kind") == "optimal_generalization":
            step.setdefault("params", {})["levels"] = levels
            for key in ("max_nodes", "time_limit"):
                step["params"].pop(key, None)
    messages.info(request, "The plan of that release, with the levels you picked fixed.")
    return plan
