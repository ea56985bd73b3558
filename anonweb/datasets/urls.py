from django.urls import path

from anonweb.datasets import views

app_name = "datasets"
urlpatterns = [
    path("", views.dataset_list, name="list"),
    path("upload/", views.dataset_upload, name="upload"),
    path("<int:dataset_id>/", views.dataset_detail, name="detail"),
    path("<int:dataset_id>/assess/", views.dataset_assess, name="assess"),
    path("<int:dataset_id>/what-if/", views.dataset_whatif, name="whatif"),
    path("<int:dataset_id>/hierarchy/", views.dataset_hierarchy, name="hierarchy"),
    path(
        "<int:dataset_id>/hierarchies/<str:column>/",
        views.dataset_hierarchy_wizard,
        name="hierarchy-wizard",
    ),
    path(
        "<int:dataset_id>/hierarchies/<str:column>/preview/",
        views.dataset_hierarchy_preview,
        name="hierarchy-preview",
    ),
    path("<int:dataset_id>/budget/", views.dataset_budget, name="budget"),
    path("<int:dataset_id>/retention/", views.dataset_retention, name="retention"),
    path("<int:dataset_id>/population/", views.dataset_population, name="population"),
    path("<int:dataset_id>/purge/", views.dataset_purge_view, name="purge"),
    path("<int:dataset_id>/discard/", views.dataset_discard_view, name="discard"),
]
