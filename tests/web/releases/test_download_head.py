"""A HEAD request on a download answers with the download's headers and records nothing: no
file leaves, so the audit trail's downloads stay the files people took."""

from __future__ import annotations

import pytest
from django.core.signals import request_finished
from django.db import close_old_connections
from django.urls import reverse

from anonweb.audit.models import AuditEvent
from tests.web.api.test_api import api
from tests.web.releases.test_published_report import releases  # noqa: F401 (fixture)

pytestmark = pytest.mark.django_db


def _close(response) -> None:
    """Close the response's file as a WSGI server does after a HEAD (the test client drops the
    body without closing it), keeping the test's database connection."""
    request_finished.disconnect(close_old_connections)
    try:
        response.close()
    finally:
        request_finished.connect(close_old_connections)


def _downloads() -> int:
    return AuditEvent.objects.filter(action="release.downloaded").count()


def test_head_on_the_page_download_records_no_download(client, analyst, releases):  # noqa: F811
    release = releases[0]
    client.force_login(analyst)
    url = reverse("releases:download", args=[release.pk])
    head = client.head(url)
    _close(head)
    assert head.status_code == 200 and "attachment" in head["Content-Disposition"]
    assert _downloads() == 0
    got = client.get(url)
    assert got.status_code == 200 and b"".join(got.streaming_content)
    assert _downloads() == 1


def test_head_on_the_api_download_records_no_download(analyst, releases):  # noqa: F811
    release = releases[0]
    client = api(analyst)
    url = f"/api/v1/releases/{release.pk}/download/?format=parquet"
    head = client.head(url)
    _close(head)
    assert head.status_code == 200 and "attachment" in head["Content-Disposition"]
    assert _downloads() == 0
    got = client.get(url)
    assert got.status_code == 200 and b"".join(got.streaming_content)
    assert _downloads() == 1
