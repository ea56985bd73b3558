"""The dataset pages that reach past the datasets app (:mod:`anonweb.dashboard.dataset_views`),
served by ``anonweb/urls.py`` under the ``datasets`` namespace with the app's own pages."""

from django.urls import path

from anonweb.dashboard import dataset_views as views

urlpatterns = [
    path("upload/", views.dataset_upload, name="upload"),
    path("<int:dataset_id>/", views.dataset_detail, name="detail"),
    path("<int:dataset_id>/assess/", views.dataset_assess, name="assess"),
    path("<int:dataset_id>/hierarchy/", views.dataset_hierarchy, name="hierarchy"),
    path("<int:dataset_id>/budget/", views.dataset_budget, name="budget"),
    path("<int:dataset_id>/purge/", views.dataset_purge_view, name="purge"),
]
