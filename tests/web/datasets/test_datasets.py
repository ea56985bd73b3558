import hashlib
import html

import pytest
from django.test import TestCase
from django.urls import reverse

from anonweb.audit.models import AuditEvent
from anonweb.datasets.models import Dataset
from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import Job, JobKind, JobStatus
from tests.web.conftest import csv_upload

pytestmark = pytest.mark.django_db


def _read_queued_uploads() -> list[Job]:
    """Run the queued jobs that read uploads, as the worker would."""
    jobs = list(Job.objects.filter(kind=JobKind.PARSE, status=JobStatus.QUEUED))
    for job in jobs:
        with TestCase.captureOnCommitCallbacks(execute=True):  # files go once rows commit
            job_execute(job_id=job.pk, worker="test")
        job.refresh_from_db()
    return jobs


def _files_left(settings) -> list[str]:
    root = settings.MEDIA_ROOT
    return sorted(
        str(p.relative_to(root))
        for sub in ("datasets", "incoming")
        if (root / sub).exists()
        for p in (root / sub).rglob("*")
        if p.is_file()
    )


def test_upload_returns_at_once_and_a_job_reads_the_file(client, officer, team, settings):
    client.force_login(officer)
    response = client.post(
        reverse("datasets:upload"), {"team": team.pk, "name": "visits", "file": csv_upload(sep=";")}
    )
    ds = Dataset.objects.get(name="visits")
    assert response.status_code == 302 and response.url == reverse("datasets:detail", args=[ds.pk])
    # Nothing was read in the request: the file is in place, hashed, and a job will read it.
    assert ds.status == "parsing" and ds.rows == 0 and ds.columns == []
    assert ds.source_sha256 == hashlib.sha256(csv_upload(sep=";").read()).hexdigest()
    assert _files_left(settings) == [f"datasets/{ds.storage_key}/original.csv"]
    assert oct((settings.MEDIA_ROOT / _files_left(settings)[0]).stat().st_mode & 0o777) == "0o600"
    page = client.get(reverse("datasets:detail", args=[ds.pk])).content.decode()
    assert 'data-testid="reading"' in page and "Reading the file" in page
    (job,) = _read_queued_uploads()
    assert job.status == JobStatus.SUCCEEDED, job.error
    ds.refresh_from_db()
    assert ds.status == "ready" and ds.rows == 6
    assert ds.column_names == ["name", "zip", "age", "sex", "disease"]
    assert {c["name"]: c["type"] for c in ds.columns}["age"] == "integer"
    assert ds.tags["name"] == "identifier"  # guessed from the column name
    uploaded = AuditEvent.objects.get(action="dataset.uploaded")
    assert (
        uploaded.details["bytes"] == ds.size_bytes
        and uploaded.details["sha256"] == ds.source_sha256
    )
    assert AuditEvent.objects.get(action="dataset.parsed").details["rows"] == 6
    assert "Ann Lee" not in str(list(AuditEvent.objects.values_list("details_text", flat=True)))
    page = client.get(reverse("datasets:detail", args=[ds.pk])).content.decode()
    assert "Ann Lee" in page and 'data-testid="reading"' not in page
    assert sorted(_files_left(settings)) == [
        f"datasets/{ds.storage_key}/data.parquet",
        f"datasets/{ds.storage_key}/original.csv",
    ]
    # Raw data is readable by the service's user alone, the table as much as the upload.
    modes = {
        name: oct((settings.MEDIA_ROOT / name).stat().st_mode & 0o777)
        for name in _files_left(settings)
    }
    assert set(modes.values()) == {"0o600"}, modes


@pytest.mark.parametrize("role_user", ["steward", "analyst"])
def test_upload_needs_the_privacy_officer_role(client, request, role_user, team, settings):
    user = request.getfixturevalue(role_user)
    client.force_login(user)
    response = client.post(
        reverse("datasets:upload"), {"team": team.pk, "name": "x", "file": csv_upload()}
    )
    assert response.status_code == 302
    assert not Dataset.objects.exists() and not Job.objects.exists()
    assert _files_left(settings) == []


