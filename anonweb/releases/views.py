from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.middleware.csrf import get_token
from django.shortcuts import redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from anonweb.accounts.models import Role
from anonweb.accounts.selectors import teams_for_user, user_has_role
from anonweb.common.form_markup import form_fields_html
from anonweb.common.paging import page_of
from anonweb.core.errors import CoreError
from anonweb.core.io.export import EXPORT_FORMATS, download_format
from anonweb.core.release.policy import PolicyThresholds
from anonweb.core.release.report import attacks_without_records
from anonweb.releases.downloads import download_response
from anonweb.releases.fragments import (
    PUBLISHED,
    release_fragments,
    release_published_body,
    release_staff_body,
)
from anonweb.releases.gate import release_policy_update, thresholds_for
from anonweb.releases.links import (
    LINK_HOURS_DEFAULT,
    LINK_HOURS_MAX,
    LinkGone,
    release_link_open,
    release_link_use,
    release_links_for,
)
from anonweb.releases.links import release_link_issue as issue_link
from anonweb.releases.models import ReleaseStatus
from anonweb.releases.selectors import (
    release_datasets_for_user,
    release_get_downloadable,
    release_get_for_user,
    release_versions_for_user,
    release_view_for_user,
    releases_for_user,
)
from anonweb.releases.services import ReleaseBlocked, ReviewError, release_record_download
from anonweb.releases.services import release_review as review


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
        documents=False,
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
    view = release_view_for_user(release=release, user=request.user)
    staff = view.staff
    can_review = (
        release.status == ReleaseStatus.PENDING
        and user_has_role(user=request.user, team=release.team, role=Role.DATA_STEWARD)
        and release.requested_by_id != request.user.pk
    )
    report = view.report
    # Charts, alternatives, formats: built once per release and view kind, never per request.
    built = release_fragments(release=release, view=view.report_name, report=report)
    conflicts = view.conflicts
    # The findings as they stand now, conflicts with later releases included: what an approval
    # would be decided on.
    gate = view.gate
    # Computed from the source: officers and stewards only, never analysts.
    utility, utility_charts, _, utility_html = view.utility_page
    charts, alternatives = built.charts, built.alternatives
    formats = [EXPORT_FORMATS[f] for f in built.formats]
    context = {
        "release": release,
        "report": report,
        "staff": staff,
        "attacks": view.attacks,
        "can_review": can_review,
        "charts": charts,
        "charts_html": mark_safe(built.charts_html),  # escaped when built
        "report_html": mark_safe(built.report_html),  # rendered when built
        "steps_html": mark_safe(built.steps_html),
        "gate": gate,
        "conflicts": conflicts,
        "conflicts_live": [c for c in conflicts if c["live"]],
        "checked": view.conflicts_checked,
        "alternatives": alternatives,
        "disclosing": built.disclosing,
        "utility": utility,
        "utility_pending": view.utility_pending,
        "utility_charts": utility_charts,
        "utility_html": mark_safe(utility_html),  # rendered (and escaped) when built
        "formats": formats,
        "links": release_links_for(release=release) if staff else [],
        "can_issue_link": release.status == ReleaseStatus.APPROVED
        and user_has_role(user=request.user, team=release.team, role=Role.DATA_STEWARD),
        "versions": release_versions_for_user(user=request.user, release=release),
    }
    if view.report_name == PUBLISHED and not can_review and not context["can_issue_link"]:
        # A reader of the published view gets no form that posts (no review, no link): the
        # page's content is the same for every such reader who sees the same versions,
        # rendered once.
        context["body"] = mark_safe(  # rendered (and escaped) when built
            release_published_body(
                release=release,
                versions=context["versions"],
                build=lambda: str(
                    render_to_string("releases/_detail_body.html", context, request=request)
                ),
            )
        )
    elif staff:
        context["body"] = mark_safe(_staff_body(request, view, context))  # escaped when built
    else:
        context.update(_link_form(formats))
    return render(request, "releases/detail.html", context)


def _link_form(formats) -> dict:
    link_form = LinkForm(formats=[f.name for f in formats])
    return {"link_form": link_form, "link_form_html": form_fields_html(link_form)}


def _staff_body(request, view, context) -> str:
    """The page's content for one of the release's team's officers and stewards: all but its
    utility section kept under everything it shows (``release_staff_body``: the gate, the
    conflicts, the links and the attack figures read on this view, what the reader's roles
    allow), then the utility section, kept on its own."""
    release = context["release"]
    gate = context["gate"]
    page = {**context, **_link_form(context["formats"]), "utility_apart": True}
    attacks = context["attacks"]
    if any("private" in c for c in context["conflicts"]) or (
        attacks and attacks != attacks_without_records(attacks)
    ):
        # An officer's page that quotes the source's records (the values a conflict lets an
        # attacker infer, the records an attack determines) is rendered on each view, never
        # kept: a purge removes the files they are read from, and nothing of them may stay.
        return str(render_to_string("releases/_detail_body.html", page, request=request)) + (
            _utility_tail(request, context)
        )

    def build(csrf_mark: str) -> str:
        # the body holds no part of this request
        return str(
            render_to_string("releases/_detail_body.html", {**page, "csrf_token": csrf_mark})
        )

    body = release_staff_body(
        release=release,
        reader={
            "officer": view.officer,
            "can_review": context["can_review"],
            "can_issue_link": context["can_issue_link"],
        },
        shown={
            "gate": {k: v for k, v in gate.to_dict().items() if k != "at"} if gate else None,
            "conflicts": [_conflict_shown(c) for c in context["conflicts"]],
            "links": [
                (
                    link.pk,
                    link.label,
                    link.format,
                    link.issued_at,
                    link.expires_at,
                    link.used_at,
                    link.issued_by.username if link.issued_by else None,
                )
                for link in context["links"]
            ],
            "attacks": attacks,
        },
        versions=context["versions"],
        build=build,
        token=get_token(request),
    )
    return body + _utility_tail(request, context)


