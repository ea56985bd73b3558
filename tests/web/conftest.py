import io

import pandas as pd
import pytest
from django.core.cache import cache
from django.core.files.uploadedfile import SimpleUploadedFile

from anonweb.accounts.models import Role
from tests.web.factories import TeamFactory, member


@pytest.fixture(autouse=True)
def _media(settings, tmp_path):
    settings.MEDIA_ROOT = tmp_path / "media"
    # each test's chain is anchored apart: its database starts empty
    settings.ANONWEB_AUDIT_ANCHOR = tmp_path / "audit-anchor.log"
    # what one test built (charts, gate checks) is not another's: its database starts empty
    cache.clear()


@pytest.fixture
def team(db):
    return TeamFactory(name="Clinic", slug="clinic")


@pytest.fixture
def other_team(db):
    return TeamFactory(name="Elsewhere", slug="elsewhere")


@pytest.fixture
def officer(team):
    return member(team, Role.PRIVACY_OFFICER, username="olivia")


@pytest.fixture
def steward(team):
    return member(team, Role.DATA_STEWARD, username="sam")


@pytest.fixture
def analyst(team):
    return member(team, Role.ANALYST, username="ana")


@pytest.fixture
def outsider(other_team):
    return member(other_team, Role.PRIVACY_OFFICER, username="eve")


def small_table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "name": ["Ann Lee", "Bob Ray", "Cy Dunn", "Di Fox", "Ed Moss", "Flo Hart"],
            "zip": ["47677", "47602", "47678", "47905", "47909", "47906"],
            "age": [29, 22, 27, 43, 52, 47],
            "sex": ["F", "M", "F", "M", "F", "M"],
            "disease": ["flu", "flu", "gastritis", "cancer", "flu", "gastritis"],
        }
    )


def csv_upload(df=None, name="patients.csv", sep=","):
    buf = io.StringIO()
    (small_table() if df is None else df).to_csv(buf, index=False, sep=sep)
    return SimpleUploadedFile(name, buf.getvalue().encode(), content_type="text/csv")


@pytest.fixture
def dataset(officer, team):
    from anonweb.datasets.services import dataset_create, dataset_set_tags

    ds = dataset_create(user=officer, team=team, upload=csv_upload(), name="patients")
    return dataset_set_tags(
        user=officer,
        dataset=ds,
        tags={
            "name": "identifier",
            "zip": "quasi_identifier",
            "age": "quasi_identifier",
            "sex": "quasi_identifier",
            "disease": "sensitive",
        },
    )


@pytest.fixture
def queue_checks_off(monkeypatch):
    """Pages skip the queue's checks, as they do within PAGE_CHECK_SECONDS of the last one: a
    query count then measures the page, not whether five seconds happened to pass mid-test (the
    throttle and the checks themselves are tested in tests/web/jobs/test_job_queue_checks.py)."""
    from anonweb.jobs import services

    monkeypatch.setattr(services, "_due", lambda check: False)