def test_upload_into_another_team_is_refused(client, officer, other_team, settings):
    client.force_login(officer)
    response = client.post(
        reverse("datasets:upload"), {"team": other_team.pk, "name": "x", "file": csv_upload()}
    )
    assert response.status_code == 400
    assert not Dataset.objects.exists()
    assert _files_left(settings) == []


@pytest.mark.parametrize(
    "name,content,message",
    [
        ("evil.exe", b"a,b\n1,2\n", "unsupported file type"),
        ("empty.csv", b"", "The submitted file is empty"),
    ],
)
def test_what_the_request_can_tell_is_refused_at_once(
    client, officer, team, settings, name, content, message
):
    from django.core.files.uploadedfile import SimpleUploadedFile

    client.force_login(officer)
    response = client.post(
        reverse("datasets:upload"),
        {"team": team.pk, "name": "bad", "file": SimpleUploadedFile(name, content)},
    )
    assert response.status_code == 400
    assert message in response.content.decode()
    assert not Dataset.objects.exists() and _files_left(settings) == []


@pytest.mark.parametrize(
    "content,name,message",
    [
        (b"\n\n  \n", "blank.csv", "is empty"),
        (b"a,b\n", "header.csv", "no data rows"),
        (b"\x00\x01\x02garbage", "data.parquet", "cannot be read as parquet"),
        (b"a,b\n1,2\n3,4,5\n", "ragged.csv", "row 3 (the header is row 1) has 3 value(s)"),
        (b"a,b\n1,\x002\n", "nul.csv", "line 2 contains a NUL byte"),
        (b"PK\x03\x04 not really", "book.xlsx", "not an .xlsx workbook"),
    ],
)
def test_a_file_that_cannot_be_read_fails_with_a_reason_and_leaves_nothing(
    client, officer, team, content, name, message, settings
):
    from django.core.files.uploadedfile import SimpleUploadedFile

    client.force_login(officer)
    response = client.post(
        reverse("datasets:upload"),
        {"team": team.pk, "name": "bad", "file": SimpleUploadedFile(name, content)},
    )
    assert response.status_code == 302
    (job,) = _read_queued_uploads()
    ds = Dataset.objects.get(name="bad")
    assert job.status == JobStatus.FAILED and message in job.error_detail
    assert ds.status == "failed" and message in ds.error and "\n" not in ds.error
    assert ds.rows == 0 and ds.columns == []
    assert _files_left(settings) == []  # not the upload, not half a table
    page = client.get(reverse("datasets:detail", args=[ds.pk])).content.decode()
    assert 'data-testid="read-failed"' in page and html.escape(message) in page
    # The officer corrects the file and uploads it again under the same name.
    response = client.post(
        reverse("datasets:upload"), {"team": team.pk, "name": "bad", "file": csv_upload()}
    )
    assert response.status_code == 302
    _read_queued_uploads()
    assert Dataset.objects.get(name="bad").status == "ready"
    assert AuditEvent.objects.filter(action="dataset.discarded").count() == 1


def test_work_waits_until_the_upload_is_read(client, officer, team):
    from anonweb.core.errors import CoreError
    from anonweb.datasets.services import dataset_set_tags

    client.force_login(officer)
    client.post(reverse("datasets:upload"), {"team": team.pk, "name": "v", "file": csv_upload()})
    ds = Dataset.objects.get(name="v")
    with pytest.raises(CoreError, match="still being read"):
        dataset_set_tags(user=officer, dataset=ds, tags={"age": "quasi_identifier"})
    response = client.post(reverse("datasets:assess", args=[ds.pk]), follow=True)
    assert "still being read" in response.content.decode()
    assert client.get(reverse("jobs:plan", args=[ds.pk])).status_code == 302
    assert not Job.objects.exclude(kind=JobKind.PARSE).exists()


def test_cancelling_the_read_fails_the_upload_and_keeps_nothing(client, officer, team, settings):
    client.force_login(officer)
    client.post(reverse("datasets:upload"), {"team": team.pk, "name": "v", "file": csv_upload()})
    job = Job.objects.get(kind=JobKind.PARSE)
    with TestCase.captureOnCommitCallbacks(execute=True):
        client.post(reverse("jobs:cancel", args=[job.pk]))
    ds = Dataset.objects.get(name="v")
    assert ds.status == "failed" and "cancelled" in ds.error
    assert _files_left(settings) == []


