"""What-if on the dataset page: answered at once, the same figures as the risk profile of the
generalized table, login and team scoping, raw labels for privacy officers only."""

import json

import pytest
from django.urls import reverse

from anonweb.core.assessment.profile import assess_risk
from anonweb.datasets.services import dataset_set_hierarchy_spec
from anonweb.datasets.storage import load_histogram
from anonweb.datasets.whatif import whatif_forget
from tests.web.conftest import small_table

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh():
    whatif_forget()
    yield
    whatif_forget()


def _post(client, ds, body):
    return client.post(
        reverse("datasets:whatif", args=[ds.pk]), json.dumps(body), content_type="application/json"
    )


def test_levels_and_suppression_change_the_figures(client, officer, dataset):
    dataset_set_hierarchy_spec(
        user=officer, dataset=dataset, column="age", spec={"builder": "interval", "width": 10}
    )
    client.force_login(officer)
    first = client.get(reverse("datasets:whatif", args=[dataset.pk]))
    assert first.status_code == 200
    r = first.json()["result"]
    assert r["k"] == 1 and r["classes"] == 6 and r["suppressed"] == 0
    assert set(r["heights"]) == {"zip", "age", "sex"}
    assert r["level_names"]["zip"][1].endswith("*")
    # zip to its top, sex to its top, age in decades: {20s}=3, {40s}=2, {50s}=1
    top = {"zip": r["heights"]["zip"] - 1, "sex": r["heights"]["sex"] - 1, "age": 1}
    got = _post(client, dataset, {"levels": top, "suppression": 0.0}).json()
    assert (got["result"]["k"], got["result"]["classes"]) == (1, 3)
    assert got["result"]["information_loss"] > 0
    ids = {c["id"] for c in got["charts"]}
    assert {"chart-class-sizes", "chart-loss"} <= ids
    # a sixth of the rows may go: the unique fifty-year-old is suppressed, k = 2
    got = _post(client, dataset, {"levels": top, "suppression": 0.17}).json()["result"]
    assert (got["k"], got["classes"], got["suppressed"]) == (2, 2, 1)
    # the same figures as the table generalized and assessed from scratch
    df = small_table()
    df["zip"] = "*"
    df["sex"] = "*"
    df["age"] = df["age"].map(lambda a: f"[{a // 10 * 10}, {a // 10 * 10 + 10}[")
    want = assess_risk(df[df["age"] != "[50, 60["], quasi_identifiers=["zip", "age", "sex"])
    assert got["prosecutor_risk"] == want.to_dict()["prosecutor_risk"]
    # the 20s hold flu, flu, gastritis; the 40s cancer, gastritis
    assert got["sensitive"]["disease"]["l_distinct"] == 2
    # with k asked for, the models decide what goes
    got = _post(client, dataset, {"levels": top, "suppression": 0.0, "k": 2}).json()["result"]
    assert (got["satisfied"], got["required_suppression"], got["suppressed"]) == (False, 1, 0)


def test_bad_requests_say_why(client, officer, dataset):
    client.force_login(officer)
    r = _post(client, dataset, {"levels": {"zip": 99}})
    assert r.status_code == 400 and "out of range" in r.json()["error"]
    r = _post(client, dataset, {"levels": {"disease": 1}})
    assert r.status_code == 400 and "not a quasi-identifier" in r.json()["error"]
    r = _post(client, dataset, {"levels": {}, "suppression": 1.5})
    assert r.status_code == 400 and "[0, 1)" in r.json()["error"]
    r = client.post(
        reverse("datasets:whatif", args=[dataset.pk]), "{", content_type="application/json"
    )
    assert r.status_code == 400 and "not valid JSON" in r.json()["error"]


def test_steward_sees_figures_but_no_source_values(client, steward, dataset):
    client.force_login(steward)
    r = client.get(reverse("datasets:whatif", args=[dataset.pk])).json()["result"]
    assert r["k"] == 1
    assert "level_names" not in r and "level_labels" not in r


