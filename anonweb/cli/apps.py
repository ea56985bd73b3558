from django.apps import AppConfig


class CliConfig(AppConfig):
    name = "anonweb.cli"
    label = "cli"
