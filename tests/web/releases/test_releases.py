import pandas as pd
import pytest
from django.core.exceptions import PermissionDenied
from django.urls import reverse

from anonweb.audit.models import AuditEvent
from anonweb.jobs import publication
from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.jobs.publication import release_create
from anonweb.releases.models import Release, ReleaseStatus
from anonweb.releases.services import ReviewError, release_approve, release_reject
from anonweb.releases.storage import neutralise_cell, release_dir, safe_csv_bytes

pytestmark = pytest.mark.django_db


@pytest.fixture
def release(dataset, officer):
    job = Job.objects.create(
        team=dataset.team,
        dataset=dataset,
        created_by=officer,
        kind=JobKind.ANONYMIZE,
        status=JobStatus.RUNNING,
    )
    frame = pd.DataFrame(
        {"zip": ["476**", "479**"], "note": ['=HYPERLINK("x")', "ok"], "n": [-3, 4]}
    )
    return release_create(job=job, frame=frame, plan={"steps": []}, report={}, title="generalized")


def test_release_is_versioned_and_audited(release, dataset, officer):
    assert release.version == 1 and release.status == ReleaseStatus.PENDING
    assert (release_dir(release.storage_key) / "data.csv").exists()
    job2 = Job.objects.create(
        team=dataset.team,
        dataset=dataset,
        created_by=officer,
        kind=JobKind.ANONYMIZE,
        status=JobStatus.RUNNING,
    )
    second = release_create(
        job=job2, frame=pd.DataFrame({"a": [1]}), plan={}, report={}, title="again"
    )
    assert second.version == 2
    assert AuditEvent.objects.filter(action="release.created").count() == 2


def test_a_release_whose_row_cannot_be_written_leaves_no_files(
    dataset, officer, settings, monkeypatch
):
    job = Job.objects.create(
        team=dataset.team,
        dataset=dataset,
        created_by=officer,
        kind=JobKind.ANONYMIZE,
        status=JobStatus.RUNNING,
    )

    def boom(**kwargs):
        raise RuntimeError("database went away")

    monkeypatch.setattr(publication, "audit_record", boom)
    with pytest.raises(RuntimeError):
        release_create(job=job, frame=pd.DataFrame({"a": [1]}), plan={}, report={}, title="x")
    assert not Release.objects.exists()
    root = settings.MEDIA_ROOT / "releases"
    assert not root.exists() or not any(root.iterdir())


def test_the_requester_cannot_approve_their_own_release(release, officer, team):
    from anonweb.accounts.models import Membership, Role

    Membership.objects.create(team=team, user=officer, role=Role.DATA_STEWARD)
    with pytest.raises(PermissionDenied):
        release_approve(user=officer, release=release)
    release.refresh_from_db()
    assert release.status == ReleaseStatus.PENDING


def test_only_stewards_approve(release, analyst):
    with pytest.raises(PermissionDenied):
        release_approve(user=analyst, release=release)


def test_approve_once(release, steward):
    release_approve(user=steward, release=release, note="fine")
    with pytest.raises(ReviewError):
        release_reject(user=steward, release=release)
    release.refresh_from_db()
    assert release.status == ReleaseStatus.APPROVED and release.reviewed_by == steward
    assert AuditEvent.objects.filter(action="release.approved").count() == 1


def test_analysts_see_approved_releases_only(client, release, analyst, steward):
    client.force_login(analyst)
    assert client.get(reverse("releases:detail", args=[release.pk])).status_code == 404
    assert client.get(reverse("releases:download", args=[release.pk])).status_code == 404
    release_approve(user=steward, release=release)
    assert client.get(reverse("releases:detail", args=[release.pk])).status_code == 200
    response = client.get(reverse("releases:download", args=[release.pk]))
    assert response.status_code == 200
    body = b"".join(response.streaming_content).decode()
    assert "'=HYPERLINK" in body  # formula neutralised
    assert "\r\n476**," in body and ",-3\r\n" in body  # numbers untouched
    assert AuditEvent.objects.filter(action="release.downloaded").count() == 1


