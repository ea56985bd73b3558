"""Every page requires login; every object is hidden from other teams; roles gate actions."""

import pytest
from django.urls import reverse

from anonweb.jobs.models import Job, JobKind, JobStatus

pytestmark = pytest.mark.django_db

PAGES = [
    ("home", {}),
    ("datasets:list", {}),
    ("datasets:upload", {}),
    ("jobs:list", {}),
    ("releases:list", {}),
    ("audit:list", {}),
]


@pytest.mark.parametrize("name,kwargs", PAGES)
def test_every_page_requires_login(client, name, kwargs):
    url = reverse(name, kwargs=kwargs)
    response = client.get(url)
    assert response.status_code == 302
    assert response.url.startswith(reverse("login"))


def test_object_pages_require_login(client, dataset, officer):
    import pandas as pd

    from anonweb.jobs.publication import release_create

    job = Job.objects.create(
        team=dataset.team, dataset=dataset, kind=JobKind.ANONYMIZE, status=JobStatus.RUNNING
    )
    release = release_create(job=job, frame=pd.DataFrame({"a": [1]}), plan={}, report={}, title="r")
    gets = [
        reverse("datasets:detail", args=[dataset.pk]),
        reverse("jobs:detail", args=[job.pk]),
        reverse("jobs:status", args=[job.pk]),
        reverse("jobs:plan", args=[dataset.pk]),
        reverse("releases:detail", args=[release.pk]),
        reverse("releases:download", args=[release.pk]),
    ]
    posts = [
        reverse("datasets:assess", args=[dataset.pk]),
        reverse("datasets:hierarchy", args=[dataset.pk]),
        reverse("datasets:budget", args=[dataset.pk]),
        reverse("datasets:retention", args=[dataset.pk]),
        reverse("datasets:purge", args=[dataset.pk]),
        reverse("datasets:population", args=[dataset.pk]),
        reverse("jobs:cancel", args=[job.pk]),
        reverse("jobs:queue_check"),
        reverse("releases:review", args=[release.pk]),
    ]
    for method, urls in (("get", gets), ("post", posts)):
        for url in urls:
            response = getattr(client, method)(url)
            assert response.status_code == 302, url
            assert response.url.startswith(reverse("login")), url
    assert Job.objects.count() == 1


def test_login_and_logout(client, officer):
    from tests.web.factories import PASSWORD

    response = client.post(reverse("login"), {"username": "olivia", "password": PASSWORD})
    assert response.status_code == 302
    assert client.get(reverse("home")).status_code == 200
    client.post(reverse("logout"))
    assert client.get(reverse("home")).status_code == 302


def test_wrong_password_is_refused(client, officer):
    response = client.post(reverse("login"), {"username": "olivia", "password": "nope"})
    assert response.status_code == 200
    assert b"didn&#x27;t match" in response.content or b"didn't match" in response.content


def test_home_lists_roles(client, officer):
    client.force_login(officer)
    response = client.get(reverse("home"))
    assert response.status_code == 200
    assert b"Privacy officer" in response.content


def test_csrf_is_enforced(officer, dataset):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(officer)
    response = client.post(reverse("datasets:assess", args=[dataset.pk]))
    assert response.status_code == 403
    assert not Job.objects.filter(dataset=dataset).exists()


def test_healthz_tells_anonymous_callers_the_status_alone(client, officer):
    response = client.get(reverse("healthz"))
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    client.force_login(officer)  # not staff: still the status alone
    assert client.get(reverse("healthz")).json() == {"status": "ok"}


@pytest.fixture
def staff(db):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user(username="ops", is_staff=True)


def test_healthz_reports_parts_to_staff(client, staff):
    client.force_login(staff)
    response = client.get(reverse("healthz"))
    assert response.status_code == 200
    body = response.json()
    assert body["database"]["ok"] is True
    assert body["broker"]["ok"] is True
    assert body["status"] == "ok"


def test_healthz_reports_a_broker_that_is_down(client, staff, monkeypatch):
    from anonweb.celery import app

    assert client.get(reverse("healthz")).status_code == 200
    client.force_login(staff)

    def refuse(*args, **kwargs):
        raise ConnectionRefusedError("refused")

    monkeypatch.setattr(app, "connection_for_write", refuse)
    response = client.get(reverse("healthz"))
    assert response.status_code == 503
    assert response.json()["broker"] == {
        "ok": False,
        "transport": "filesystem",
        "error": "ConnectionRefusedError",
    }


def test_admin_is_for_superusers_only(client, officer):
    client.force_login(officer)
    response = client.get("/admin/")
    assert response.status_code == 302
    assert "login" in response.url


def test_every_page_sends_a_content_security_policy(client, officer):
    client.force_login(officer)
    for url in (reverse("login"), reverse("home"), reverse("healthz")):
        policy = client.get(url)["Content-Security-Policy"]
        assert "script-src 'self';" in policy and "object-src 'none'" in policy
        assert "unsafe-eval" not in policy and "frame-ancestors 'none'" in policy
