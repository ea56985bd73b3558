"""The release page's utility section and its API: for the team's officers and stewards only,
computed once from the source and kept privately."""

from pathlib import Path

import pytest
from django.core.cache import cache
from django.urls import reverse

from anonweb.releases.storage import read_private_json, release_dir
from anonweb.releases.utility import UTILITY_FILE, UTILITY_VERSION
from tests.web.api.test_api import api
from tests.web.releases.test_published_report import OVERRIDE, launch

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


@pytest.fixture
def computations(monkeypatch):
    """Every computation of a release's utility (the core's function, counted as it runs), with
    how many releases existed as rows while it ran."""
    from anonweb.releases import utility
    from anonweb.releases.models import Release

    calls: list[int] = []
    real = utility.release_utility

    def counted(*args, **kwargs):
        calls.append(Release.objects.count())
        return real(*args, **kwargs)

    monkeypatch.setattr(utility, "release_utility", counted)
    return calls


def test_published_with_its_utility_so_readers_never_compute_it(
    client, officer, steward, dataset, computations
):
    from anonweb.datasets.storage import dataset_dir

    release = launch(officer, dataset, FIXED, "fixed")
    assert computations == [0]  # by the job that published it, before its row existed
    stored = read_private_json(release.storage_key, UTILITY_FILE)
    assert stored["version"] == UTILITY_VERSION and stored["utility"]["columns"]
    client.force_login(steward)
    page = client.get(reverse("releases:detail", args=[release.pk]))
    assert page.context["utility"] == stored["utility"]
    assert api(officer).get(f"/api/v1/releases/{release.pk}/utility/").json() == {
        "release": release.pk,
        **stored["utility"],
    }
    assert computations == [0]
    import shutil

    shutil.rmtree(dataset_dir(dataset.storage_key))  # the source is gone: the stored copy answers
    assert (
        page.context["utility"]
        == client.get(reverse("releases:detail", args=[release.pk])).context["utility"]
    )


@pytest.mark.parametrize("plan", [FIXED, SEARCH, DP], ids=["fixed", "search", "dp"])
def test_measured_at_publication_as_the_first_reader_would(officer, steward, dataset, plan):
    """What the job stored is what a reader computes from the stored source and the row."""
    from anonweb.releases.budget import budget_set
    from anonweb.releases.models import Release
    from anonweb.releases.utility import release_utility_get

    budget_set(user=steward, dataset=dataset, epsilon=5.0)
    release = launch(officer, dataset, plan, "r")
    stored = read_private_json(release.storage_key, UTILITY_FILE)["utility"]
    (release_dir(release.storage_key) / "private" / UTILITY_FILE).unlink()
    assert release_utility_get(release=Release.objects.get(pk=release.pk)) == stored


def test_an_older_release_gets_its_utility_from_its_first_reader(
    client, officer, dataset, computations
):
    """Released before the utility was measured at publication: computed once, on first view."""
    release = launch(officer, dataset, FIXED, "fixed")
    (release_dir(release.storage_key) / "private" / UTILITY_FILE).unlink()
    cache.clear()  # nor were its pages built when it was published
    computations.clear()
    client.force_login(officer)
    first = client.get(reverse("releases:detail", args=[release.pk])).context["utility"]
    assert computations == [1]
    assert read_private_json(release.storage_key, UTILITY_FILE)["utility"] == first
    assert client.get(reverse("releases:detail", args=[release.pk])).context["utility"] == first
    assert computations == [1]


def test_a_utility_that_cannot_be_measured_does_not_stop_the_release(
    client, officer, dataset, monkeypatch, caplog
):
    from anonweb.releases import utility

    def broken(*args, **kwargs):
        raise MemoryError("no room for the distributions")

    monkeypatch.setattr(utility, "release_utility", broken)
    with caplog.at_level("WARNING", logger="anonweb.releases.utility"):
        release = launch(officer, dataset, FIXED, "fixed")
    assert "could not be measured at publication" in caplog.text
    assert "no room for the distributions" in caplog.text
    assert release.status == "pending" and release.sha256
    private = release_dir(release.storage_key) / "private"
    assert not [p.name for p in private.iterdir() if "utility" in p.name]
    monkeypatch.undo()
    client.force_login(officer)
    page = client.get(reverse("releases:detail", args=[release.pk]))
    assert page.context["utility"]["columns"]
    assert (
        read_private_json(release.storage_key, UTILITY_FILE)["utility"] == page.context["utility"]
    )


