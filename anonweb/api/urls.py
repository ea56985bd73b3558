"""API routes. ``v1`` is the list to extend: add a ``route(...)`` line for a new endpoint and
the access test, the schema and its validation cover it without further changes.

Every view here is exempt from the login redirect of the pages (an API caller gets 401 JSON,
never a login page) and authenticates itself: a token, or the browser's session."""

from django.contrib.auth.decorators import login_not_required
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from anonweb.api import views
from anonweb.api.errors import not_found_json


def route(pattern: str, view_class, name: str, **initkwargs):
    return path(pattern, login_not_required(view_class.as_view(**initkwargs)), name=name)


v1 = [
    route("datasets/", views.DatasetCollection, "datasets"),
    route("datasets/<int:dataset_id>/", views.DatasetDetail, "dataset"),
    route(
        "datasets/<int:dataset_id>/hierarchies/<str:column>/",
        views.DatasetHierarchy,
        "dataset-hierarchy",
    ),
    route("datasets/<int:dataset_id>/assessments/", views.DatasetAssessments, "dataset-assess"),
    route("datasets/<int:dataset_id>/risk/", views.DatasetRisk, "dataset-risk"),
    route("datasets/<int:dataset_id>/what-if/", views.DatasetWhatIf, "dataset-what-if"),
    route("datasets/<int:dataset_id>/releases/", views.DatasetReleases, "dataset-releases"),
    route("datasets/<int:dataset_id>/budget/", views.DatasetBudget, "dataset-budget"),
    route("jobs/", views.JobCollection, "jobs"),
    route("jobs/<int:job_id>/", views.JobDetail, "job"),
    route("jobs/<int:job_id>/cancel/", views.JobCancel, "job-cancel"),
    route("releases/", views.ReleaseCollection, "releases"),
    route("releases/compare/", views.ReleaseCompare, "release-compare"),
    route("releases/<int:release_id>/", views.ReleaseDetail, "release"),
    route("releases/<int:release_id>/gate/", views.ReleaseGate, "release-gate"),
    route("releases/<int:release_id>/review/", views.ReleaseReview, "release-review"),
    route("releases/<int:release_id>/download/", views.ReleaseDownload, "release-download"),
    route("releases/<int:release_id>/utility/", views.ReleaseUtility, "release-utility"),
    route("releases/<int:release_id>/attacks/", views.ReleaseAttacks, "release-attacks"),
    route("releases/<int:release_id>/signoff/", views.ReleaseSignoff, "release-signoff"),
    route("audit/", views.AuditCollection, "audit"),
]

app_name = "api"
urlpatterns = [
    path("v1/", include(v1)),
    route("schema/", SpectacularAPIView, "schema"),
    route("docs/", SpectacularSwaggerView, "docs", url_name="api:schema"),
    re_path(r"^.*$", login_not_required(not_found_json), name="not-found"),
]
