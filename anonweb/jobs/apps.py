from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "anonweb.jobs"
    label = "jobs"