def test_other_teams_and_anonymous_get_nothing(client, outsider, analyst, dataset):
    url = reverse("datasets:whatif", args=[dataset.pk])
    assert client.get(url).status_code == 302
    client.force_login(outsider)
    assert client.get(url).status_code == 404
    client.force_login(analyst)
    assert client.get(url).status_code == 404


def test_the_table_is_encoded_once(client, officer, dataset, monkeypatch):
    from anonweb.datasets import whatif

    calls = []
    real = whatif.load_frame

    def counting(*args, **kwargs):
        calls.append(args)
        return real(*args, **kwargs)

    monkeypatch.setattr(whatif, "load_frame", counting)
    client.force_login(officer)
    for lv in range(3):
        assert _post(client, dataset, {"levels": {"sex": lv % 2}}).status_code == 200
    assert len(calls) == 1


def test_dataset_page_has_the_sliders_card(client, officer, dataset):
    client.force_login(officer)
    page = client.get(reverse("datasets:detail", args=[dataset.pk])).content.decode()
    assert 'data-testid="whatif"' in page and "js/whatif.js" in page


def _described(classes):
    return sorted(
        (
            tuple(sorted((q, str(v)) for q, v in c["quasi_identifiers"].items())),
            c["size"],
            c["value"],
        )
        for c in classes
    )


def test_api_what_if_is_the_risk_profile_plus_suppression_and_loss(officer, steward, dataset):
    from tests.web.api.test_api import api, run_queued

    client = api(officer)
    url = f"/api/v1/datasets/{dataset.pk}/what-if/"
    r = client.post(url, {"levels": {}, "suppression": 0.0}, format="json")
    assert r.status_code == 200
    got = r.json()
    # level 0 everywhere, nothing suppressed: exactly the latest risk profile's figures
    assert client.post(f"/api/v1/datasets/{dataset.pk}/assessments/").status_code == 202
    run_queued()
    risk = client.get(f"/api/v1/datasets/{dataset.pk}/risk/").json()
    for key in risk:
        if key == "sensitive":
            for name, sa in risk[key].items():
                for field, value in sa.items():
                    if field == "disclosing_classes":  # labels are the hierarchy's text
                        assert _described(got[key][name][field]) == _described(value)
                    else:
                        assert got[key][name][field] == value, (name, field)
        elif key not in ("file", "population", "engine"):  # engine: how the profile was read
            assert got[key] == risk[key], key
    assert got["suppressed"] == 0 and got["information_loss"] == 0.0
    assert "level_names" in got
    top = {q: h - 1 for q, h in got["heights"].items()}
    moved = client.post(url, {"levels": top, "suppression": 0.2}, format="json").json()
    assert (moved["k"], moved["classes"], moved["suppressed"]) == (6, 1, 0)
    assert moved["information_loss"] == 1.0
    assert "level_names" not in api(steward).post(url, {"levels": {}}, format="json").json()
    r = client.post(url, {"levels": {"zip": 42}}, format="json")
    assert r.status_code == 400 and "out of range" in r.json()["errors"][0]


def test_plan_check_lists_every_problem_and_the_cost(client, officer, steward, dataset):
    url = reverse("jobs:plan_check", args=[dataset.pk])
    client.force_login(officer)
    plan = {
        "version": 1,
        "quasi_identifiers": ["zip", "age", "sex"],
        "sensitive": ["disease"],
        "hierarchies": {"zip": {"builder": "mask"}, "age": {"builder": "interval", "width": -1}},
        "steps": [{"kind": "optimal_generalization", "params": {"k": 0, "suppression": 2}}],
    }
    r = client.post(url, json.dumps(plan), content_type="application/json").json()
    text = " ".join(r["errors"])
    assert "'width'" in text and "'k'" in text and "'suppression'" in text
    assert r["privacy"] is None
    plan["hierarchies"] = {"zip": {"builder": "mask"}, "age": {"builder": "interval", "width": 10}}
    plan["hierarchies"]["sex"] = {"rows": [["F", "*"], ["M", "*"]]}
    plan["steps"] = [{"kind": "dp_release", "params": {"kind": "count", "epsilon": 0.5}}]
    r = client.post(url, json.dumps(plan), content_type="application/json").json()
    assert r["errors"] == [] and r["privacy"]["total"]["epsilon"] == 0.5
    client.force_login(steward)
    assert client.post(url, "{}", content_type="application/json").status_code == 403


