"""In the browser: an analyst downloads a release from its page as CSV, Parquet and XLSX, each
file in its own format; a steward issues a link for someone outside the team, who downloads the
file once without an account and is refused the second time."""

from __future__ import annotations

import pandas as pd
import pytest

from anonweb.accounts.models import Role
from anonweb.releases.services import release_approve
from tests.browser.conftest import login
from tests.browser.test_signoff_report import JUSTIFICATION, _release
from tests.web.factories import TeamFactory, member

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

READERS = {"csv": pd.read_csv, "parquet": pd.read_parquet, "xlsx": pd.read_excel}


def test_page_downloads_in_every_format_and_a_single_use_link(new_context, live_server, tmp_path):
    team = TeamFactory(name="Clinic")
    officer = member(team, Role.PRIVACY_OFFICER, username="olivia")
    steward = member(team, Role.DATA_STEWARD, username="sam")
    member(team, Role.ANALYST, username="ana")
    release = release_approve(
        user=steward, release=_release(officer, team), note="ok", override=JUSTIFICATION
    )
    url = f"{live_server.url}/releases/{release.pk}/"

    page = new_context(accept_downloads=True).new_page()
    login(page, live_server.url, "ana")
    page.goto(url)
    for fmt, read in READERS.items():
        with page.expect_download() as info:
            page.click(f"[data-testid=download-{fmt}]")
        download = info.value
        assert download.suggested_filename == f"clinic-v{release.version}.{fmt}"
        saved = tmp_path / download.suggested_filename
        download.save_as(saved)
        table = read(saved)
        assert len(table) == release.rows and list(table.columns) == release.columns

    page = new_context().new_page()
    login(page, live_server.url, "sam")
    page.goto(url)
    page.fill("[data-testid=link-form] input[name=label]", "auditor at the ministry")
    page.select_option("[data-testid=link-form] select[name=format]", "parquet")
    page.click("[data-testid=link-form] button")
    link = page.inner_text("[data-testid=link-url]")

    outside = new_context(accept_downloads=True).new_page()
    outside.goto(link)
    assert "clinic" not in outside.content().lower()
    with outside.expect_download() as info:
        outside.click("[data-testid=link-get]")
    saved = tmp_path / "from-link.parquet"
    info.value.save_as(saved)
    assert len(pd.read_parquet(saved)) == release.rows
    response = outside.goto(link)
    assert response is not None and response.status == 410
    assert "has been used already" in outside.inner_text("[data-testid=link-gone]")
