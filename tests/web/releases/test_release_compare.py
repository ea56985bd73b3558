"""The comparison of two versions of a source: it works for each role (analysts see the published
figures only), other teams' releases are 404, releases of different sources are refused, and a
hand-made pair shows exactly its differences flagged."""

from __future__ import annotations

import pandas as pd
import pytest
from django.urls import reverse

from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.jobs.publication import release_create
from anonweb.releases.models import ReleaseStatus
from anonweb.releases.services import release_review
from tests.web.api.test_api import api
from tests.web.conftest import csv_upload
from tests.web.releases.test_published_report import launch

pytestmark = pytest.mark.django_db

OVERRIDE = "Reviewed by the steward: accepted for the comparison test."


def plan(age_level: int, title: str = "") -> dict:
    return {
        "version": 1,
        "quasi_identifiers": ["age", "sex"],
        "sensitive": ["disease"],
        "hierarchies": {"age": {"builder": "interval", "width": 10}},
        "steps": [
            {"kind": "drop", "params": {"columns": ["name", "zip"]}},
            {"kind": "generalize", "params": {"levels": {"age": age_level}}},
        ],
    }


@pytest.fixture
def pair(officer, steward, dataset):
    """Two real releases of the source: ages in decades (v1) and in one band (v2)."""
    first = launch(officer, dataset, plan(1), "decades")
    second = launch(officer, dataset, plan(3), "one band")
    return first, second


def url(a, b, **extra) -> str:
    query = "&".join([f"a={a.pk}", f"b={b.pk}", *(f"{k}={v}" for k, v in extra.items())])
    return f"{reverse('releases:compare')}?{query}"


def hand_made(dataset, officer, *, plan: dict, report: dict, published: dict, gate: dict):
    job = Job.objects.create(
        team=dataset.team,
        dataset=dataset,
        created_by=officer,
        kind=JobKind.ANONYMIZE,
        status=JobStatus.RUNNING,
    )
    return release_create(
        job=job,
        frame=pd.DataFrame({"age": ["20-29"]}),
        plan=plan,
        report=report,
        title="hand made",
        published_report=published,
        gate=gate,
    )


def test_the_officer_sees_both_versions_side_by_side(client, officer, pair):
    first, second = pair
    client.force_login(officer)
    response = client.get(url(first, second))
    assert response.status_code == 200
    page = response.content.decode()
    assert "version 1 and version 2" in page
    sections = [s for s in ('data-section="plan"', 'data-section="risk"') if s in page]
    assert len(sections) == 2
    # the plans differ in the age level only. By hand: in decades with sex the classes are
    # (20s, F) x2, (20s, M), (40s, M) x2, (50s, F): k = 1 over 4 classes; with age in one band
    # only sex is left: k = 3 over 2 classes.
    assert first.report["risk_after"]["k"] == 1 and second.report["risk_after"]["k"] == 3
    assert '<td>k (smallest class)</td><td class="value">1</td><td class="value better">3' in page
    assert '<td>Classes</td><td class="value">4</td><td class="value">2</td>' in page
    assert 'data-section="findings"' in page  # the gate's findings: internal
    # utility, from the source: ages in one band are all "*" (every cell suppressed, loss 1)
    assert 'data-section="utility"' in page
    assert (
        '<td>age: share of cells suppressed (*)</td><td class="value better">0</td>'
        '<td class="value">1</td>'
    ) in page
    assert '<td>age: information loss</td><td class="value better">' in page
    assert "Step 2 (generalize) · levels.age" in page


def test_the_release_page_and_list_lead_to_the_comparison(client, officer, pair):
    first, second = pair
    client.force_login(officer)
    page = client.get(reverse("releases:detail", args=[second.pk])).content.decode()
    assert 'data-testid="compare-with"' in page and f'<option value="{first.pk}">' in page
    listing = client.get(reverse("releases:list")).content.decode()
    assert f"{reverse('releases:compare')}?a={first.pk}" in listing
    chooser = client.get(f"{reverse('releases:compare')}?a={first.pk}")
    assert (
        chooser.status_code == 200 and f'<option value="{second.pk}">' in chooser.content.decode()
    )
    source = client.get(reverse("datasets:detail", args=[first.dataset_id])).content.decode()
    assert 'data-testid="compare-pick"' in source


