from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "anonweb.audit"
    label = "audit"
