"""The Celery application. Tasks import ``app`` from here (nothing imports it at start-up)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "anonweb.settings")

app = Celery("anonweb")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
