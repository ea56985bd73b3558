"""The datasets app's own pages. ``anonweb/urls.py`` serves them under the ``datasets``
namespace together with the dataset pages that reach past this app
(:mod:`anonweb.dashboard.dataset_urls`)."""

from django.urls import path

from anonweb.datasets import views

urlpatterns = [
    path("", views.dataset_list, name="list"),
    path("<int:dataset_id>/what-if/", views.dataset_whatif, name="whatif"),
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
    path("<int:dataset_id>/retention/", views.dataset_retention, name="retention"),
    path("<int:dataset_id>/population/", views.dataset_population, name="population"),
    path("<int:dataset_id>/discard/", views.dataset_discard_view, name="discard"),
]