def _utility_tail(request, context) -> str:
    if not (context["utility"] or context["utility_pending"]):
        return ""
    return str(render_to_string("releases/_utility_tail.html", context, request=request))


def _conflict_shown(entry: dict) -> dict:
    """A conflict finding as the page shows it, its releases by id, version, state and label."""
    shown = {k: v for k, v in entry.items() if k not in ("found_by", "releases")}
    shown["found_by"] = entry["found_by"].pk
    shown["releases"] = [
        (r["release"].pk, r["release"].version, r["release"].status, r["label"], r["live"])
        for r in entry["releases"]
    ]
    return shown


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
                f"Version {release.version} approved{over}; "
                + (
                    f"its recipients ({', '.join(release.recipients)}) can now download it."
                    if release.recipients
                    else "every analyst of the team can now download it."
                ),
            )
        else:
            messages.info(request, f"Version {release.version} rejected.")
    return redirect("releases:detail", release_id=release.pk)


def release_download(request, release_id: int):
    """The release's table in the format asked for (``?format=`` one of the export formats,
    CSV by default), as the API serves it."""
    release = release_get_downloadable(user=request.user, release_id=release_id, documents=False)
    try:
        fmt = download_format(request.GET.get("format"))
        response = download_response(release=release, fmt=fmt)
    except CoreError as exc:
        return render(request, "400.html", {"exception": str(exc)}, status=400)
    if request.method != "HEAD":  # a HEAD reads the headers: no file leaves, nothing to record
        release_record_download(user=request.user, release=release, fmt=fmt)
    return response


class LinkForm(forms.Form):
    label = forms.CharField(
        max_length=200, label="For", help_text="Whom the link is for (recorded in the audit trail)."
    )
    format = forms.ChoiceField(choices=[], initial="csv")
    hours = forms.IntegerField(
        min_value=1, max_value=LINK_HOURS_MAX, initial=LINK_HOURS_DEFAULT, label="Valid for (hours)"
    )

    def __init__(self, *args, formats=None, **kwargs):
        super().__init__(*args, **kwargs)
        field = self.fields["format"]
        if isinstance(field, forms.ChoiceField):
            field.choices = [(f, f) for f in (EXPORT_FORMATS if formats is None else formats)]


@require_POST
def release_link_issue(request, release_id: int):
    """A data steward issues a single-use link for a recipient outside the team; the page shows
    it once (only its hash is kept)."""
    release = release_get_for_user(user=request.user, release_id=release_id)
    form = LinkForm(request.POST)
    if not form.is_valid():
        errors = "; ".join(f"{k}: {' '.join(str(e) for e in v)}" for k, v in form.errors.items())
        return render(request, "400.html", {"exception": errors}, status=400)
    try:
        link, token = issue_link(
            user=request.user,
            release=release,
            fmt=form.cleaned_data["format"],
            label=form.cleaned_data["label"],
            hours=form.cleaned_data["hours"],
        )
    except (CoreError, ReviewError) as exc:
        return render(request, "400.html", {"exception": str(exc)}, status=400)
    url = request.build_absolute_uri(reverse("releases:link", args=[token]))
    return render(
        request, "releases/link_issued.html", {"release": release, "link": link, "url": url}
    )


@login_not_required
def release_link(request, token: str):
    """What the holder of a link sees: a button that downloads the file (a POST, so a mail
    scanner following the link does not spend it), and nothing else about the release. A used
    or expired link is refused with 410, an unknown one with 404."""
    try:
        link = release_link_open(token=token)
        if request.method != "POST":
            return render(request, "releases/link.html", {"link": link})
        response = download_response(
            release=link.release, fmt=link.format, filename=f"release-{link.pk}.{link.format}"
        )
        try:
            release_link_use(token=token)
        except BaseException:
            response.close()
            raise
        return response
    except LinkGone as exc:
        return render(request, "releases/link_gone.html", {"reason": str(exc)}, status=410)


def release_signoff(request, release_id: int):
    """The sign-off report as a self-contained HTML file (officers and stewards of the team)."""
    from anonweb.releases.selectors import release_get_for_signoff
    from anonweb.releases.signoff import signoff_download

    release = release_get_for_signoff(user=request.user, release_id=release_id)
    return signoff_download(release=release, user=request.user)


