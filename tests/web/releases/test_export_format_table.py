"""An export format is one entry of ``EXPORT_FORMATS``: a pipe-separated format registered from
here, and nothing else edited, is served by the API's download and its links, offered and served
by the release page, described by the sign-off report and written by ``manage.py anonymize``."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from django.core.management import call_command
from django.urls import reverse
from rest_framework.test import APIClient

from anonweb.accounts.models import ApiToken
from anonweb.audit.models import AuditEvent
from anonweb.core.io.export import (
    DOWNLOAD_FORMATS,
    EXPORT_FORMATS,
    ExportFormat,
    register_export_format,
    safe_csv_bytes,
    unregister_export_format,
)
from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.jobs.publication import release_create
from anonweb.releases.services import release_approve

pytestmark = pytest.mark.django_db

FIX = Path(__file__).resolve().parents[2] / "fixtures"

# Written on request from the stored Parquet, formulas neutralised as in the CSV.
PSV = ExportFormat(
    "psv",
    ".psv",
    "text/plain; charset=utf-8",
    safe_csv_bytes,
    label="PSV",
    description="pipe-separated (psv)",
    sep="|",
    neutralised=True,
)


@pytest.fixture
def psv() -> Iterator[ExportFormat]:
    register_export_format(PSV)
    yield PSV
    unregister_export_format("psv")


@pytest.fixture
def release(dataset, officer, steward):
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
    made = release_create(job=job, frame=frame, plan={"steps": []}, report={}, title="zips")
    return release_approve(user=steward, release=made)


def api(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {ApiToken.issue(user)[1]}")
    return client


EXPECTED = b'zip|note|n\r\n476**|"\'=HYPERLINK(""x"")"|-3\r\n479**|ok|4\r\n'


def test_the_api_serves_a_format_added_to_the_table(psv, release, analyst, steward):
    assert DOWNLOAD_FORMATS["psv"] == "text/plain; charset=utf-8"
    response = api(analyst).get(f"/api/v1/releases/{release.pk}/download/?format=psv")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/plain; charset=utf-8"
    assert response["Content-Disposition"].endswith('.psv"')
    assert response.content == EXPECTED  # the formula is neutralised, as in the CSV
    downloads = AuditEvent.objects.filter(action="release.downloaded")
    assert [e.details["format"] for e in downloads] == ["psv"]

    link = api(steward).post(
        f"/api/v1/releases/{release.pk}/links/",
        {"recipient": "auditor", "format": "psv", "hours": 2},
        format="json",
    )
    assert link.status_code == 201, link.content
    assert link.json()["format"] == "psv"


def test_a_format_leaves_the_table_with_its_registration(release, analyst):
    assert "psv" not in EXPORT_FORMATS
    response = api(analyst).get(f"/api/v1/releases/{release.pk}/download/?format=psv")
    assert response.status_code == 400
    assert "choose one of csv, parquet, xlsx" in str(response.json())


def test_the_page_offers_and_serves_a_format_added_to_the_table(psv, client, release, analyst):
    client.force_login(analyst)
    page = client.get(reverse("releases:detail", args=[release.pk])).content.decode()
    url = reverse("releases:download", args=[release.pk])
    assert f'href="{url}?format=psv" data-testid="download-psv">Download PSV</a>' in page
    response = client.get(url, {"format": "psv"})
    assert response.status_code == 200 and response.content == EXPECTED


def test_the_link_form_and_a_link_serve_a_format_added_to_the_table(psv, client, release, steward):
    client.force_login(steward)
    page = client.get(reverse("releases:detail", args=[release.pk])).content.decode()
    assert '<option value="psv">psv</option>' in page
    issued = client.post(
        reverse("releases:link_issue", args=[release.pk]),
        {"label": "auditor", "format": "psv", "hours": 2},
    )
    assert issued.status_code == 200
    url = issued.context["url"]
    client.logout()
    response = client.post(url)
    assert response.status_code == 200 and response.content == EXPECTED
    assert response["Content-Disposition"].endswith('.psv"')


def test_the_signoff_report_says_what_a_format_written_on_request_is_made_from(
    psv, client, release, officer
):
    client.force_login(officer)
    html = client.get(reverse("releases:signoff", args=[release.pk])).content.decode()
    said = html.split('data-testid="psv"', 1)[1].split("</p>", 1)[0]
    assert 'data-source="data.parquet"' in said
    assert "The pipe-separated (psv) download is not stored" in said
    assert "every text cell neutralised as in the CSV" in said
    # the xlsx is still described as before
    assert 'data-testid="xlsx" data-source="data.parquet"' in html


def _anonymize(out: Path, *extra: str) -> None:
    call_command(
        "anonymize", str(FIX / "test2.csv"), "--sep", ";", "--qi", "ZIPCode,Age",
        "--hierarchy", f"ZIPCode={FIX / 'test2_hierarchy_ZIPCode.csv'}",
        "--hierarchy", f"Age={FIX / 'test2_hierarchy_Age.csv'}",
        "--k", "2", "--purpose", "format check", "--recipient", "test suite",
        "--out", str(out), *extra,
    )  # fmt: skip


def test_anonymize_writes_a_format_added_to_the_table_by_suffix_or_name(psv, tmp_path):
    _anonymize(tmp_path / "out.psv")
    by_suffix = (tmp_path / "out.psv").read_bytes()
    assert by_suffix.startswith(b"ZIPCode|Age|")
    _anonymize(tmp_path / "out.txt", "--out-format", "psv")
    assert (
        pd.read_csv(tmp_path / "out.txt", sep="|").shape
        == pd.read_csv(io.BytesIO(by_suffix), sep="|").shape
    )


def test_anonymize_writes_parquet_by_its_suffix_and_csv_otherwise(tmp_path):
    _anonymize(tmp_path / "out.parquet")
    _anonymize(tmp_path / "out.tsv")  # any other suffix: CSV in the input's separator, as before
    table = pd.read_parquet(tmp_path / "out.parquet")
    assert list(table.columns[:2]) == ["ZIPCode", "Age"]
    assert (tmp_path / "out.tsv").read_text().startswith("ZIPCode;Age;")
    assert len(pd.read_csv(tmp_path / "out.tsv", sep=";")) == len(table)