def test_analysts_compare_the_published_figures_of_approved_releases(
    client, analyst, steward, pair
):
    first, second = pair
    client.force_login(analyst)
    assert client.get(url(first, second)).status_code == 404  # pending: not theirs to see
    for release in pair:
        release_review(user=steward, release=release, decision="approve", override=OVERRIDE)
    response = client.get(url(first, second))
    assert response.status_code == 200
    page = response.content.decode()
    assert "published figures only" in page
    assert 'data-section="findings"' not in page and "Recipient" not in page
    assert 'data-section="utility"' not in page and "cells changed" not in page
    assert 'data-section="risk"' in page
    rest = api(analyst).get(f"/api/v1/releases/compare/?a={first.pk}&b={second.pk}").json()
    assert rest["report"] == "published" and rest["findings"] == [] and rest["utility"] == []
    assert rest["a"]["recipient"] is None


def test_a_rejected_release_is_compared_by_staff_only(client, steward, analyst, officer, pair):
    first, second = pair
    release_review(user=steward, release=first, decision="approve", override=OVERRIDE)
    release_review(user=steward, release=second, decision="reject")
    client.force_login(officer)
    assert client.get(url(first, second)).status_code == 200
    client.force_login(analyst)
    assert client.get(url(first, second)).status_code == 404


def test_other_teams_releases_are_404(client, outsider, pair):
    first, second = pair
    client.force_login(outsider)
    assert client.get(url(first, second)).status_code == 404
    assert client.get(f"{reverse('releases:compare')}?a={first.pk}").status_code == 404
    answer = api(outsider).get(f"/api/v1/releases/compare/?a={first.pk}&b={second.pk}")
    assert answer.status_code == 404


def test_a_release_of_another_team_is_404_even_beside_ones_own(
    client, officer, outsider, other_team, pair
):
    from anonweb.datasets.services import dataset_create

    theirs = dataset_create(user=outsider, team=other_team, upload=csv_upload(), name="theirs")
    job = Job.objects.create(
        team=other_team,
        dataset=theirs,
        created_by=outsider,
        kind=JobKind.ANONYMIZE,
        status=JobStatus.RUNNING,
    )
    foreign = release_create(job=job, frame=pd.DataFrame({"a": [1]}), plan={}, report={}, title="x")
    client.force_login(officer)
    assert client.get(url(pair[0], foreign)).status_code == 404


def test_releases_of_different_sources_are_refused(client, officer, team, pair):
    from anonweb.datasets.services import dataset_create

    other = dataset_create(user=officer, team=team, upload=csv_upload(), name="another source")
    elsewhere = launch(officer, other, plan(1), "elsewhere")
    client.force_login(officer)
    response = client.get(url(pair[0], elsewhere))
    assert response.status_code == 400
    assert "different sources" in response.content.decode()
    answer = api(officer).get(f"/api/v1/releases/compare/?a={pair[0].pk}&b={elsewhere.pk}")
    assert answer.status_code == 400 and "different sources" in answer.json()["errors"][0]
    same = client.get(url(pair[0], pair[0]))
    assert same.status_code == 400


