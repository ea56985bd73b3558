"""What each role receives of a release, on every surface that shows one (the release page, the
comparison page and its API, the release API and its list): analysts never a key of the
internal report, nor the gate, conflicts, attacks or utility; the team's officers and stewards
the internal report whole. All of it is decided by ``release_view_for_user``."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from anonweb.core.release.compare import compare_releases
from anonweb.core.release.plan import plan_from_dict
from anonweb.core.release.report import PUBLISHED_KEYS, public_step_keys
from anonweb.releases.selectors import release_view_for_user
from anonweb.releases.services import release_review
from anonweb.releases.storage import write_private_json
from tests.web.api.test_api import api
from tests.web.releases.test_published_report import launch
from tests.web.releases.test_release_compare import plan

pytestmark = pytest.mark.django_db

OVERRIDE = "Reviewed by the steward: accepted for the reader test."
ROLES = ("analyst", "officer", "steward")


@pytest.fixture
def pair(officer, steward, dataset):
    """Two approved versions of the source, each with an internal report that describes the
    source (its row count and risk before) and attack figures naming reconstructed records."""
    out = [launch(officer, dataset, plan(1), "decades"), launch(officer, dataset, plan(3), "band")]
    for release in out:
        release_review(user=steward, release=release, decision="approve", override=OVERRIDE)
        release.refresh_from_db()
        write_private_json(
            release.storage_key,
            "attacks.json",
            {
                "skipped": "the release publishes aggregates, not records",
                "reconstruction": {
                    "determined": 1,
                    "releases": ["release 1"],
                    "columns": [{"column": "age", "determined": 1, "records": [4], "values": {}}],
                    "sentence": "one record",
                },
            },
        )
    return out


def internal_keys(release) -> set[str]:
    """The top-level keys of the internal report that the published one does not carry: the
    checks below are void unless there are some."""
    keys = set(release.report) - set(PUBLISHED_KEYS)
    assert {"rows_in", "risk_before"} <= keys
    return keys


def assert_published_only(report: dict, release) -> None:
    assert report == release.published_report
    assert set(report) <= set(PUBLISHED_KEYS)
    parsed = plan_from_dict(release.plan)
    for i, step in enumerate(report["steps"], 1):
        assert set(step) <= public_step_keys(parsed, step, i)
    assert not set(report) & internal_keys(release)


def user_of(role, request):
    return request.getfixturevalue(role)


@pytest.mark.parametrize("role", ROLES)
def test_the_selector_gives_each_role_its_view(role, request, pair):
    release = pair[0]
    user = user_of(role, request)
    view = release_view_for_user(release=release, user=user)
    if role == "analyst":
        assert not view.staff and not view.officer
        assert_published_only(view.report, release)
        assert view.findings == [] and view.conflicts == [] and view.gate is None
        assert view.attacks is None and view.utility is None
        assert view.recipient is None and view.recipients is None
        assert "findings" not in (view.override or {})
        assert view.report_name == "published"
    else:
        assert view.staff and view.officer == (role == "officer")
        assert view.report == release.report and view.report_name == "internal"
        assert view.findings == release.findings and view.gate is not None
        assert view.override == release.override
        column = view.attacks["reconstruction"]["columns"][0]
        # which records are reconstructed: privacy officers only
        assert ("records" in column) == (role == "officer")
    assert view.plan == release.plan


@pytest.mark.parametrize("role", ROLES)
def test_the_release_page(role, request, client, pair):
    release = pair[0]
    client.force_login(user_of(role, request))
    response = client.get(reverse("releases:detail", args=[release.pk]))
    assert response.status_code == 200
    context = response.context
    if role == "analyst":
        assert_published_only(context["report"], release)
        assert context["gate"] is None and context["conflicts"] == []
        assert context["attacks"] is None and context["utility"] is None
        page = response.content.decode()
        assert "source rows" not in page and "<th>Before</th>" not in page
    else:
        assert context["report"] == release.report
        assert context["gate"] is not None and context["attacks"] is not None


@pytest.mark.parametrize("role", ROLES)
def test_the_release_api_and_its_list(role, request, pair):
    client = api(user_of(role, request))
    one = client.get(f"/api/v1/releases/{pair[0].pk}/").json()
    listed = {r["id"]: r for r in client.get("/api/v1/releases/").json()}
    for release in pair:
        for answer in (listed[release.pk], one) if release is pair[0] else (listed[release.pk],):
            if role == "analyst":
                assert_published_only(answer["report"], release)
                assert answer["findings"] == [] and answer["conflicts"] == []
                assert answer["recipients"] is None and "findings" not in answer["override"]
            else:
                assert answer["report"] == json.loads(json.dumps(release.report))
                assert answer["findings"] == json.loads(json.dumps(release.findings))
                assert answer["override"]["findings"] == release.override["findings"]


@pytest.mark.parametrize("role", ROLES)
def test_the_comparison_page_and_api(role, request, client, pair):
    first, second = pair
    user = user_of(role, request)
    rest = api(user).get(f"/api/v1/releases/compare/?a={first.pk}&b={second.pk}").json()
    client.force_login(user)
    page = client.get(f"{reverse('releases:compare')}?a={first.pk}&b={second.pk}")
    assert page.status_code == 200
    text = json.dumps(rest)
    if role == "analyst":
        assert rest["report"] == "published" and page.context["staff"] is False
        # exactly the comparison of the two published reports, nothing else
        published = compare_releases(
            plan_a=first.plan,
            plan_b=second.plan,
            report_a=first.published_report,
            report_b=second.published_report,
        ).to_dict()
        assert {k: v for k, v in rest.items() if k not in ("a", "b", "report")} == json.loads(
            json.dumps(published)
        )
        assert rest["findings"] == [] and rest["utility"] == []
        assert rest["a"]["recipient"] is None and OVERRIDE not in text
        assert 'data-section="findings"' not in page.content.decode()
    else:
        assert rest["report"] == "internal" and page.context["staff"] is True
        assert rest["findings"] and rest["utility"]
        assert 'data-section="findings"' in page.content.decode()
