from django.urls import path

from anonweb.jobs import views

app_name = "jobs"
urlpatterns = [
    path("", views.job_list, name="list"),
    path("plan/<int:dataset_id>/", views.job_plan, name="plan"),
    path("plan/<int:dataset_id>/check/", views.job_plan_check, name="plan_check"),
    path("queue-check/", views.job_queue_check, name="queue_check"),
    path("<int:job_id>/", views.job_detail, name="detail"),
    path("<int:job_id>/status.json", views.job_status, name="status"),
    path("<int:job_id>/cancel/", views.job_cancel_view, name="cancel"),
]

# Pages at a release's address that start a job: ``anonweb/urls.py`` serves them under the
# ``releases`` namespace, with the releases app's own pages.
release_urlpatterns = [
    path("<int:release_id>/attack/", views.release_attack, name="attack"),
    path("<int:release_id>/utility/", views.release_utility, name="utility"),
]