# the form's names of the policy's first thresholds (the page's POST keys since before the
# policy was a list of models), and those a policy always sets
POLICY_FIELD_NAMES = {
    ("k_anonymity", "k"): "k",
    ("distinct_l", "l"): "l",
    ("t_closeness", "t"): "t",
}
POLICY_LABELS = {
    "k": "Smallest class (k)",
    "l": "Distinct sensitive values per class (l; 2: none disclosed)",
    "t": "t-closeness (blank: not checked)",
}
POLICY_REQUIRED = {"k", "l"}


def _policy_parameters():
    """(form name, model kind, parameter, its schema) for each policy threshold the registry's
    models declare; ``sensitive`` is left out: a policy model applies to every sensitive
    column."""
    from anonweb.core.models.registry import MODELS

    for cls in MODELS:
        if not cls.policy_threshold:
            continue
        for param, schema in (cls.schema or {}).get("properties", {}).items():
            if param == "sensitive":
                continue
            name = POLICY_FIELD_NAMES.get((cls.kind, param), f"{cls.kind}__{param}")
            yield name, cls, param, schema


def _policy_field(name, cls, param, schema):
    required = name in POLICY_REQUIRED
    label = POLICY_LABELS.get(name) or (
        f"{cls.schema.get('title', cls.kind)}: {schema.get('title', param)} (blank: not checked)"
    )
    bounds = {
        "min_value": schema.get("minimum", schema.get("exclusiveMinimum")),
        "max_value": schema.get("maximum"),
    }
    if schema.get("type") == "integer":
        return forms.IntegerField(required=required, label=label, **bounds)
    if schema.get("type") == "number":
        return forms.FloatField(required=required, label=label, **bounds)
    if "x-column" in schema:  # a column the released tables carry (weights, household ids)
        return forms.CharField(required=False, label=label, max_length=300)
    choices = [("", "—")] + [(v, v) for v in schema.get("enum", ())]
    return forms.ChoiceField(required=False, choices=choices, label=label)


class PolicyForm(forms.Form):
    """The team policy: one field per parameter of each model of the registry, then the caps on
    prosecutor risk and on the attacks."""

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

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        caps = dict(self.fields)
        self.fields.clear()
        for name, cls, param, schema in _policy_parameters():
            self.fields[name] = _policy_field(name, cls, param, schema)
        self.fields.update(caps)

    @staticmethod
    def initial_for(current: PolicyThresholds) -> dict:
        """The form's values for a policy (its models that name no column)."""
        initial = current.to_dict()
        names = {(cls.kind, param): name for name, cls, param, _s in _policy_parameters()}
        for spec in current.models or ():
            if "sensitive" in spec:
                continue
            for param, value in spec.items():
                name = names.get((spec["model"], param))
                if name is not None:
                    initial[name] = value
        return initial

    def thresholds(self, current: PolicyThresholds) -> PolicyThresholds:
        """The policy the form describes; the current policy's models that name a column (set
        through the API or a plan, not this form) are kept as they are."""
        data = self.cleaned_data
        specs: dict[str, dict] = {}
        for name, cls, param, _schema in _policy_parameters():
            value = data.get(name)
            if value is None or value == "":
                continue
            specs.setdefault(cls.kind, {"model": cls.kind})[param] = value
        kept = [dict(s) for s in current.models or () if "sensitive" in s]
        return PolicyThresholds(
            max_prosecutor_risk=data["max_prosecutor_risk"],
            max_attack_excess=data.get("max_attack_excess"),
            max_membership_auc=data.get("max_membership_auc"),
            models=(*specs.values(), *kept),
        )


def _other_policy_models(current: PolicyThresholds) -> list[str]:
    """The policy's models besides k, l and t, as phrases (``enhanced 1.0-likeness on every
    sensitive column``)."""
    from anonweb.core.models.registry import model_class, model_from_dict

    out = []
    for spec in current.models or ():
        if spec["model"] in ("k_anonymity", "distinct_l") or (
            spec["model"] == "t_closeness" and "sensitive" not in spec
        ):
            continue
        column = spec.get("sensitive", "every sensitive column")
        cls = model_class(spec["model"])
        filled = {**spec, "sensitive": column} if "sensitive" in cls.fields else dict(spec)
        out.append(model_from_dict(filled).describe())
    return out


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
    form = PolicyForm(request.POST or None, initial=PolicyForm.initial_for(current))
    if request.method == "POST":
        if not can_edit:
            raise PermissionDenied("Only a data steward of the team edits its release policy.")
        if form.is_valid():
            try:
                release_policy_update(
                    user=request.user, team=team, thresholds=form.thresholds(current)
                )
            except CoreError as exc:
                form.add_error(None, str(exc))
            else:
                messages.success(request, f"Release policy of {team.name} saved.")
                return redirect("releases:policy_team", team_id=team.pk)
    return render(
        request,
        "releases/policy.html",
        {
            "team": team,
            "teams": teams,
            "form": form,
            "can_edit": can_edit,
            "current": current,
            "other_models": _other_policy_models(current),
        },
        status=400 if form.errors else 200,
    )