def test_a_hand_made_pair_is_flagged_row_by_row(client, officer, dataset):
    def made(k: int, loss: float, findings: list) -> object:
        step = {
            "step": 1,
            "kind": "optimal_generalization",
            "levels": {"age": 1 if k == 2 else 2},
            "k": k,
            "suppressed": 0,
            "information_loss": loss,
            "information_loss_measure": "ARX's Loss",
            "loss_per_qi": {"age": loss},
        }
        risk = {
            "k": k,
            "classes": 6 // k,
            "rows": 6,
            "uniques": 0,
            "suppressed": 0,
            "prosecutor_risk": {"max": 1 / k, "mean": 1 / k},
            "quasi_identifiers": ["age"],
        }
        report = {"steps": [step], "risk_after": risk, "rows_in": 6, "privacy_cost": {}}
        return hand_made(
            dataset,
            officer,
            plan={
                "version": 1,
                "quasi_identifiers": ["age"],
                "steps": [{"kind": "optimal_generalization", "params": {"k": k}}],
                "note": "Évaluation",
            },
            report=report,
            published={"steps": [step], "risk_after": risk, "privacy_cost": {}},
            gate={"findings": findings},
        )

    block = {"code": "risk_k", "severity": "block", "columns": ["age"], "records": 6}
    a, b = made(2, 0.25, [block]), made(3, 0.5, [])
    client.force_login(officer)
    page = client.get(url(a, b)).content.decode()
    rows = page.split("<tr")
    flagged = [r for r in rows if 'data-testid="differs"' in r]
    labels = sorted(r.split("<td>")[1].split("</td>")[0] for r in flagged)
    assert labels == sorted(
        [
            "Step 1 (optimal_generalization) · k",
            "k (smallest class)",
            "Classes",
            "Highest prosecutor risk",
            "Average prosecutor risk",
            "Level of age",
            "Information loss",
            "k reached",
            "Information loss of age",
            "age: information loss",  # the utility's, from the same report
            "Blocking findings",
            "risk_k (age)",
        ]
    )
    risk_k = next(r for r in flagged if "<td>k (smallest class)</td>" in r)
    assert '<td class="value">2</td><td class="value better">3</td>' in risk_k
    loss = next(r for r in flagged if "<td>Information loss</td>" in r)
    assert '<td class="value better">0.25</td><td class="value">0.5</td>' in loss
    assert "Évaluation" in page and "\\u00c9" not in page  # the plan JSON keeps its accents
    only = client.get(url(a, b, differences=1)).content.decode()
    assert only.count('data-testid="differs"') == len(flagged)
    assert "<td>Unique records</td>" not in only and "<td>Unique records</td>" in page


def test_the_api_compares_as_the_page_does(officer, pair):
    first, second = pair
    rest = api(officer)
    body = rest.get(f"/api/v1/releases/compare/?a={first.pk}&b={second.pk}").json()
    assert body["a"]["id"] == first.pk and body["b"]["version"] == second.version
    assert body["report"] == "internal"
    k_row = next(r for r in body["risk"] if r["label"] == "k (smallest class)")
    assert (k_row["a"], k_row["b"], k_row["differs"], k_row["better"]) == (
        1,
        3,
        True,
        "b",
    )
    assert body["differences"] == sum(
        r["differs"]
        for key in ("plan", "risk", "loss", "utility", "dp", "findings")
        for r in body[key]
    )
    missing = rest.get(f"/api/v1/releases/compare/?a={first.pk}")
    assert missing.status_code == 400
    assert first.status == ReleaseStatus.PENDING


def test_dp_releases_compare_the_budget_spent_and_the_statistics(client, officer, steward, dataset):
    from anonweb.releases.budget import budget_set

    budget_set(user=steward, dataset=dataset, epsilon=5.0)

    def dp(epsilon: float) -> dict:
        return {
            "version": 1,
            "steps": [{"kind": "dp_release", "params": {"kind": "count", "epsilon": epsilon}}],
        }

    a, b = launch(officer, dataset, dp(0.5), "count"), launch(officer, dataset, dp(1.0), "count")
    client.force_login(officer)
    page = client.get(url(a, b)).content.decode()
    section = page.split('data-section="dp"')[1].split("</section>")[0]
    eps = section.split("<td>ε spent (central)</td>")[1].split("</tr>")[0]
    assert '<td class="value better">0.5</td><td class="value">1</td>' in eps
    # a count's Laplace scale is 1/ε: 2 and 1, so the second's interval is half as wide
    assert "<td>Statistic 1: noise scale</td>" in section
    assert a.report["steps"][0]["noise"]["scale"] == 2.0
    assert b.report["steps"][0]["noise"]["scale"] == 1.0
    scale = section.split("<td>Statistic 1: noise scale</td>")[1].split("</tr>")[0]
    assert '<td class="value">2</td><td class="value better">1</td>' in scale
    assert 'data-section="risk"' not in page  # no record-level risk for aggregates