def test_a_lost_worker_fails_the_upload(officer, team, settings):
    from datetime import timedelta

    from django.utils import timezone

    from anonweb.jobs.services import dataset_upload, jobs_reap_stale

    dataset, job = dataset_upload(user=officer, team=team, upload=csv_upload(), name="v")
    Job.objects.filter(pk=job.pk).update(
        status=JobStatus.RUNNING, heartbeat_at=timezone.now() - timedelta(hours=1)
    )
    with TestCase.captureOnCommitCallbacks(execute=True):
        assert jobs_reap_stale() == 1
    dataset.refresh_from_db()
    assert dataset.status == "failed" and "worker stopped" in dataset.error
    assert _files_left(settings) == []


def test_upload_limit_while_the_file_arrives(client, officer, team, settings):
    settings.ANONWEB_MAX_UPLOAD_BYTES = 50
    client.force_login(officer)
    response = client.post(
        reverse("datasets:upload"), {"team": team.pk, "name": "big", "file": csv_upload()}
    )
    assert response.status_code == 400
    assert b"over the limit of 50 bytes" in response.content
    assert not Dataset.objects.exists() and _files_left(settings) == []


@pytest.mark.parametrize("path", ["/datasets/upload/", "/api/v1/datasets/"])
def test_a_body_declared_over_the_limit_is_refused_before_it_is_read(client, officer, path):
    client.force_login(officer)
    # FakePayload raises if anything reads past its (empty) content: the body is never read.
    response = client.generic(
        "POST",
        path,
        b"",
        content_type="multipart/form-data; boundary=x",
        CONTENT_LENGTH=str(3 * 1024**3),
    )
    assert response.status_code == 413
    assert "over the limit of 2.0 GB" in response.content.decode()
    if path.startswith("/api/"):
        assert response.json() == {
            "error": "the upload is 3.0 GB, over the limit of 2.0 GB (ANONWEB_MAX_UPLOAD_BYTES)"
        }
    assert not Dataset.objects.exists()


def test_detail_works_and_shows_raw_rows_to_officers_only(client, dataset, officer, steward):
    client.force_login(officer)
    page = client.get(reverse("datasets:detail", args=[dataset.pk]))
    assert page.status_code == 200
    assert b"Ann Lee" in page.content
    client.force_login(steward)
    page = client.get(reverse("datasets:detail", args=[dataset.pk]))
    assert page.status_code == 200
    assert b"Ann Lee" not in page.content


def test_detail_hides_other_teams_data(client, dataset, outsider):
    client.force_login(outsider)
    assert client.get(reverse("datasets:detail", args=[dataset.pk])).status_code == 404
    assert b"patients" not in client.get(reverse("datasets:list")).content


def test_analysts_never_see_source_datasets(client, dataset, analyst):
    client.force_login(analyst)
    assert client.get(reverse("datasets:detail", args=[dataset.pk])).status_code == 404


def test_tagging_is_audited_and_officer_only(client, dataset, officer, steward):
    client.force_login(steward)
    client.post(
        reverse("datasets:detail", args=[dataset.pk]), {f"col_{i}": "other" for i in range(5)}
    )
    dataset.refresh_from_db()
    assert dataset.tags["zip"] == "quasi_identifier"
    client.force_login(officer)
    data = {
        "col_0": "identifier",
        "col_1": "other",
        "col_2": "quasi_identifier",
        "col_3": "quasi_identifier",
        "col_4": "sensitive",
    }
    assert client.post(reverse("datasets:detail", args=[dataset.pk]), data).status_code == 302
    dataset.refresh_from_db()
    assert dataset.tags["zip"] == "other"
    assert AuditEvent.objects.filter(action="dataset.tagged").latest("seq").details == {
        "changed": {"zip": "other"}
    }


