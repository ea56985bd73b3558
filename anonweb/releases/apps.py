from django.apps import AppConfig


class ReleasesConfig(AppConfig):
    name = "anonweb.releases"
    label = "releases"
