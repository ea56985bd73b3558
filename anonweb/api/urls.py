"""API routes. ``v1`` is the list to extend: add a ``route(...)`` line for a new endpoint and
the access test, the schema and its validation cover it without further changes.

Every view here is exempt from the login redirect of the pages (an API caller gets 401 JSON,
never a login page) and authenticates itself: a token, or the browser's session."""

from django.contrib.auth.decorators import login_not_required
from django.urls import include, path, re_path, register_converter
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from anonweb.api import views
from anonweb.api.errors import not_found_json
from anonweb.api.schema import IdConverter

register_converter(IdConverter, "id")


def route(pattern: str, view_class, name: str, **initkwargs):
    return path(pattern, login_not_required(view_class.as_view(**initkwargs)), name=name)


v1 = [
    route("datasets/", views.DatasetCollection, "datasets"),
    route("datasets/<id:dataset_id>/", views.DatasetDetail, "dataset"),
    route(
        "datasets/<id:dataset_id>/hierarchies/<str:column>/",
        views.DatasetHierarchy,
        "dataset-hierarchy",
    ),
    route("datasets/<id:dataset_id>/assessments/", views.DatasetAssessments, "dataset-assess"),
    route("datasets/<id:dataset_id>/risk/", views.DatasetRisk, "dataset-risk"),
    route("datasets/<id:dataset_id>/what-if/", views.DatasetWhatIf, "dataset-what-if"),
    route("datasets/<id:dataset_id>/releases/", views.DatasetReleases, "dataset-releases"),
    route("datasets/<id:dataset_id>/budget/", views.DatasetBudget, "dataset-budget"),
    route("jobs/", views.JobCollection, "jobs"),
    route("jobs/<id:job_id>/", views.JobDetail, "job"),
    route("jobs/<id:job_id>/cancel/", views.JobCancel, "job-cancel"),
    route("releases/", views.ReleaseCollection, "releases"),
    route("releases/compare/", views.ReleaseCompare, "release-compare"),
    route("releases/<id:release_id>/", views.ReleaseDetail, "release"),
    route("releases/<id:release_id>/gate/", views.ReleaseGate, "release-gate"),
    route("releases/<id:release_id>/review/", views.ReleaseReview, "release-review"),
    route("releases/<id:release_id>/download/", views.ReleaseDownload, "release-download"),
    route("releases/<id:release_id>/utility/", views.ReleaseUtility, "release-utility"),
    route("releases/<id:release_id>/attacks/", views.ReleaseAttacks, "release-attacks"),
    route("releases/<id:release_id>/signoff/", views.ReleaseSignoff, "release-signoff"),
    route("releases/<id:release_id>/links/", views.ReleaseLinks, "release-links"),
    route("audit/", views.AuditCollection, "audit"),
]

app_name = "api"
urlpatterns = [
    path("v1/", include(v1)),
    route("schema/", SpectacularAPIView, "schema"),
    route("docs/", SpectacularSwaggerSplitView, "docs", url_name="api:schema"),
    re_path(r"^[\s\S]*$", login_not_required(not_found_json), name="not-found"),
]