def test_assess_launches_a_profile_job(
    client, dataset, officer, django_capture_on_commit_callbacks
):
    client.force_login(officer)
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        response = client.post(reverse("datasets:assess", args=[dataset.pk]))
    job = Job.objects.get(dataset=dataset)
    assert response.url == reverse("jobs:detail", args=[job.pk])
    assert job.status == "queued"
    # enqueued only after commit (beside the audit event's anchor)
    assert [c.__qualname__ for c in callbacks if c.__module__ != "anonweb.audit.services"] == [
        "job_create.<locals>.<lambda>"
    ]


def test_assess_needs_the_officer_role(client, dataset, steward):
    client.force_login(steward)
    response = client.post(reverse("datasets:assess", args=[dataset.pk]))
    assert response.status_code == 403
    assert not Job.objects.exists()


def test_profile_result_is_rendered_as_charts(dataset):
    from anonweb.datasets.services import dataset_profile

    result = dataset_profile(dataset=dataset, progress=lambda *a: None)
    assert result["risk"]["k"] == 1
    assert result["risk"]["rows"] == 6
    from anonweb.core.assessment.charts import risk_charts

    charts = risk_charts(result["risk"])
    assert {c["id"] for c in charts} >= {"chart-class-sizes", "chart-records-at-risk"}


@pytest.mark.parametrize("fmt", ["xlsx", "parquet", "tsv"])
def test_excel_parquet_and_tsv_uploads(client, officer, team, fmt, tmp_path):
    import io

    from django.core.files.uploadedfile import SimpleUploadedFile

    from tests.web.conftest import small_table

    df = small_table()
    buf = io.BytesIO()
    if fmt == "xlsx":
        df.to_excel(buf, index=False)
    elif fmt == "parquet":
        df.to_parquet(buf, index=False)
    else:
        buf.write(df.to_csv(index=False, sep="\t").encode())
    client.force_login(officer)
    upload = SimpleUploadedFile(f"patients.{fmt}", buf.getvalue())
    response = client.post(
        reverse("datasets:upload"), {"team": team.pk, "name": fmt, "file": upload}
    )
    assert response.status_code == 302, response.content.decode()[:500]
    (job,) = _read_queued_uploads()
    assert job.status == JobStatus.SUCCEEDED, job.error
    ds = Dataset.objects.get(name=fmt)
    assert ds.rows == 6 and ds.column_names == list(df.columns)
    assert {c["name"]: c["dtype"] for c in ds.columns}["age"] == "numeric"
    # Typed formats keep a ZIP column written as text; a text file's digits read as numbers.
    assert {c["name"]: c["dtype"] for c in ds.columns}["zip"] == (
        "numeric" if fmt == "tsv" else "text"
    )


def test_population_size_adds_journalist_risk_and_population_uniqueness(
    client, officer, steward, dataset
):
    from anonweb.datasets.services import dataset_profile

    client.force_login(steward)
    client.post(reverse("datasets:population", args=[dataset.pk]), {"population_size": "60000"})
    dataset.refresh_from_db()
    assert dataset.population_size is None  # officers only
    client.force_login(officer)
    response = client.post(
        reverse("datasets:population", args=[dataset.pk]), {"population_size": "3"}, follow=True
    )
    assert "cannot be smaller than the table" in response.content.decode()
    client.post(reverse("datasets:population", args=[dataset.pk]), {"population_size": "60,000"})
    dataset.refresh_from_db()
    assert dataset.population_size == 60000
    risk = dataset_profile(dataset=dataset, progress=lambda *a: None)["risk"]
    assert risk["population"]["population_size"] == 60000
    assert risk["journalist_risk"]["max"] < risk["prosecutor_risk"]["max"]
    assert risk["population"]["model"] in {"pitman", "zayatz", "snb"}


