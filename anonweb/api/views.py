"""The automation API: thin views over the same selectors (reads, team-scoped: other teams'
objects are 404) and services (writes: role checks, one transaction, one audit event) as the
pages. A view parses the request, calls one service or selector and writes JSON; every error a
service raises becomes JSON in :mod:`anonweb.api.errors`.

Each operation names the roles it is for in the schema (``x-roles``); the access test checks
every route against that declaration, as anonymous, as each role and as another team's member.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from anonweb.accounts.models import Role
from anonweb.accounts.selectors import raw_value_teams, teams_where
from anonweb.api import serializers as s
from anonweb.api.errors import Conflict
from anonweb.api.pagination import DEFAULT_LIMIT, ApiPagination, page_parameters, whole_number
from anonweb.api.parsers import BoundedJSONParser
from anonweb.core.errors import CoreError
from anonweb.core.io.export import DOWNLOAD_FORMATS, download_format
from anonweb.datasets.selectors import (
    can_see_raw,
    dataset_get_for_user,
    datasets_for_user,
    risk_for_user,
)
from anonweb.datasets.services import dataset_set_hierarchy_spec, dataset_set_tags, survey_params
from anonweb.datasets.uploads import upload_refused
from anonweb.datasets.whatif import whatif_evaluate
from anonweb.jobs.models import JobKind, JobStatus
from anonweb.jobs.selectors import job_get_for_user, jobs_for_user, latest_profile
from anonweb.jobs.services import (
    anonymize_launch,
    dataset_upload,
    job_cancel,
    job_create,
    jobs_check_queued_from_page,
    jobs_reap_stale_from_page,
    release_attacks_start,
)
from anonweb.releases.audit_access import audit_events_for_user
from anonweb.releases.budget import budget_get_for_user, budget_set
from anonweb.releases.compare import release_comparison
from anonweb.releases.downloads import download_response
from anonweb.releases.gate import release_gate_now
from anonweb.releases.links import release_link_issue
from anonweb.releases.models import Release, ReleaseStatus
from anonweb.releases.selectors import (
    ReleaseForReader,
    release_attacks_for_user,
    release_gate_for_user,
    release_get_downloadable,
    release_get_for_signoff,
    release_get_for_user,
    release_utility_for_user,
    release_views_for_user,
    releases_for_user,
)
from anonweb.releases.services import ReleaseBlocked, release_record_download, release_review
from anonweb.releases.signoff import signoff_download

OFFICER = Role.PRIVACY_OFFICER.value
STEWARD = Role.DATA_STEWARD.value
ANALYST = Role.ANALYST.value
STAFF = [OFFICER, STEWARD]
EVERYONE = [OFFICER, STEWARD, ANALYST]

ERRORS = {
    400: OpenApiResponse(s.ErrorsOut, description="the request is invalid (each problem listed)"),
    401: OpenApiResponse(s.ErrorOut, description="no or a wrong token"),
    403: OpenApiResponse(s.ErrorOut, description="your role in the team does not allow this"),
    404: OpenApiResponse(s.ErrorOut, description="no such object in your teams"),
}


def doc(*, roles: list[str], responses: dict | None = None, example=None, **kwargs):
    """extend_schema with the roles an operation is for (``x-roles``), the usual errors and an
    example request body (``example``; the access test sends it)."""
    if example is not None:
        kwargs["examples"] = [OpenApiExample("example", value=example, request_only=True)]
    return extend_schema(
        responses={**ERRORS, **(responses or {})},
        extensions={"x-roles": list(roles)},
        **kwargs,
    )


EXAMPLE_PLAN = {
    "version": 1,
    "quasi_identifiers": ["age", "sex"],
    "sensitive": ["disease"],
    "hierarchies": {
        "age": {"builder": "interval", "width": 10},
        "sex": {"rows": [["F", "*"], ["M", "*"]]},
    },
    "steps": [
        {"kind": "drop", "params": {"columns": ["name"]}},
        {"kind": "optimal_generalization", "params": {"k": 2, "suppression": 0.0}},
    ],
}


class ApiView(APIView):
    parser_classes = [BoundedJSONParser]

    def valid(self, serializer_class, data=None) -> dict:
        serializer = serializer_class(data=self.request.data if data is None else data)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data


class PagedView(ApiView):
    # A list in pages (anonweb.api.pagination): ?limit=&offset=, the total and the next and
    # previous pages in the headers, the body the list of the objects' JSON. Its schema
    # declares page_parameters(page_default). (Not DRF's ``pagination_class``, which the schema
    # generator would turn into a component of its own for what is a plain list.)

    paginator_class = ApiPagination
    page_default = DEFAULT_LIMIT

    def paged(self, queryset, to_json=None, *, many=None) -> Response:
        """One page of the queryset, each object as ``to_json`` writes it, or the whole page as
        ``many`` writes it (a list of the objects' JSON, for what is read for a page at once)."""
        paginator = self.paginator_class()
        # a list, never None: ApiPagination always has a limit
        page: list = paginator.paginate_queryset(queryset, self.request, view=self) or []
        data = many(page) if many is not None else [to_json(o) for o in page]
        return paginator.get_paginated_response(data)


# ---- datasets -----------------------------------------------------------------------------------


class DatasetCollection(ApiView):
    parser_classes = [MultiPartParser]

    @doc(
        roles=STAFF,
        responses={200: s.DatasetOut(many=True)},
        summary="Datasets of your teams",
        operation_id="datasets_list",
    )
    def get(self, request):
        officer_teams = raw_value_teams(user=request.user)
        datasets = datasets_for_user(user=request.user)
        return Response([s.dataset_json(d, officer_teams=officer_teams) for d in datasets])

    @doc(
        roles=[OFFICER],
        request={"multipart/form-data": s.UploadRequest},
        responses={
            202: s.AcceptedUpload,
            413: OpenApiResponse(s.ErrorOut, description="over the upload limit"),
            415: OpenApiResponse(s.ErrorOut, description="not a table format anonweb reads"),
        },
        summary="Upload a table; it is read by a background job",
    )
    def post(self, request):
        if not teams_where(user=request.user, role=Role.PRIVACY_OFFICER).exists():
            # Before the body is read: nobody else's upload is written to disk.
            raise PermissionDenied("Uploading needs the privacy officer role in a team.")
        data = request.data  # parses the body: the file is streamed to disk as it arrives
        refused = upload_refused(request)
        if refused:
            return Response({"error": refused}, status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE)
        team = _upload_team(request.user, data.get("team", ""))
        fields = self.valid(s.UploadRequest, data)
        dataset, job = dataset_upload(
            user=request.user,
            team=team,
            upload=fields["file"],
            name=fields["name"],
            description=fields.get("description", ""),
            sep=fields.get("sep") or None,
            sheet=fields.get("sheet") or None,
            decimal=fields.get("decimal") or None,
        )
        return Response({"id": dataset.pk, "job": job.pk}, status=status.HTTP_202_ACCEPTED)


def _upload_team(user, wanted: str):
    """The team an upload goes to: the one named, or the caller's only officer team."""

    teams = teams_where(user=user, role=Role.PRIVACY_OFFICER)
    wanted = str(wanted or "").strip()
    if wanted:
        team = teams.filter(**({"pk": int(wanted)} if wanted.isdigit() else {"slug": wanted}))
        found = team.first()
        if found is None:
            raise PermissionDenied(f"you are not a privacy officer in a team {wanted!r}")
        return found
    candidates = list(teams[:2])
    if not candidates:
        raise PermissionDenied("Uploading needs the privacy officer role in a team.")
    if len(candidates) > 1:
        from rest_framework.exceptions import ValidationError

        raise ValidationError(
            {"team": "you are a privacy officer in several teams: name one (slug or id)"}
        )
    return candidates[0]


class DatasetDetail(ApiView):
    @doc(roles=STAFF, responses={200: s.DatasetOut}, summary="A dataset and its columns")
    def get(self, request, dataset_id: int):
        return Response(
            s.dataset_json(
                dataset_get_for_user(user=request.user, dataset_id=dataset_id),
                officer_teams=raw_value_teams(user=request.user),
            )
        )

    @doc(
        roles=[OFFICER],
        request=s.RolesRequest,
        example={
            "roles": {"name": "identifier", "age": "quasi_identifier", "disease": "sensitive"}
        },
        responses={200: s.DatasetOut},
        summary="Tag columns",
    )
    def patch(self, request, dataset_id: int):
        dataset = dataset_get_for_user(user=request.user, dataset_id=dataset_id)
        fields = self.valid(s.RolesRequest)
        dataset = dataset_set_tags(user=request.user, dataset=dataset, tags=dict(fields["roles"]))
        return Response(s.dataset_json(dataset, officer_teams=raw_value_teams(user=request.user)))


class DatasetHierarchy(ApiView):
    @doc(
        roles=[OFFICER],
        request=s.HierarchyRequest,
        example={"builder": "interval", "width": 10},
        responses={200: OpenApiTypes.OBJECT},
        summary="Set a column's generalization hierarchy (rows or a builder)",
        description="400 names the values of the column that the hierarchy does not cover.",
    )
    def put(self, request, dataset_id: int, column: str):
        dataset = dataset_get_for_user(user=request.user, dataset_id=dataset_id)
        if not isinstance(request.data, dict):
            return Response(
                {"errors": ['a hierarchy is an object: {"rows": [...]} or {"builder": ...}']},
                status=400,
            )
        stored = dataset_set_hierarchy_spec(
            user=request.user, dataset=dataset, column=column, spec=dict(request.data)
        )
        return Response(
            {
                "column": stored.column,
                "kind": stored.kind,
                "levels": stored.levels,
                "values": stored.values,
                "sha256": stored.sha256,
            }
        )


class DatasetAssessments(ApiView):
    @doc(
        roles=[OFFICER],
        request=s.AssessmentRequest,
        example={"suda2": True, "suda2_max_size": 3},
        responses={202: s.AcceptedJob},
        summary="Assess the dataset's risk in a background job",
        description=(
            "With no body, the risk profile. `weights`, `household` and `suda2` add sdcMicro's "
            "survey risk (individual risk with the weights, household risk, SUDA2) under the "
            "profile's `survey` key."
        ),
    )
    def post(self, request, dataset_id: int):
        dataset = dataset_get_for_user(user=request.user, dataset_id=dataset_id)
        body = s.AssessmentRequest(data=request.data or {})
        body.is_valid(raise_exception=True)
        job = job_create(
            user=request.user,
            team=dataset.team,
            kind=JobKind.PROFILE,
            dataset=dataset,
            params=survey_params(dataset=dataset, params=dict(body.validated_data)),
        )
        return Response({"job": job.pk}, status=status.HTTP_202_ACCEPTED)


class DatasetRisk(ApiView):
    @doc(
        roles=STAFF,
        responses={200: OpenApiTypes.OBJECT},
        summary="The latest risk profile (the JSON of `assess --format json`)",
    )
    def get(self, request, dataset_id: int):
        dataset = dataset_get_for_user(user=request.user, dataset_id=dataset_id)
        job = latest_profile(dataset=dataset)
        risk = (job.result or {}).get("risk") if job is not None else None
        if not risk:
            raise Http404(
                "no risk profile yet: tag quasi-identifiers and POST to the assessments route"
            )
        risk = risk_for_user(user=request.user, dataset=dataset, risk=risk)
        profile = {k: v for k, v in risk.items() if k != "homogeneity"}
        profile["file"] = dataset.original_name
        return Response(profile)


class DatasetWhatIf(ApiView):
    @doc(
        roles=STAFF,
        request=s.WhatIfRequest,
        example={"levels": {"age": 1}, "suppression": 0.02},
        responses={200: OpenApiTypes.OBJECT},
        summary="What-if: the risk profile, suppression and information loss of chosen levels",
        description=(
            "Answered at once, without a job. The same JSON as the risk profile (of the records "
            "kept) plus `suppressed`, `information_loss` (the search's metric, named in "
            "`information_loss_measure`), `loss_per_qi`, `levels` and `heights`. Without `k` "
            "the suppression limit is spent on the smallest classes; with `k`, on the classes "
            "below it, if they fit (`satisfied`). Example level labels, which quote the "
            "source, are given to privacy officers only."
        ),
    )
    def post(self, request, dataset_id: int):
        dataset = dataset_get_for_user(user=request.user, dataset_id=dataset_id)
        if not dataset.is_ready or dataset.is_purged:
            raise Conflict("the raw data of this dataset is not available")
        result = whatif_evaluate(
            dataset, request.data, raw_labels=can_see_raw(user=request.user, dataset=dataset)
        )
        result.pop("homogeneity", None)
        result["file"] = dataset.original_name
        return Response(result)


class DatasetReleases(ApiView):
    @doc(
        roles=[OFFICER],
        request=s.ReleaseRequest,
        example={
            "title": "k=2 extract",
            "purpose": "quarterly statistics",
            "recipient": "research unit",
            "recipients": ["ana"],
            "plan": EXAMPLE_PLAN,
        },
        responses={202: s.AcceptedJob},
        summary="Run a release plan (refused with every problem listed before anything runs)",
    )
    def post(self, request, dataset_id: int):
        dataset = dataset_get_for_user(user=request.user, dataset_id=dataset_id)
        fields = self.valid(s.ReleaseRequest)
        if not isinstance(fields["plan"], dict):
            return Response({"errors": ["plan: a plan is an object with steps"]}, status=400)
        job = anonymize_launch(
            user=request.user,
            dataset=dataset,
            plan=fields["plan"],
            title=fields["title"],
            purpose=fields["purpose"],
            recipient=fields["recipient"],
            recipients=fields["recipients"],
        )
        return Response({"job": job.pk}, status=status.HTTP_202_ACCEPTED)


class DatasetBudget(ApiView):
    @doc(roles=STAFF, responses={200: OpenApiTypes.OBJECT}, summary="The source's (ε, δ) ledger")
    def get(self, request, dataset_id: int):
        return Response(budget_get_for_user(user=request.user, dataset_id=dataset_id).to_dict())

    @doc(
        roles=[STEWARD],
        request=s.BudgetRequest,
        example={"epsilon": 1.0, "delta": 1e-6},
        responses={200: OpenApiTypes.OBJECT},
        summary="Set the source's budget (null removes it)",
    )
    def put(self, request, dataset_id: int):
        dataset = dataset_get_for_user(user=request.user, dataset_id=dataset_id)
        fields = self.valid(s.BudgetRequest)
        ledger = budget_set(
            user=request.user, dataset=dataset, epsilon=fields["epsilon"], delta=fields["delta"]
        )
        return Response(ledger.to_dict())


# ---- jobs ---------------------------------------------------------------------------------------


class JobCollection(PagedView):
    @doc(
        roles=STAFF,
        parameters=[
            OpenApiParameter("dataset", int, description="only the jobs of this dataset"),
            OpenApiParameter(
                "status", str, enum=JobStatus.values, description="only the jobs in this state"
            ),
            *page_parameters(),
        ],
        responses={200: s.JobOut(many=True)},
        summary="Jobs of your teams, newest first (officers and stewards)",
        description=(
            "Each job as `GET /api/v1/jobs/{id}/` gives it. In pages: the total is in the "
            "`X-Total-Count` header, the next and previous pages in the `Link` header."
        ),
        operation_id="jobs_list",
    )
    def get(self, request):
        wanted = request.query_params.get("status", "").strip()
        if wanted and wanted not in JobStatus.values:
            from rest_framework.exceptions import ValidationError

            raise ValidationError(
                {"status": f"one of {', '.join(JobStatus.values)}, got {wanted!r}"}
            )
        jobs_check_queued_from_page()  # a job listed as queued is one a worker may still take
        jobs = jobs_for_user(
            user=request.user,
            dataset_id=whole_number(request, "dataset"),
            status=JobStatus(wanted) if wanted else None,
        )
        officer_teams = raw_value_teams(user=request.user)
        return self.paged(jobs, lambda job: s.job_json(job, officer_teams=officer_teams))


class JobDetail(ApiView):
    @doc(roles=STAFF, responses={200: s.JobOut}, summary="A background job")
    def get(self, request, job_id: int):
        job = job_get_for_user(user=request.user, job_id=job_id)
        # read again only if a check ran now (it may have failed this job)
        checked = (
            jobs_reap_stale_from_page()
            if job.status == JobStatus.RUNNING
            else jobs_check_queued_from_page()
            if job.status == JobStatus.QUEUED
            else False
        )
        if checked:
            job.refresh_from_db()
        return Response(s.job_json(job, officer_teams=raw_value_teams(user=request.user)))


class JobCancel(ApiView):
    @doc(roles=[OFFICER], request=None, responses={200: s.JobOut}, summary="Cancel a job")
    def post(self, request, job_id: int):
        job = job_get_for_user(user=request.user, job_id=job_id)
        job = job_cancel(user=request.user, job=job)
        return Response(s.job_json(job, officer_teams=raw_value_teams(user=request.user)))


# ---- releases -----------------------------------------------------------------------------------

API_STATUS = {"pending": "awaiting_review"}
STATUS_FILTER = {"awaiting_review": "pending", "approved": "approved", "rejected": "rejected"}


def releases_json(releases: Sequence[Release], *, user) -> list[dict]:
    """Each release as its reader may see it, as on its page
    (:func:`~anonweb.releases.selectors.release_views_for_user`): officers and stewards of the
    team get the full report, the gate's findings, the recipients and the conflicts; analysts
    the published report (what the released data shows) and the purpose only. The queries are
    the same for one release as for a page of them."""

    return [release_json(view) for view in release_views_for_user(user=user, releases=releases)]


def release_json(view: ReleaseForReader) -> dict:
    """One release's JSON, as :func:`releases_json` says."""
    release = view.release
    return {
        "id": release.pk,
        "dataset": release.dataset_id,
        "version": release.version,
        "title": release.title,
        "status": API_STATUS.get(release.status, release.status),
        "purpose": release.purpose,
        "recipient": view.recipient,
        # [] when every analyst of the team receives it
        "recipients": view.recipients,
        "rows": release.rows,
        "columns": release.columns,
        "sha256": release.sha256,
        "plan": view.plan,
        "report": view.report,
        "findings": view.findings,
        "override": view.override,
        "conflicts": [conflict_json(c) for c in view.conflicts],
        "requested_by": getattr(release.requested_by, "username", None),
        "reviewed_by": getattr(release.reviewed_by, "username", None),
        "review_note": release.review_note,
        "created_at": release.created_at.isoformat(),
    }


def conflict_json(entry: dict) -> dict:
    """A conflict finding as the release page gets it (the records and values an attacker would
    infer only for privacy officers, under ``private``), with releases named by id."""
    out = {
        "id": entry["id"],
        "type": entry["type"],
        "records": entry["records"],
        "columns": entry["columns"],
        "explanation": entry["explanation"],
        "facts": entry["facts"],
        "found_by": entry["found_by"].pk,
        "releases": [
            {
                "id": r["release"].pk,
                "version": r["release"].version,
                "status": API_STATUS.get(r["release"].status, r["release"].status),
                "live": r["live"],
            }
            for r in entry["releases"]
        ],
        "live": entry["live"],
    }
    if "private" in entry:
        out["private"] = entry["private"]
    return out


class ReleaseCollection(PagedView):
    page_default = 500  # what the list gave before it had pages

    @doc(
        roles=EVERYONE,
        parameters=[
            OpenApiParameter("dataset", int, description="only releases of this dataset"),
            OpenApiParameter(
                "status", str, enum=list(STATUS_FILTER), description="only releases in this state"
            ),
            *page_parameters(page_default),
        ],
        responses={200: OpenApiResponse({"type": "array", "items": {"type": "object"}})},
        summary="Releases you may see (analysts: approved ones), newest first",
        operation_id="releases_list",
    )
    def get(self, request):
        wanted = request.query_params.get("status", "").strip()
        if wanted and wanted not in STATUS_FILTER:
            from rest_framework.exceptions import ValidationError

            raise ValidationError({"status": f"one of {', '.join(STATUS_FILTER)}"})
        releases = releases_for_user(
            user=request.user,
            dataset_id=whole_number(request, "dataset"),
            status=ReleaseStatus(STATUS_FILTER[wanted]) if wanted else None,
        )
        return self.paged(releases, many=lambda page: releases_json(page, user=request.user))


class ReleaseDetail(ApiView):
    @doc(
        roles=EVERYONE,
        responses={200: OpenApiTypes.OBJECT},
        summary="A release and its report",
        description=(
            "As the list gives it: `findings` are the release gate's as recorded when the "
            "release was written; `gate/` gives them as they stand now."
        ),
    )
    def get(self, request, release_id: int):
        release = release_get_for_user(user=request.user, release_id=release_id)
        (out,) = releases_json([release], user=request.user)
        return Response(out)


class ReleaseGate(ApiView):
    @doc(
        roles=STAFF,
        responses={200: OpenApiTypes.OBJECT},
        summary="The release gate as it stands now: what an approval is decided on",
        description=(
            "The findings recorded when the release was written, with its conflicts checked "
            "again against every other live release of the source (approved or awaiting "
            "review, earlier and later: `checked`), as on the release page, in the review and "
            "in the sign-off report. `version` names the state checked; `rechecked` is false "
            "when the check could not run again (`notes` says why) and the conflicts recorded "
            "when the releases were written decide."
        ),
    )
    def get(self, request, release_id: int):
        release, gate = release_gate_for_user(user=request.user, release_id=release_id)
        return Response({"release": release.pk, **gate.to_dict()})


class ReleaseCompare(ApiView):
    @doc(
        roles=EVERYONE,
        parameters=[
            OpenApiParameter("a", int, required=True, description="one version of a source"),
            OpenApiParameter("b", int, required=True, description="another version of it"),
        ],
        responses={200: OpenApiTypes.OBJECT},
        summary="Two versions of a source side by side (analysts: published figures only)",
    )
    def get(self, request):
        from rest_framework.exceptions import ValidationError

        a, b = whole_number(request, "a"), whole_number(request, "b")
        if a is None or b is None:
            raise ValidationError({"a" if a is None else "b": "give two release ids, a and b"})
        return Response(release_comparison(user=request.user, a_id=a, b_id=b).to_dict())


class ReleaseReview(ApiView):
    @doc(
        roles=[STEWARD],
        request=s.ReviewRequest,
        example={"decision": "approve", "note": "checked the report", "override": ""},
        responses={
            200: OpenApiTypes.OBJECT,
            409: OpenApiResponse(
                OpenApiTypes.OBJECT,
                description='already reviewed ({"error"}), or blocking findings stand and no '
                'override justification was given ({"findings": [...]})',
            ),
        },
        summary="Approve or reject (a steward other than the requester)",
    )
    def post(self, request, release_id: int):
        release = release_get_for_user(user=request.user, release_id=release_id)
        fields = self.valid(s.ReviewRequest)
        try:
            release = release_review(
                user=request.user,
                release=release,
                decision=fields["decision"],
                note=fields["note"],
                override=fields["override"],
                seen=fields["gate_version"],
            )
        except ReleaseBlocked as exc:
            return Response(
                {"error": str(exc), "findings": exc.findings}, status=status.HTTP_409_CONFLICT
            )
        return Response(
            {
                "status": API_STATUS.get(release.status, release.status),
                "findings": list(release_gate_now(release=release).findings),
                "override": release.override or None,
            }
        )


class FormatIsTheFiles(DefaultContentNegotiation):
    """``?format=`` names the file's format here, not a renderer: errors are always JSON."""

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class ReleaseUtility(ApiView):
    @doc(
        roles=STAFF,
        responses={200: OpenApiTypes.OBJECT, 409: OpenApiResponse(s.ErrorOut)},
        summary="A release's utility: distributions beside the source's, loss, DP intervals",
        description=(
            "Computed from the source, so for the team's privacy officers and data stewards "
            "only: per column the source's and the released distribution, cells suppressed and "
            "changed, total variation distance, mean and standard deviation; the information "
            "loss per quasi-identifier with its aggregate; each DP statistic with its 95% "
            "interval (and its value on the source when the statistic read it as it is). "
            "Measured by the job that publishes the release; a release published without it "
            "gets it on the first request."
        ),
    )
    def get(self, request, release_id: int):
        release, utility = release_utility_for_user(user=request.user, release_id=release_id)
        if utility is None:
            raise Conflict("the release's files or its source's are gone: nothing to compare")
        return Response({"release": release.pk, **utility})


class ReleaseAttacks(ApiView):
    @doc(
        roles=STAFF,
        responses={200: OpenApiTypes.OBJECT, 409: OpenApiResponse(s.ErrorOut)},
        summary="What an attacker gets from a record-level release, against a control",
        description=(
            "Computed from the source, so for the team's privacy officers and data stewards "
            "only: linkage, inference of each sensitive column and singling out, each as the "
            "rate on people in the release, the rate on a control of people held out of it, "
            "the excess and its 95% interval (`rate`, `control_rate`, `excess`, `ci`, "
            "`targets`), and membership inference (`auc`, `ci`), with a sentence per figure. "
            "Without a held-out control (the plan's `attacks.holdout`) the excess is null and "
            "`note` says it cannot be measured. 409 for a release the attacks were not run on "
            "(aggregates, or published before they were). `reconstruction` is what the "
            "aggregates of all live releases of the source determine together: counts and "
            "columns, and for officers which records (`records`, `values`). After a POST, the "
            "figures are those of the latest run (`run_at`)."
        ),
    )
    def get(self, request, release_id: int):
        release, attacks = release_attacks_for_user(user=request.user, release_id=release_id)
        if attacks is None:
            raise Conflict(
                "no attack figures for this release: it publishes aggregates, or was "
                "published before the attacks were run"
            )
        return Response({"release": release.pk, **attacks})

    @doc(
        roles=STAFF,
        request=None,
        responses={202: s.AcceptedJob},
        summary="Attack the release again in a background job",
    )
    def post(self, request, release_id: int):
        job = release_attacks_start(user=request.user, release_id=release_id)
        return Response({"job": job.pk}, status=status.HTTP_202_ACCEPTED)


class ReleaseDownload(ApiView):
    content_negotiation_class = FormatIsTheFiles

    @doc(
        roles=EVERYONE,
        parameters=[OpenApiParameter("format", str, enum=list(DOWNLOAD_FORMATS), default="csv")],
        responses={(200, "application/octet-stream"): OpenApiTypes.BINARY},
        summary="Download an approved release (staff: any not rejected)",
    )
    def get(self, request, release_id: int):
        try:
            fmt = download_format(request.query_params.get("format"))
        except CoreError as exc:
            from rest_framework.exceptions import ValidationError

            raise ValidationError({"format": str(exc)}) from None
        release = release_get_downloadable(
            user=request.user, release_id=release_id, documents=False
        )
        response = download_response(release=release, fmt=fmt)
        if request.method != "HEAD":  # headers only: no file leaves, nothing to record
            release_record_download(user=request.user, release=release, fmt=fmt)
        return response


class ReleaseLinks(ApiView):
    @doc(
        roles=[STEWARD],
        request=s.LinkRequest,
        example={"recipient": "auditor at the ministry", "format": "csv", "hours": 48},
        responses={201: OpenApiTypes.OBJECT, 409: OpenApiResponse(s.ErrorOut)},
        summary="Issue a single-use download link for a recipient outside the team",
        description=(
            "For an approved release (409 otherwise). The answer carries the link's `url` once: "
            "only a hash of its token is kept. The link gives the file in `format` once, before "
            "`expires_at`, and nothing else about the release; a used or expired link answers "
            "410. Issuing and using it are audit events."
        ),
    )
    def post(self, request, release_id: int):
        release = release_get_for_user(user=request.user, release_id=release_id)
        fields = self.valid(s.LinkRequest)
        link, token = release_link_issue(
            user=request.user,
            release=release,
            fmt=fields["format"],
            label=fields["recipient"],
            hours=fields["hours"],
        )
        return Response(
            {
                "id": link.pk,
                "release": release.pk,
                "url": request.build_absolute_uri(reverse("releases:link", args=[token])),
                "format": link.format,
                "recipient": link.label,
                "expires_at": link.expires_at.isoformat(),
            },
            status=status.HTTP_201_CREATED,
        )


class ReleaseSignoff(ApiView):
    content_negotiation_class = FormatIsTheFiles

    @doc(
        roles=STAFF,
        responses={(200, "text/html"): OpenApiTypes.BINARY},
        summary="The sign-off report: a self-contained HTML file (officers and stewards)",
    )
    def get(self, request, release_id: int):
        release = release_get_for_signoff(user=request.user, release_id=release_id)
        return signoff_download(release=release, user=request.user)


# ---- audit --------------------------------------------------------------------------------------


class AuditCollection(PagedView):
    @doc(
        roles=EVERYONE,
        parameters=[
            OpenApiParameter("dataset", int, description="events about this dataset"),
            OpenApiParameter("action", str, description="e.g. release.approved"),
            *page_parameters(),
        ],
        responses={200: s.AuditEventOut(many=True)},
        description=(
            "Analysts see the approval and downloads of the releases they may download only. "
            "In pages: the total is in the `X-Total-Count` header, the next and previous pages "
            "in the `Link` header."
        ),
        summary="Audit events of your teams, newest first",
        operation_id="audit_list",
    )
    def get(self, request):
        events = audit_events_for_user(
            user=request.user,
            action=request.query_params.get("action", "").strip(),
            dataset_id=whole_number(request, "dataset"),
        )
        return self.paged(events, s.audit_json)
