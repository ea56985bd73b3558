"""A large upload shows how much has been sent, then lands on the dataset's page; a file over
the limit is refused before a byte is sent, and the server refuses it too."""

import re

import pytest

from anonweb.accounts.models import Role
from anonweb.datasets.models import Dataset
from tests.browser.conftest import login
from tests.web.factories import TeamFactory, member

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def _csv(path, rows: int) -> None:
    with open(path, "w") as out:
        out.write("id,age,zip\n")
        for i in range(rows):
            out.write(f"{i},{20 + i % 60},{i % 100_000:05d}\n")


def test_upload_progress_then_the_dataset_page(page, live_server, tmp_path, settings):
    team = TeamFactory(name="Registry")
    member(team, Role.PRIVACY_OFFICER, username="olivia")
    source = tmp_path / "big.csv"
    _csv(source, 400_000)  # about 6 MB
    login(page, live_server.url, "olivia")
    page.goto(f"{live_server.url}/datasets/upload/")
    page.fill("#id_name", "big")
    page.set_input_files("#id_file", str(source))
    page.click("main button[type=submit]")
    page.wait_for_selector("[data-testid=upload-progress]", state="visible")
    page.wait_for_url(re.compile(r".*/datasets/\d+/$"), timeout=60_000)
    dataset = Dataset.objects.get(name="big")
    assert page.url.endswith(f"/datasets/{dataset.pk}/")
    assert dataset.size_bytes == source.stat().st_size


def test_a_file_over_the_limit_is_refused_before_it_is_sent(page, live_server, tmp_path, settings):
    settings.ANONWEB_MAX_UPLOAD_BYTES = 1000
    team = TeamFactory(name="Registry")
    member(team, Role.PRIVACY_OFFICER, username="olivia")
    source = tmp_path / "big.csv"
    _csv(source, 1000)
    login(page, live_server.url, "olivia")
    page.goto(f"{live_server.url}/datasets/upload/")
    page.fill("#id_name", "big")
    page.set_input_files("#id_file", str(source))
    page.click("main button[type=submit]")
    text = page.locator("[data-testid=upload-progress-text]")
    text.wait_for()
    assert "over the limit of 1000 bytes" in text.inner_text()
    assert page.url.endswith("/datasets/upload/")
    assert not Dataset.objects.exists()
