import pytest
from django.urls import reverse

from anonweb.audit.models import AuditEvent
from anonweb.datasets.models import Dataset
from anonweb.jobs.models import Job
from tests.web.conftest import csv_upload

pytestmark = pytest.mark.django_db


def test_upload_works_for_a_privacy_officer(client, officer, team):
    client.force_login(officer)
    response = client.post(
        reverse("datasets:upload"), {"team": team.pk, "name": "visits", "file": csv_upload(sep=";")}
    )
    assert response.status_code == 302
    ds = Dataset.objects.get(name="visits")
    assert ds.rows == 6
    assert ds.column_names == ["name", "zip", "age", "sex", "disease"]
    assert ds.tags["name"] == "identifier"  # guessed from the column name
    event = AuditEvent.objects.get(action="dataset.uploaded")
    assert event.details["rows"] == 6
    assert "Ann Lee" not in str(event.details)  # never raw values


@pytest.mark.parametrize("role_user", ["steward", "analyst"])
def test_upload_needs_the_privacy_officer_role(client, request, role_user, team):
    user = request.getfixturevalue(role_user)
    client.force_login(user)
    response = client.post(
        reverse("datasets:upload"), {"team": team.pk, "name": "x", "file": csv_upload()}
    )
    assert response.status_code == 302
    assert not Dataset.objects.exists()


def test_upload_into_another_team_is_refused(client, officer, other_team):
    client.force_login(officer)
    response = client.post(
        reverse("datasets:upload"), {"team": other_team.pk, "name": "x", "file": csv_upload()}
    )
    assert response.status_code == 400
    assert not Dataset.objects.exists()


@pytest.mark.parametrize(
    "content,name,message",
    [
        (b"", "empty.csv", b"is empty"),
        (b"a,b\n", "header.csv", b"no data rows"),
        (b"\x00\x01\x02garbage", "data.parquet", b"cannot be read as parquet"),
        (b"a,b\n1,2\n", "evil.exe", b"unsupported file type"),
    ],
)
def test_bad_files_get_a_clear_message_and_leave_nothing(
    client, officer, team, content, name, message, settings
):
    from django.core.files.uploadedfile import SimpleUploadedFile

    client.force_login(officer)
    response = client.post(
        reverse("datasets:upload"),
        {"team": team.pk, "name": "bad", "file": SimpleUploadedFile(name, content)},
    )
    assert response.status_code == 400
    assert message in response.content
    assert not Dataset.objects.exists()
    media = settings.MEDIA_ROOT / "datasets"
    assert not media.exists() or not any(media.iterdir())


def test_upload_limit(client, officer, team, settings):
    settings.ANONWEB_MAX_UPLOAD_BYTES = 50
    client.force_login(officer)
    response = client.post(
        reverse("datasets:upload"), {"team": team.pk, "name": "big", "file": csv_upload()}
    )
    assert response.status_code == 400
    assert b"over the upload limit" in response.content


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
    assert len(callbacks) == 1  # enqueued only after commit


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
