from django.apps import AppConfig


class DatasetsConfig(AppConfig):
    name = "anonweb.datasets"
    label = "datasets"
