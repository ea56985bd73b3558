"""The release page's utility section and its API: for the team's officers and stewards only,
computed once from the source and kept privately."""

import pytest
from django.urls import reverse

from anonweb.releases.storage import read_private_json
from anonweb.releases.utility import UTILITY_FILE
from tests.web.test_api import api
from tests.web.test_published_report import OVERRIDE, launch

pytestmark = pytest.mark.django_db

FIXED = {
    "version": 1,
    "quasi_identifiers": ["age", "sex"],
    "sensitive": ["disease"],
    "hierarchies": {"age": {"builder": "interval", "width": 10}},
    "steps": [
        {"kind": "drop", "params": {"columns": ["name", "zip"]}},
        {"kind": "generalize", "params": {"levels": {"age": 1}}},
    ],
}
SEARCH = {
    "version": 1,
    "quasi_identifiers": ["age", "sex"],
    "sensitive": ["disease"],
    "hierarchies": {
        "age": {"builder": "interval", "width": 10},
        "sex": {"rows": [["F", "*"], ["M", "*"]]},
    },
    "steps": [
        {"kind": "drop", "params": {"columns": ["name", "zip"]}},
        {"kind": "optimal_generalization", "params": {"k": 2, "suppression": 0.2}},
    ],
}
DP = {
    "version": 1,
    "steps": [
        {
            "kind": "dp_release",
            "params": {
                "kind": "histogram",
                "epsilon": 1.0,
                "columns": ["disease"],
                "categories": {"disease": ["flu", "gastritis", "cancer"]},
                "count_missing": False,
            },
        }
    ],
}


def test_the_officer_sees_distributions_and_the_fixed_levels_loss(client, officer, dataset):
    release = launch(officer, dataset, FIXED, "fixed")
    client.force_login(officer)
    page = client.get(reverse("releases:detail", args=[release.pk]))
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-testid="utility"' in html and 'data-testid="utility-chart"' in html
    utility = page.context["utility"]
    by_col = {c["column"]: c for c in utility["columns"]}
    assert set(by_col) == {"age", "sex", "disease"}
    age = by_col["age"]
    assert age["quasi_identifier"] and age["kind"] == "categorical"
    assert age["released"]["labels"] == ["[20, 30[", "[40, 50[", "[50, 60["]
    assert age["released"]["counts"] == [3, 2, 1]
    assert age["changed"] == 6  # every age is an interval now, whatever the row order
    assert by_col["sex"]["changed"] == 0 and by_col["sex"]["tvd"] == 0.0
    # ARX's Loss: the intervals cover 3, 3, 3, 2, 2, 1 of the 6 ages: (14 − 6) / (6 · 5)
    assert utility["information_loss"]["per_qi"] == {"age": pytest.approx(8 / 30, abs=1e-10)}
    assert 'data-testid="loss-age">0.2667<' in html
    assert len(page.context["utility_charts"]) == 3


def test_the_search_loss_agrees_with_the_report(client, steward, officer, dataset):
    release = launch(officer, dataset, SEARCH, "search")
    answer = api(steward).get(f"/api/v1/releases/{release.pk}/utility/")
    assert answer.status_code == 200
    loss = answer.json()["information_loss"]
    step = release.report["steps"][1]
    assert loss["source"] == "search" and loss["per_qi"] == step["loss_per_qi"]
    assert loss["aggregate_value"] == pytest.approx(step["information_loss"], abs=1e-12)
    assert answer.json()["records_suppressed"] == step["suppressed"]


def test_dp_statistics_with_their_intervals(client, officer, steward, dataset):
    from anonweb.releases.budget import budget_set

    budget_set(user=steward, dataset=dataset, epsilon=5.0)
    release = launch(officer, dataset, DP, "dp")
    client.force_login(steward)
    page = client.get(reverse("releases:detail", args=[release.pk]))
    html = page.content.decode()
    utility = page.context["utility"]
    assert utility["columns"] == []  # noisy counts are not records
    stats = {s["label"]: s for s in utility["dp"]}
    assert set(stats) == {"flu", "gastritis", "cancer"}
    half = release.report["steps"][0]["ci95_halfwidth"]
    assert all(s["ci95_halfwidth"] == half and s["interval"] == "exact" for s in stats.values())
    assert [stats[c]["exact"] for c in ("flu", "gastritis", "cancer")] == [3.0, 2.0, 1.0]
    assert html.count('data-testid="dp-statistic"') == 3


def test_computed_once_then_read_from_the_private_file(client, officer, dataset):
    from anonweb.datasets.storage import dataset_dir

    release = launch(officer, dataset, FIXED, "fixed")
    assert read_private_json(release.storage_key, UTILITY_FILE) is None
    first = api(officer).get(f"/api/v1/releases/{release.pk}/utility/").json()
    assert read_private_json(release.storage_key, UTILITY_FILE)["utility"]["columns"]
    import shutil

    shutil.rmtree(dataset_dir(dataset.storage_key))  # the source is gone: the stored copy answers
    assert api(officer).get(f"/api/v1/releases/{release.pk}/utility/").json() == first


def test_analysts_never_get_the_utility(client, officer, steward, analyst, dataset):
    from anonweb.releases.services import release_review

    release = launch(officer, dataset, FIXED, "fixed")
    release_review(user=steward, release=release, decision="approve", override=OVERRIDE)
    assert api(analyst).get(f"/api/v1/releases/{release.pk}/utility/").status_code == 403
    client.force_login(analyst)
    page = client.get(reverse("releases:detail", args=[release.pk]))
    assert page.status_code == 200 and page.context["utility"] is None
    assert 'data-testid="utility"' not in page.content.decode()


def test_a_purge_removes_the_stored_utility(officer, dataset, django_capture_on_commit_callbacks):
    from anonweb.jobs.retention import dataset_purge

    release = launch(officer, dataset, FIXED, "fixed")
    assert api(officer).get(f"/api/v1/releases/{release.pk}/utility/").status_code == 200
    assert read_private_json(release.storage_key, UTILITY_FILE) is not None
    with django_capture_on_commit_callbacks(execute=True):
        dataset_purge(user=officer, dataset=dataset, reason="retention test")
    assert read_private_json(release.storage_key, UTILITY_FILE) is None
    answer = api(officer).get(f"/api/v1/releases/{release.pk}/utility/")
    assert answer.status_code == 409 and "gone" in answer.json()["error"]