def test_plan_page_json_keeps_accents(client, officer, team):
    from anonweb.datasets.services import dataset_create, dataset_set_tags
    from tests.web.conftest import csv_upload

    df = small_table().assign(city=["Genève", "Zürich", "Genève", "Zürich", "Bâle", "Bâle"])
    ds = dataset_create(user=officer, team=team, upload=csv_upload(df), name="villes")
    dataset_set_tags(user=officer, dataset=ds, tags={"city": "quasi_identifier"})
    client.force_login(officer)
    page = client.get(reverse("jobs:plan", args=[ds.pk])).content.decode()
    assert "Genève" in page and "\\u00e8" not in page.split('id="builder-data"')[0]


def test_release_page_offers_the_search_alternatives_as_fixed_level_plans(
    client, officer, analyst, dataset
):
    from anonweb.jobs.execution import job_execute
    from anonweb.jobs.models import Job, JobStatus
    from anonweb.jobs.services import anonymize_launch
    from anonweb.releases.models import Release

    plan = {
        "version": 1,
        "quasi_identifiers": ["age", "sex"],
        "sensitive": ["disease"],
        "hierarchies": {
            "age": {"builder": "interval", "width": 5},
            "sex": {"rows": [["F", "*"], ["M", "*"]]},
        },
        "steps": [{"kind": "optimal_generalization", "params": {"k": 2, "suppression": 0.0}}],
    }
    job = anonymize_launch(
        user=officer, dataset=dataset, plan=plan, title="k2", purpose="test", recipient="team"
    )
    job_execute(job_id=job.pk, worker="t")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    release = Release.objects.get()
    (search,) = [s for s in release.report["steps"] if s["kind"] == "optimal_generalization"]
    alts = search["alternatives"]
    assert len(alts) >= 2 and [a["optimal"] for a in alts].count(True) == 1
    assert "alternatives" not in json.dumps(release.published_report)
    client.force_login(officer)
    page = client.get(reverse("releases:detail", args=[release.pk])).content.decode()
    assert "chart-alternatives" in page and 'data-testid="pick-alternative"' in page
    other = next(a for a in alts if not a["optimal"])
    url = reverse("jobs:plan", args=[dataset.pk])
    page = client.get(url, {"release": release.pk, "levels": json.dumps(other["levels"])})
    text = page.content.decode()
    assert page.status_code == 200 and "&quot;levels&quot;" in text
    # the plan with those levels runs without a search and gives that node
    fixed = json.loads(json.dumps(job.params["plan"]))
    fixed["steps"][0]["params"]["levels"] = other["levels"]
    job2 = anonymize_launch(
        user=officer, dataset=dataset, plan=fixed, title="picked", purpose="test", recipient="team"
    )
    job_execute(job_id=job2.pk, worker="t")
    job2.refresh_from_db()
    assert job2.status == JobStatus.SUCCEEDED, job2.error
    rel2 = Release.objects.get(pk=job2.result["release_id"])
    (s2,) = [s for s in rel2.report["steps"] if s["kind"] == "optimal_generalization"]
    assert s2["levels"] == other["levels"] and s2["search"]["algorithm"] == "fixed levels"
    assert s2["information_loss"] == other["information_loss"]
    client.force_login(analyst)
    assert Job.objects.count() == 2