def test_the_sweep_removes_abandoned_incoming_files_and_failed_uploads(officer, team, settings):
    import os
    import time

    from anonweb.jobs.services import dataset_upload
    from anonweb.releases.storage_sweep import LEFTOVER_AGE, sweep_storage

    old = time.time() - LEFTOVER_AGE.total_seconds() - 60
    incoming = settings.MEDIA_ROOT / "incoming"
    incoming.mkdir(parents=True)
    (incoming / "tmpabandoned.upload").write_bytes(b"a,b\n1,2\n")
    (incoming / "tmpreceiving.upload").write_bytes(b"a,b\n")
    os.utime(incoming / "tmpabandoned.upload", (old, old))
    dataset, _job = dataset_upload(user=officer, team=team, upload=csv_upload(), name="v")
    # The process died after marking the upload failed, before its files were removed.
    Dataset.objects.filter(pk=dataset.pk).update(status="failed", error="x")
    folder = settings.MEDIA_ROOT / "datasets" / str(dataset.storage_key)
    os.utime(folder, (old, old))

    removed = sweep_storage()

    assert not (incoming / "tmpabandoned.upload").exists() and not folder.exists()
    assert (incoming / "tmpreceiving.upload").exists(), "an upload may still be arriving"
    assert sorted(removed) == [
        "datasets/" + str(dataset.storage_key),
        "incoming/tmpabandoned.upload",
    ]


def test_the_risk_page_and_its_json_explain_models_that_disagree(client, officer, team):
    """Zayatz's estimate is 34 times Pitman's at a sampling fraction of 0.03%: the page says
    which model Dankar et al.'s rule takes and why, and when each is unreliable."""
    import pandas as pd

    from anonweb.datasets.services import (
        dataset_create,
        dataset_set_population,
        dataset_set_tags,
    )
    from anonweb.jobs.services import job_create
    from tests.core.risk.test_population_models import INTERIOR_NEAR_EWENS

    sizes = [size for size, classes in INTERIOR_NEAR_EWENS.items() for _ in range(classes)]
    groups = [f"g{i}" for i, size in enumerate(sizes) for _ in range(size)]
    ds = dataset_create(
        user=officer, team=team, upload=csv_upload(pd.DataFrame({"group": groups})), name="s"
    )
    ds = dataset_set_tags(user=officer, dataset=ds, tags={"group": "quasi_identifier"})
    ds = dataset_set_population(user=officer, dataset=ds, population_size=9_228_000)
    job = job_create(user=officer, team=team, kind=JobKind.PROFILE, dataset=ds)
    job_execute(job_id=job.pk, worker="t")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error

    client.force_login(officer)
    page = client.get(reverse("datasets:detail", args=[ds.pk])).content.decode()
    assert 'data-testid="population-disagreement"' in page
    assert "The sampling fraction is 0.0333%, at most 10%" in page
    assert "Dankar et al.&#x27;s rule takes Pitman&#x27;s model" in page
    risk = client.get(f"/api/v1/datasets/{ds.pk}/risk/").json()
    note = risk["population"]["disagreement"]
    assert note["largest"] == "zayatz" and note["chosen"] == "pitman" and note["ratio"] > 10
    assert risk["population"]["pitman_fit"]["log_likelihood"] < 0


def test_a_workbook_of_several_sheets_asks_which_sheet(client, officer, team, settings):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from tests.core.io.test_ingest import _two_sheets

    client.force_login(officer)
    url = reverse("datasets:upload")
    refused = client.post(
        url, {"team": team.pk, "name": "p", "file": SimpleUploadedFile("p.xlsx", _two_sheets())}
    )
    assert refused.status_code == 400
    assert html.escape("the workbook has 2 sheets ('README', 'patients')") in (
        refused.content.decode()
    )
    assert not Dataset.objects.exists() and _files_left(settings) == []

    chosen = client.post(
        url,
        {
            "team": team.pk,
            "name": "p",
            "sheet": "patients",
            "file": SimpleUploadedFile("p.xlsx", _two_sheets()),
        },
    )
    assert chosen.status_code == 302
    (job,) = _read_queued_uploads()
    assert job.status == JobStatus.SUCCEEDED, job.error
    ds = Dataset.objects.get(name="p")
    assert ds.column_names == ["name", "age"] and ds.rows == 3 and ds.sheet == "patients"
    page = client.get(reverse("datasets:detail", args=[ds.pk])).content.decode()
    assert '<span data-testid="sheet">patients</span>' in page
    assert client.get(f"/api/v1/datasets/{ds.pk}/").json()["sheet"] == "patients"


