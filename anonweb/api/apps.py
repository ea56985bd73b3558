from django.apps import AppConfig


class ApiConfig(AppConfig):
    name = "anonweb.api"
    label = "api"
    verbose_name = "Automation API"