def test_release_page_first_lines_say_what_the_search_did(client, officer, dataset):
    from anonweb.jobs.execution import job_execute
    from anonweb.jobs.services import anonymize_launch
    from anonweb.releases.models import Release

    plan = {
        "version": 1,
        "quasi_identifiers": ["age", "sex"],
        "sensitive": ["disease"],
        "hierarchies": {
            "age": {"builder": "interval", "width": 10},
            "sex": {"rows": [["F", "*"], ["M", "*"]]},
        },
        "steps": [{"kind": "optimal_generalization", "params": {"k": 2, "suppression": 0.2}}],
    }
    job = anonymize_launch(
        user=officer, dataset=dataset, plan=plan, title="k2", purpose="t", recipient="r"
    )
    job_execute(job_id=job.pk, worker="t")
    release = Release.objects.get()
    (s,) = [x for x in release.report["steps"] if x["kind"] == "optimal_generalization"]
    client.force_login(officer)
    page = client.get(reverse("releases:detail", args=[release.pk])).content.decode()
    first = page.split('data-testid="search-did"')[1].split("</section>")[0]
    assert f"{s['suppressed']} record" in first and "information loss" in first
    assert "disease l = " in first
    if s["suppressed"]:
        assert "still in the file" in first
    homogeneous = release.report["risk_after"]["sensitive"]["disease"]["homogeneous_classes"]
    assert ('data-testid="discloses"' in first) == bool(homogeneous)


def test_favicon_is_served_not_a_404(client):
    r = client.get("/favicon.ico")
    assert r.status_code == 302 and r.url.endswith("favicon.svg")
    icon = client.get(r.url)
    assert icon.status_code == 200
    icon.close()


def test_a_queued_job_says_it_waits_and_its_status_gives_the_start(client, officer, dataset):
    from anonweb.jobs.models import Job, JobKind, JobStatus

    job = Job.objects.create(
        team=dataset.team, dataset=dataset, kind=JobKind.PROFILE, created_by=officer
    )
    client.force_login(officer)
    page = client.get(reverse("jobs:detail", args=[job.pk])).content.decode()
    assert "not yet (waiting for a worker)" in page
    assert client.get(reverse("jobs:status", args=[job.pk])).json()["started_at"] is None
    from django.utils import timezone

    Job.objects.filter(pk=job.pk).update(
        status=JobStatus.RUNNING,
        started_at=timezone.now(),
        worker="w1@host",
        heartbeat_at=timezone.now(),
    )
    status = client.get(reverse("jobs:status", args=[job.pk])).json()
    assert status["started_at"] and status["worker"] == "w1@host"


def _answers(client, ds) -> list[dict]:
    """The what-if's JSON for a few nodes, the disclosing classes as sets (their order among
    classes of equal size follows the class numbering, not a figure) and without the example
    label of each level (the first value met: in the table's order or in value order)."""
    out = []
    for body in (
        {"levels": {}},
        {"levels": {"zip": 1, "age": 1}, "suppression": 0.17},
        {"levels": {"sex": 1}, "suppression": 0.0, "k": 2},
    ):
        got = _post(client, ds, body).json()
        del got["result"]["level_labels"], got["result"]["level_names"]
        for s in got["result"].get("sensitive", {}).values():
            s["disclosing_classes"] = sorted(
                json.dumps(c, sort_keys=True) for c in s["disclosing_classes"]
            )
        out.append(got)
    return out


def test_a_table_read_by_duckdb_answers_from_its_histogram_with_the_same_figures(
    client, officer, dataset, monkeypatch
):
    dataset_set_hierarchy_spec(
        user=officer, dataset=dataset, column="age", spec={"builder": "interval", "width": 10}
    )
    client.force_login(officer)
    qis, sensitive = list(dataset.quasi_identifiers), list(dataset.sensitive)
    monkeypatch.setenv("ANONWEB_ENGINE", "pandas")
    assert load_histogram(dataset.storage_key, qis, sensitive) is None  # read in memory
    in_memory = _answers(client, dataset)
    whatif_forget()
    monkeypatch.setenv("ANONWEB_ENGINE", "duckdb")
    hist = load_histogram(dataset.storage_key, qis, sensitive)
    assert hist is not None and hist.rows == len(small_table())
    got = _answers(client, dataset)
    assert got == in_memory