def test_a_utility_file_that_cannot_be_written_leaves_nothing_half_written(
    officer, dataset, monkeypatch
):
    """The disk fills up halfway through the utility file: the release is published all the
    same, and neither the half-written temporary nor a utility file is left."""
    import os

    real_open, real_fdopen = os.open, os.fdopen
    opened: dict[int, Path] = {}
    attempts = []

    def tracking_open(path, flags, mode=0o777, **kwargs):
        fd = real_open(path, flags, mode, **kwargs)
        opened[fd] = Path(path)
        return fd

    class FullDisk:
        def __init__(self, fh):
            self.fh = fh

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

        def write(self, data):
            self.fh.write(data[: len(data) // 2])
            self.fh.flush()
            raise OSError(28, "No space left on device")

    def full_disk(fd, *args, **kwargs):
        fh = real_fdopen(fd, *args, **kwargs)
        path = opened.pop(fd, None)
        if path is None or UTILITY_FILE not in path.name:
            return fh
        attempts.append(path)
        return FullDisk(fh)

    monkeypatch.setattr(os, "open", tracking_open)
    monkeypatch.setattr(os, "fdopen", full_disk)
    release = launch(officer, dataset, FIXED, "fixed")
    monkeypatch.undo()
    private = release_dir(release.storage_key) / "private"
    assert len(attempts) == 1 and attempts[0].parent == private
    assert not [p.name for p in private.iterdir() if "utility" in p.name]
    assert (release_dir(release.storage_key) / "data.csv").exists()


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


def test_an_engine_release_without_its_utility_is_measured_by_a_job_not_the_page(
    client, officer, steward, analyst, monkeypatch
):
    """Released by an engine before its utility was measured at publication: the page shows
    it pending and never measures it (the engine may be Spark, whose session a request must
    not start); a job does, once however often it is asked for, and the page shows it."""
    from anonweb.common.files import files
    from anonweb.jobs.models import Job, JobKind, JobStatus
    from anonweb.releases import utility
    from anonweb.releases.storage import private_name
    from tests.web.api.test_api import run_queued
    from tests.web.api.test_api_engine_release import assert_same_figures, release_with

    made = release_with(officer, monkeypatch, "duckdb")
    release = made["stored_release"]
    files().delete(private_name(release.storage_key, UTILITY_FILE))
    cache.clear()
    measured: list[str] = []
    real = utility.engine_release_utility

    def counted(engine, *args, **kwargs):
        measured.append(engine.name)
        return real(engine, *args, **kwargs)

    monkeypatch.setattr(utility, "engine_release_utility", counted)
    detail = reverse("releases:detail", args=[release.pk])
    for reader in (officer, steward):
        client.force_login(reader)
        page = client.get(detail)
        assert page.context["utility"] is None and page.context["utility_pending"] is True
        assert 'data-testid="utility-pending"' in page.content.decode()
    assert measured == [] and read_private_json(release.storage_key, UTILITY_FILE) is None
    # analysts neither see it nor start it
    client.force_login(analyst)
    assert 'data-testid="utility-pending"' not in client.get(detail).content.decode()
    assert client.post(reverse("releases:utility", args=[release.pk])).status_code in (403, 404)
    # asked twice, one job
    client.force_login(steward)
    first = client.post(reverse("releases:utility", args=[release.pk]))
    second = client.post(reverse("releases:utility", args=[release.pk]))
    (job,) = Job.objects.filter(kind=JobKind.UTILITY)
    assert first.url == second.url == reverse("jobs:detail", args=[job.pk])
    assert measured == []
    (done,) = run_queued(JobKind.UTILITY)
    assert done.status == JobStatus.SUCCEEDED, done.error
    assert measured == ["duckdb"]
    client.force_login(officer)  # the figures whole, the source's labels with them
    page = client.get(detail)
    assert page.context["utility_pending"] is False
    assert_same_figures(page.context["utility"], made["utility"])
    assert 'data-testid="utility"' in page.content.decode()
    assert measured == ["duckdb"]
