from django.urls import path

from anonweb.dashboard import views

app_name = "audit"
urlpatterns = [path("", views.audit_list, name="list")]