def test_the_api_refuses_a_workbook_of_several_sheets_without_a_sheet(client, officer, team):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from tests.core.io.test_ingest import _two_sheets

    client.force_login(officer)
    answer = client.post(
        "/api/v1/datasets/", {"name": "p", "file": SimpleUploadedFile("p.xlsx", _two_sheets())}
    )
    assert answer.status_code == 400
    assert "choose the sheet to read" in " ".join(answer.json()["errors"])
    answer = client.post(
        "/api/v1/datasets/",
        {"name": "p", "sheet": "patients", "file": SimpleUploadedFile("p.xlsx", _two_sheets())},
    )
    assert answer.status_code == 202
    _read_queued_uploads()
    assert Dataset.objects.get(name="p").rows == 3


def test_a_file_read_with_the_wrong_separator_is_flagged_on_its_page_and_in_the_api(
    client, officer, steward, team
):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from tests.core.io.test_ingest import SEMICOLONS

    client.force_login(officer)
    client.post(
        reverse("datasets:upload"),
        {
            "team": team.pk,
            "name": "s",
            "separator": ",",
            "file": SimpleUploadedFile("s.csv", SEMICOLONS),
        },
    )
    (job,) = _read_queued_uploads()
    assert job.status == JobStatus.SUCCEEDED, job.error
    ds = Dataset.objects.get(name="s")
    assert ds.column_names == ["name;ssn;age"]
    client.force_login(steward)
    page = client.get(reverse("datasets:detail", args=[ds.pk])).content.decode()
    assert 'data-testid="read-warnings"' in page
    assert "the file is most likely separated by semicolons" in page
    (warning,) = client.get(f"/api/v1/datasets/{ds.pk}/").json()["warnings"]
    assert warning["code"] == "separator" and warning["columns"] == ["name;ssn;age"]
    event = AuditEvent.objects.get(action="dataset.parsed")
    assert event.details["warnings"] == ["separator"]


def test_decimal_commas_are_flagged_and_read_as_numbers_when_asked(client, officer, team):
    from django.core.files.uploadedfile import SimpleUploadedFile

    from tests.core.io.test_ingest import DECIMAL_COMMAS

    client.force_login(officer)
    client.post(
        "/api/v1/datasets/",
        {"name": "t", "file": SimpleUploadedFile("t.csv", DECIMAL_COMMAS.encode())},
    )
    client.post(
        "/api/v1/datasets/",
        {
            "name": "n",
            "decimal": ",",
            "file": SimpleUploadedFile("n.csv", DECIMAL_COMMAS.encode()),
        },
    )
    _read_queued_uploads()
    text, numbers = Dataset.objects.get(name="t"), Dataset.objects.get(name="n")
    (warning,) = client.get(f"/api/v1/datasets/{text.pk}/").json()["warnings"]
    assert warning["code"] == "decimal_comma" and warning["columns"] == ["income", "height"]
    page = client.get(reverse("datasets:detail", args=[text.pk])).content.decode()
    assert "Columns &#x27;income&#x27;, &#x27;height&#x27; hold numbers written" in page
    assert {c["name"]: c["type"] for c in numbers.columns}["income"] == "float"
    assert client.get(f"/api/v1/datasets/{numbers.pk}/").json()["warnings"] == []


def test_long_sample_cells_are_cut_with_the_whole_value_on_hover(client, officer, team):
    """Free text must not make each sample row tall: a cell shows its first 40 characters, and
    its title holds the whole value."""
    import pandas as pd

    from anonweb.datasets.services import dataset_create

    note = "patient reports mild pain since monday, follow-up advised in two weeks " * 4
    table = pd.DataFrame({"id": [1, 2], "notes": [note.strip(), "short note"]})
    ds = dataset_create(user=officer, team=team, upload=csv_upload(table), name="notes")
    client.force_login(officer)
    page = client.get(reverse("datasets:detail", args=[ds.pk])).content.decode()
    sample = page.split("First rows")[1]
    cut = note.strip()[:39] + "…"
    assert f'title="{html.escape(note.strip())}">{html.escape(cut)}</td>' in sample
    assert '<td class="clip">short note</td>' in sample