def test_the_release_page_offers_csv_parquet_and_xlsx_and_serves_each(
    client, release, analyst, steward
):
    import io

    release_approve(user=steward, release=release)
    client.force_login(analyst)
    page = client.get(reverse("releases:detail", args=[release.pk])).content.decode()
    url = reverse("releases:download", args=[release.pk])
    for fmt in ("csv", "parquet", "xlsx"):
        assert f'href="{url}?format={fmt}" data-testid="download-{fmt}"' in page

    parquet = client.get(url, {"format": "parquet"})
    assert parquet.status_code == 200
    assert parquet["Content-Type"] == "application/vnd.apache.parquet"
    assert parquet["Content-Disposition"].endswith('.parquet"')
    table = pd.read_parquet(io.BytesIO(b"".join(parquet.streaming_content)))
    assert table["n"].tolist() == [-3, 4]  # numbers stay numbers, not CSV text

    xlsx = client.get(url, {"format": "xlsx"})
    assert xlsx.status_code == 200
    assert pd.read_excel(io.BytesIO(xlsx.content))["note"].tolist() == ['\'=HYPERLINK("x")', "ok"]

    csv = client.get(url)  # no format: CSV, as before
    assert csv["Content-Type"] == "text/csv"
    assert b"".join(csv.streaming_content).startswith(b"zip,note,n\r\n")

    refused = client.get(url, {"format": "pdf"})
    assert refused.status_code == 400
    assert "choose one of csv, parquet, xlsx" in refused.content.decode()

    downloads = AuditEvent.objects.filter(action="release.downloaded").order_by("seq")
    assert [(e.actor_name, e.details["format"]) for e in downloads] == [
        ("ana", "parquet"),
        ("ana", "xlsx"),
        ("ana", "csv"),
    ]


def test_the_page_offers_no_xlsx_for_a_release_past_a_sheet(client, release, officer, monkeypatch):
    from dataclasses import replace

    from anonweb.core.io.export import EXPORT_FORMATS

    monkeypatch.setitem(EXPORT_FORMATS, "xlsx", replace(EXPORT_FORMATS["xlsx"], max_rows=1))
    client.force_login(officer)
    page = client.get(reverse("releases:detail", args=[release.pk])).content.decode()
    assert 'data-testid="download-csv"' in page and 'data-testid="download-parquet"' in page
    assert 'data-testid="download-xlsx"' not in page
    refused = client.get(reverse("releases:download", args=[release.pk]), {"format": "xlsx"})
    assert refused.status_code == 400
    assert "more than a spreadsheet holds" in refused.content.decode()


def test_review_through_the_page(client, release, steward):
    client.force_login(steward)
    page = client.get(reverse("releases:detail", args=[release.pk]))
    assert b"Approve" in page.content
    client.post(
        reverse("releases:review", args=[release.pk]), {"decision": "approve", "note": "ok"}
    )
    release.refresh_from_db()
    assert release.status == ReleaseStatus.APPROVED


def test_release_pages_hide_other_teams(client, release, outsider):
    client.force_login(outsider)
    assert client.get(reverse("releases:detail", args=[release.pk])).status_code == 404
    assert client.get(reverse("releases:download", args=[release.pk])).status_code == 404
    assert b"generalized" not in client.get(reverse("releases:list")).content


@pytest.mark.parametrize(
    "cell,expected",
    [
        ("=1+1", "'=1+1"),
        ("+SUM(A1)", "'+SUM(A1)"),
        ("-2+3", "'-2+3"),
        ("@cmd", "'@cmd"),
        ("\tx", "'\tx"),
        ("plain", "plain"),
        (5, 5),
        (None, None),
    ],
)
def test_neutralise_cell(cell, expected):
    assert neutralise_cell(cell) == expected


def test_header_cells_are_neutralised_too():
    assert safe_csv_bytes(pd.DataFrame({"=cmd": [1]})).startswith(b"'=cmd")


@pytest.mark.parametrize(
    "cell,expected",
    [
        ("x\r=1+1", "x\r'=1+1"),
        ("x\n+1", "x\n'+1"),
        ("x\r\n@cmd", "x\r\n'@cmd"),
        ("\r=1", "'\r'=1"),
        ("a\nb", "a\nb"),
    ],
)
def test_cells_are_neutralised_after_every_line_break(cell, expected):
    assert neutralise_cell(cell) == expected


def test_a_carriage_return_inside_a_cell_cannot_start_a_formula_cell():
    import csv
    import io

    body = safe_csv_bytes(pd.DataFrame({"note": ["x\r=1+1", "ok"], "n": [1, 2]})).decode()
    rows = list(csv.reader(io.StringIO(body, newline="")))
    assert rows == [["note", "n"], ["x\r'=1+1", "1"], ["ok", "2"]]
    # A reader that ignores quoting and splits on any line break sees no formula either.
    for line in body.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        for cell in line.split(","):
            assert not cell.lstrip('"').startswith(("=", "+", "-", "@"))
