from django.apps import AppConfig


class CommonConfig(AppConfig):
    name = "anonweb.common"
    label = "common"
