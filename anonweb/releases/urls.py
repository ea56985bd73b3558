from django.urls import path

from anonweb.releases import views, views_compare

# Served by ``anonweb/urls.py`` under the ``releases`` namespace, with the release pages that
# start jobs (``anonweb.jobs.urls.release_urlpatterns``).
urlpatterns = [
    path("", views.release_list, name="list"),
    path("compare/", views_compare.release_compare, name="compare"),
    path("policy/", views.policy_page, name="policy"),
    path("policy/<int:team_id>/", views.policy_page, name="policy_team"),
    path("<int:release_id>/", views.release_detail, name="detail"),
    path("<int:release_id>/review/", views.release_review, name="review"),
    path("<int:release_id>/download/", views.release_download, name="download"),
    path("<int:release_id>/signoff.html", views.release_signoff, name="signoff"),
    path("<int:release_id>/links/", views.release_link_issue, name="link_issue"),
    path("link/<str:token>/", views.release_link, name="link"),
]
