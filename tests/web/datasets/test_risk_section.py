"""The dataset page's risk section is rendered once per finished profile job and view kind: by
the job as it finishes, or by the first reader if the cache lost it, and never by two readers
at once. An officer's section (which quotes source records) is never what a steward receives,
and a purge leaves none of it behind."""

from __future__ import annotations

import threading

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from anonweb.common.charts import INTERNAL, PUBLISHED, builds, cached_view
from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.jobs.profile_page import ProfileSection, _key, profile_section
from anonweb.jobs.services import job_create
from tests.web.conftest import small_table

pytestmark = pytest.mark.django_db

ZIPS = [z for z in small_table()["zip"] if z != "47677"]


@pytest.fixture
def profile(officer, dataset):
    job = job_create(user=officer, team=dataset.team, kind=JobKind.PROFILE, dataset=dataset)
    job_execute(job_id=job.pk, worker="t")
    job = Job.objects.get(pk=job.pk)
    assert job.status == JobStatus.SUCCEEDED, job.error_detail
    return job


def _risk_page(client, user, dataset):
    client.force_login(user)
    response = client.get(reverse("datasets:detail", args=[dataset.pk]))
    assert response.status_code == 200
    return response


def test_the_profile_job_builds_both_views_as_it_finishes(client, officer, steward, dataset):
    before = builds["profile"]
    job = job_create(user=officer, team=dataset.team, kind=JobKind.PROFILE, dataset=dataset)
    job_execute(job_id=job.pk, worker="t")
    assert builds["profile"] == before + 2
    for user in (officer, steward, officer, steward):
        response = _risk_page(client, user, dataset)
        assert response.context["risk_section"].has_charts
        assert b'class="chart"' in response.content and b'data-testid="k"' in response.content
    assert builds["profile"] == before + 2  # every view read back


def test_viewing_the_risk_page_twice_builds_its_section_once(client, officer, steward, profile):
    cache.clear()
    before = builds["profile"]
    dataset = profile.dataset
    first = _risk_page(client, officer, dataset)
    second = _risk_page(client, officer, dataset)
    assert builds["profile"] == before + 1
    assert first.context["risk_section"] == second.context["risk_section"]
    _risk_page(client, steward, dataset)
    _risk_page(client, steward, dataset)
    assert builds["profile"] == before + 2


def test_what_was_kept_is_what_a_first_reader_builds(client, officer, steward, profile):
    kept = {who: _risk_page(client, who, profile.dataset) for who in (officer, steward)}
    cache.clear()
    fresh = {who: _risk_page(client, who, profile.dataset) for who in (officer, steward)}
    for who in kept:
        assert kept[who].context["risk_section"] == fresh[who].context["risk_section"]
    # the officer's quotes the source's disclosing classes, the steward's does not
    assert all(z in kept[officer].context["risk_section"].html for z in ZIPS)
    assert not any(z in kept[steward].context["risk_section"].html for z in ZIPS)


def test_a_steward_never_receives_the_section_built_for_an_officer(
    client, officer, steward, outsider, profile
):
    dataset = profile.dataset
    marked = ProfileSection(view=INTERNAL, html="MARK", has_charts=False)
    cache.set(_key(profile, view=INTERNAL, purged=False), (marked,))
    assert b"MARK" in _risk_page(client, officer, dataset).content  # it is read

    seen = _risk_page(client, steward, dataset)
    assert b"MARK" not in seen.content and seen.context["risk_section"].view == PUBLISHED
    assert not any(z.encode() in seen.content for z in ZIPS)
    client.force_login(outsider)
    assert client.get(reverse("datasets:detail", args=[dataset.pk])).status_code == 404


def test_the_page_reads_neither_the_job_s_result_nor_its_params(client, officer, profile):
    _risk_page(client, officer, profile.dataset)
    with CaptureQueriesContext(connection) as ctx:
        _risk_page(client, officer, profile.dataset)
    job_reads = [q["sql"] for q in ctx.captured_queries if 'FROM "jobs_job"' in q["sql"]]
    assert job_reads and not [sql for sql in job_reads if '"jobs_job"."result"' in sql]
    assert not [sql for sql in job_reads if '"jobs_job"."params"' in sql]


def test_a_purge_drops_the_officer_s_section_and_builds_from_the_scrubbed_result(
    client, officer, profile, django_capture_on_commit_callbacks
):
    from anonweb.jobs.retention import dataset_purge

    dataset = profile.dataset
    assert all(z.encode() in _risk_page(client, officer, dataset).content for z in ZIPS)
    with django_capture_on_commit_callbacks(execute=True):
        dataset_purge(user=officer, dataset=dataset, reason="test")
    assert cache.get(_key(profile, view=INTERNAL, purged=False)) is None
    after = _risk_page(client, officer, dataset)
    assert not any(z.encode() in after.content for z in ZIPS)
    assert after.context["risk_section"].view == INTERNAL and b'data-testid="k"' in after.content


def test_a_section_is_built_once_when_many_readers_miss_it_at_once(profile):
    cache.clear()
    calls = []
    gate = threading.Barrier(4)

    def build():
        calls.append(1)
        threading.Event().wait(0.3)  # long enough for every reader to miss it
        return "built"

    got = []

    def reader():
        gate.wait()
        got.append(cached_view("anonweb:test:single-flight", build, counter="test"))

    threads = [threading.Thread(target=reader) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == [1] and got == ["built"] * 4


def test_a_failed_build_lets_the_next_reader_build(profile):
    cache.clear()

    def fail():
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        cached_view("anonweb:test:failing", fail, counter="test")
    assert cached_view("anonweb:test:failing", lambda: 7, counter="test") == 7


def test_the_section_of_each_view_is_the_profile_as_that_reader_may_read_it(profile):
    internal = profile_section(job=profile, view=INTERNAL, purged=False)
    published = profile_section(job=profile, view=PUBLISHED, purged=False)
    assert all(z in internal.html for z in ZIPS)
    assert not any(z in published.html for z in ZIPS)
    assert internal.has_charts and published.has_charts


def test_the_tag_selectors_drawn_directly_are_django_s(dataset):
    import re

    from anonweb.dashboard.dataset_forms import TagForm

    def tags_only(html: str) -> str:
        return re.sub(r">\s+<", "><", str(html))

    form = TagForm(dataset=dataset)
    for i, (col, select) in enumerate(form.rows()):
        assert tags_only(select) == tags_only(form[f"col_{i}"])
        assert select.initial == dataset.tags.get(col["name"], "")
    assert "selected>Identifier" in tags_only(next(form.rows())[1])


def test_the_preview_is_rendered_once_per_table_and_goes_with_its_files(client, officer, dataset):
    from anonweb.datasets.storage import _kept_key, dataset_files_remove

    first = _risk_page(client, officer, dataset)
    key = _kept_key(dataset.storage_key, "preview-html")
    cache.set(key, (20, "<p>MARK</p>"))
    assert b"<p>MARK</p>" in _risk_page(client, officer, dataset).content  # read back
    assert b"Flo Hart" in first.content
    dataset_files_remove(dataset.storage_key)
    assert cache.get(key) is None


def test_the_officer_s_page_draws_the_tag_selectors_as_markup(client, officer, steward, dataset):
    page = _risk_page(client, officer, dataset).content
    assert b'<select name="col_0" id="id_col_0">' in page and b"&lt;select" not in page
    assert b'<select name="col_0"' not in _risk_page(client, steward, dataset).content
