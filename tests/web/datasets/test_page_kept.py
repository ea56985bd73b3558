"""The dataset page's content is kept under everything it shows and rendered once per state and
kind of reader: a repeat view renders none of it, a change to what it shows (tags, a job, the
budget, a release) is shown at once, what is kept for a privacy officer (the source's first
rows) never reaches a data steward, and each view carries its own CSRF token."""

from __future__ import annotations

import re

import pytest
from django.core.cache import cache
from django.test import Client
from django.urls import reverse

from anonweb.common.charts import CSRF_MARK
from anonweb.jobs.models import JobKind
from anonweb.jobs.services import job_create

pytestmark = pytest.mark.django_db

BODY = "datasets/_detail_body.html"


def _page(client, user, dataset):
    client.force_login(user)
    response = client.get(reverse("datasets:detail", args=[dataset.pk]))
    assert response.status_code == 200
    return response


def _rendered(response) -> list[str]:
    return [t.name for t in response.templates]


def _kept() -> dict[str, str]:
    store = cache._cache  # type: ignore[attr-defined]  # LocMemCache's own dict
    found = {}
    for raw in list(store):
        key = raw.split(":", 2)[-1]
        if ":page-body:" in key and key.startswith("anonweb:dataset:"):
            found[key] = cache.get(key)[0]
    return found


def _strip_tokens(content: bytes) -> bytes:
    return re.sub(rb'name="csrfmiddlewaretoken" value="[^"]+"', b"", content)


def test_a_repeat_view_renders_no_body(client, officer, dataset):
    first = _page(client, officer, dataset)
    assert BODY in _rendered(first)
    again = _page(client, officer, dataset)
    assert BODY not in _rendered(again)
    assert _strip_tokens(again.content) == _strip_tokens(first.content)
    assert b"47677" in again.content  # the first rows, for the officer


def test_what_is_kept_for_an_officer_never_reaches_a_steward(client, officer, steward, dataset):
    _page(client, officer, dataset)
    (key,) = _kept()
    cache.set(key, ("<p>OFFICER-BODY</p>",))
    assert b"OFFICER-BODY" in _page(client, officer, dataset).content  # read back
    seen = _page(client, steward, dataset)
    assert b"OFFICER-BODY" not in seen.content and b"47677" not in seen.content
    assert BODY in _rendered(seen) and len(_kept()) == 2
    assert b"Save tags" not in seen.content  # a steward tags nothing


def test_the_outsider_gets_nothing(client, officer, outsider, dataset):
    _page(client, officer, dataset)
    client.force_login(outsider)
    assert client.get(reverse("datasets:detail", args=[dataset.pk])).status_code == 404


def test_a_change_to_what_the_page_shows_is_shown_at_once(client, officer, steward, dataset):
    from anonweb.datasets.services import dataset_set_tags
    from anonweb.releases.budget import budget_set

    assert b'data-testid="anonymize"' in _page(client, officer, dataset).content
    untagged = {column: "" for column in dataset.tags}
    dataset_set_tags(user=officer, dataset=dataset, tags=untagged)
    page = _page(client, officer, dataset).content
    assert b'data-testid="anonymize"' not in page and b'<option value="" selected>' in page
    assert len(_kept()) == 2
    job = job_create(user=officer, team=dataset.team, kind=JobKind.PROFILE, dataset=dataset)
    assert f"#{job.pk} ".encode() in _page(client, officer, dataset).content
    budget_set(user=steward, dataset=dataset, epsilon="2.5")
    assert b"Budget \xce\xb5 = 2.5" in _page(client, steward, dataset).content


def test_each_view_carries_its_own_csrf_token_and_its_forms_post(officer, dataset):
    client = Client(enforce_csrf_checks=True)
    tokens = []
    for _ in range(2):
        page = _page(client, officer, dataset).content
        assert CSRF_MARK.encode() not in page
        form = page[page.index(b'data-testid="assess-form"') :]
        found = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', form)
        tokens.append(found.group(1).decode())
    assert tokens[0] != tokens[1]
    response = client.post(
        reverse("datasets:assess", args=[dataset.pk]), {"csrfmiddlewaretoken": tokens[1]}
    )
    assert response.status_code == 302  # to the job it started


def test_the_kept_body_holds_none_of_the_source_s_records(client, officer, dataset):
    from anonweb.datasets.storage import _kept_key

    first = _page(client, officer, dataset)
    assert b"47677" in first.content
    (body,) = _kept().values()
    assert "47677" not in body and "Flo Hart" not in body  # the first rows are kept apart
    # and read back from their own entry, which a purge forgets with the files
    cache.set(_kept_key(dataset.storage_key, "preview-html"), (20, "<p>MARK</p>"))
    assert b"<p>MARK</p>" in _page(client, officer, dataset).content
