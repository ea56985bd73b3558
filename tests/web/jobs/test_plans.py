"""Release plans from the web: suggestion, validation before launch, the anonymize job and
what its release keeps (never keys or seeds)."""

import html
import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from anonweb.audit.models import AuditEvent
from anonweb.datasets.models import Dataset, Hierarchy
from anonweb.datasets.selectors import hierarchies_for, hierarchy_spec
from anonweb.datasets.storage import load_frame
from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.releases.models import Release
from anonweb.releases.storage import release_dir

pytestmark = pytest.mark.django_db

AGE_HIERARCHY = "\n".join(
    f"{a};{a // 10 * 10}-{a // 10 * 10 + 9};*" for a in range(0, 100)
).encode()


def _plan(k=2, identifiers="tokenize"):
    steps = [{"kind": "optimal_generalization", "params": {"k": k, "suppression": 0.0}}]
    if identifiers == "tokenize":
        steps.insert(0, {"kind": "tokenize", "params": {"columns": ["name"], "key": "release-key"}})
    return {
        "version": 1,
        "quasi_identifiers": ["age", "sex"],
        "sensitive": ["disease"],
        "hierarchies": {
            "age": {"builder": "interval", "width": 10},
            "sex": {"rows": [["F", "*"], ["M", "*"]]},
        },
        "steps": steps,
    }


def test_plan_page_suggests_a_plan_from_the_tags(client, officer, dataset):
    client.force_login(officer)
    page = client.get(
        reverse("jobs:plan", args=[dataset.pk]), {"k": 3, "suppression": 0.1, "identifiers": "drop"}
    )
    assert page.status_code == 200
    plan = json.loads(page.context["form"].initial["plan"])
    assert plan["quasi_identifiers"] == ["zip", "age", "sex"]
    assert plan["steps"][0] == {"kind": "drop", "params": {"columns": ["name"]}}
    assert plan["steps"][1]["params"]["k"] == 3
    assert plan["hierarchies"]["zip"] == {"builder": "mask"}
    assert plan["hierarchies"]["age"]["builder"] == "interval"


def test_plan_page_is_for_officers_of_the_team(client, steward, outsider, dataset):
    client.force_login(steward)
    assert client.get(reverse("jobs:plan", args=[dataset.pk])).status_code == 403
    client.force_login(outsider)
    assert client.get(reverse("jobs:plan", args=[dataset.pk])).status_code == 404


@pytest.mark.parametrize(
    "plan_text,message",
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"steps": [{"kind": "teleport"}]}), "unknown step kind"),
        (
            json.dumps({"steps": [{"kind": "drop", "params": {"columns": ["nope"]}}]}),
            "unknown column",
        ),
        (
            json.dumps({"hierarchies": {"age": {"path": "/etc/passwd"}}, "steps": []}),
            "upload the hierarchy file",
        ),
        (
            json.dumps(
                {
                    "quasi_identifiers": ["age"],
                    "steps": [{"kind": "optimal_generalization", "params": {"k": 0}}],
                }
            ),
            "must be a whole number between 1 and 1,000,000, not 0",
        ),
        (
            json.dumps(
                {
                    "quasi_identifiers": ["age"],
                    "hierarchies": {"age": {"builder": "interval", "width": 10}},
                    "steps": [{"kind": "optimal_generalization", "params": {"k": True}}],
                }
            ),
            "must be a whole number between 1 and 1,000,000, not true",
        ),
        (
            json.dumps(
                {
                    "quasi_identifiers": ["age"],
                    "hierarchies": {"age": {"builder": "interval", "width": 10}},
                    "steps": [{"kind": "optimal_generalization", "params": {"k": 7}}],
                }
            ),
            "but the table has only 6 rows",
        ),
        (
            json.dumps(
                {
                    "steps": [
                        {
                            "kind": "ldp_randomized_response",
                            "params": {"column": "sex", "epsilon": 800},
                        }
                    ]
                }
            ),
            "at most 30, not 800",
        ),
        (
            json.dumps(
                {
                    "steps": [
                        {
                            "kind": "regex_mask",
                            "params": {"columns": ["name"], "pattern": "(a)\\1", "replacement": ""},
                        }
                    ]
                }
            ),
            "without backreferences or lookaround",
        ),
        (
            json.dumps({"hierarchies": {"zip": {"builder": "mask", "length": 5}}, "steps": []}),
            "unknown parameter",
        ),
        (
            json.dumps({"steps": [{"kind": "add_noise", "params": {"columns": ["sex"], "sd": 1}}]}),
            "is not numeric",
        ),
        ('{"steps": ' + "[" * 5000 + "]" * 5000 + "}", "nested more than 32 levels"),
    ],
)
def test_a_bad_plan_is_refused_before_anything_runs(client, officer, dataset, plan_text, message):
    client.force_login(officer)
    response = client.post(
        reverse("jobs:plan", args=[dataset.pk]),
        {"title": "x", "purpose": "testing", "recipient": "test team", "plan": plan_text},
    )
    assert response.status_code == 400
    assert message in html.unescape(response.content.decode())
    assert not Job.objects.filter(kind=JobKind.ANONYMIZE).exists()


def test_launch_then_run_publishes_a_release_awaiting_approval(
    client, officer, dataset, django_capture_on_commit_callbacks
):
    client.force_login(officer)
    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(
            reverse("jobs:plan", args=[dataset.pk]),
            {
                "title": "k2",
                "purpose": "testing",
                "recipient": "test team",
                "plan": json.dumps(_plan()),
            },
        )
    job = Job.objects.get(kind=JobKind.ANONYMIZE)
    assert response.url == reverse("jobs:detail", args=[job.pk])
    job_execute(job_id=job.pk, worker="test")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    release = Release.objects.get()
    assert job.result["release_id"] == release.pk and release.status == "pending"
    assert release.report["risk_before"]["k"] == 1
    assert release.report["risk_after"]["k"] >= 2
    # The published plan names the secret; no key bytes or seed anywhere.
    assert release.plan["steps"][0]["params"]["key"] == "release-key"
    assert release.plan["hierarchies"]["sex"] == {"uploaded": True, "values": 2, "levels": 2}
    stored = json.dumps(
        [
            release.plan,
            release.report,
            job.params,
            job.result,
            list(AuditEvent.objects.values_list("details_text", flat=True)),
        ]
    )
    assert "seed" not in stored and "secret" not in stored.replace("the secret", "")
    csv = (release_dir(release.storage_key) / "data.csv").read_text()
    assert "Ann Lee" not in csv
    # Analysts read the report: no raw source values in it, only counts.
    before = release.report["risk_before"]["sensitive"]["disease"]
    assert "disclosing_classes" not in before and before["homogeneous_classes"] == 6
    assert "47677" not in json.dumps(release.report["risk_before"])
    assert len(csv.splitlines()) == 7


def test_tokens_differ_between_releases_of_the_same_source(officer, dataset):
    from anonweb.jobs.services import job_create

    tokens = []
    for _ in range(2):
        job = job_create(
            user=officer,
            team=dataset.team,
            kind=JobKind.ANONYMIZE,
            dataset=dataset,
            params={"plan": _plan(), "title": "t"},
        )
        job_execute(job_id=job.pk, worker="test")
        release = Job.objects.get(pk=job.pk).release
        tokens.append(
            (release_dir(release.storage_key) / "data.csv")
            .read_text()
            .splitlines()[1]
            .split(",")[0]
        )
    assert tokens[0] != tokens[1] and len(tokens[0]) == 16


def test_an_impossible_plan_fails_the_job_and_publishes_nothing(officer, dataset):
    from anonweb.jobs.services import job_create

    job = job_create(
        user=officer,
        team=dataset.team,
        kind=JobKind.ANONYMIZE,
        dataset=dataset,
        params={"plan": _plan(k=50, identifiers="drop"), "title": "t"},
    )
    job_execute(job_id=job.pk, worker="test")
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED and job.error
    assert not Release.objects.exists()


def test_hierarchy_upload_checks_coverage(client, officer, dataset):
    client.force_login(officer)
    bad = SimpleUploadedFile("sex.csv", b"F;*\n")
    response = client.post(
        reverse("datasets:hierarchy", args=[dataset.pk]),
        {"column": "sex", "file": bad},
        follow=True,
    )
    assert "does not cover 1 value(s): &#x27;M&#x27;" in response.content.decode()
    assert not Hierarchy.objects.exists()
    good = SimpleUploadedFile("age.csv", AGE_HIERARCHY)
    client.post(reverse("datasets:hierarchy", args=[dataset.pk]), {"column": "age", "file": good})
    assert hierarchy_spec(dataset=dataset, column="age")["rows"][29] == ["29", "20-29", "*"]
    event = AuditEvent.objects.get(action="dataset.hierarchy_set")
    assert event.details["levels"] == 3 and event.details["values"] == 100
    assert "20-29" not in json.dumps(event.details)


def test_hierarchy_upload_needs_the_officer_role(client, steward, dataset):
    client.force_login(steward)
    client.post(
        reverse("datasets:hierarchy", args=[dataset.pk]),
        {"column": "age", "file": SimpleUploadedFile("a.csv", AGE_HIERARCHY)},
    )
    assert not Hierarchy.objects.exists()


def test_a_local_dp_release_runs_and_reports_its_local_epsilon(officer, steward, dataset):
    from anonweb.jobs.services import anonymize_launch
    from anonweb.releases.budget import budget_set

    budget_set(user=steward, dataset=dataset, epsilon=1.0)
    plan = {
        "version": 1,
        "sensitive": ["disease"],
        "steps": [
            {"kind": "drop", "params": {"columns": ["name"]}},
            {
                "kind": "ldp_randomized_response",
                "params": {
                    "column": "disease",
                    "epsilon": 1.0,
                    "categories": ["flu", "gastritis", "cancer"],
                },
            },
        ],
    }
    job = anonymize_launch(
        user=officer,
        dataset=dataset,
        plan=plan,
        title="ldp",
        purpose="testing",
        recipient="test team",
    )
    job_execute(job_id=job.pk, worker="t")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.params["privacy_cost"]["local_epsilon"] == 1.0
    assert job.release.report["privacy_cost"] == {"local_epsilon": 1.0}


def test_the_published_plan_hides_codebooks_and_hierarchy_tables():
    from anonweb.core.release.report import public_plan

    plan = {
        "hierarchies": {
            "sex": {"rows": [["F", "*"], ["M", "*"]]},
            "age": {"builder": "interval", "width": 10},
        },
        "steps": [
            {
                "kind": "substitute",
                "params": {"columns": ["name"], "codebook": {"Ann Lee": "A", "Bob Ray": "B"}},
            },
            {"kind": "drop", "params": {"columns": ["zip"]}},
        ],
    }
    public = public_plan(plan)
    assert public["steps"][0]["params"]["codebook"] == {"entries": 2}
    assert public["steps"][1] == plan["steps"][1]
    assert public["hierarchies"] == {
        "sex": {"uploaded": True, "values": 2, "levels": 2},
        "age": {"builder": "interval", "width": 10},
    }
    assert "Ann Lee" not in json.dumps(public) and "Ann Lee" in json.dumps(
        plan
    )  # the input is untouched


def test_a_perturbed_release_is_checked_against_a_maximum_knowledge_intruder(
    client, officer, steward, team
):
    import io

    import numpy as np
    import pandas as pd

    from anonweb.datasets.services import dataset_create
    from anonweb.jobs.services import anonymize_launch

    rng = np.random.default_rng(1)
    cov = np.full((4, 4), 0.5) + np.eye(4) * 0.5
    data = rng.multivariate_normal(np.zeros(4), cov, 1500) * [1.0, 10.0, 100.0, 0.1]
    buf = io.StringIO()
    pd.DataFrame(data, columns=["x", "y", "z", "w"]).to_csv(buf, index=False)
    ds = dataset_create(
        user=officer,
        team=team,
        upload=SimpleUploadedFile("n.csv", buf.getvalue().encode()),
        name="n",
    )
    plan = {
        "version": 1,
        "steps": [{"kind": "add_noise", "params": {"columns": ["x", "y", "z", "w"], "scale": 0.1}}],
    }
    job = anonymize_launch(
        user=officer, dataset=ds, plan=plan, title="noise", purpose="testing", recipient="test team"
    )
    job_execute(job_id=job.pk, worker="t")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    intruder = job.release.report["intruder"]
    assert intruder["columns"] == ["x", "y", "z", "w"] and intruder["n_records"] == 1500
    # noise variance 1% of each column's (sd x 0.1): links stand out from chance (seed 003)
    assert intruder["not_deniable_share"] > 0.1
    client.force_login(steward)
    page = client.get(reverse("releases:detail", args=[job.release.pk])).content.decode()
    assert 'data-testid="intruder"' in page and "chart-intruder" in page


def test_the_audit_trail_records_the_public_plan_only(officer, dataset):
    from anonweb.jobs.services import job_create

    plan = _plan()
    plan["steps"].append(
        {"kind": "substitute", "params": {"columns": ["disease"], "codebook": {"flu": "A"}}}
    )
    job_create(
        user=officer,
        team=dataset.team,
        kind=JobKind.ANONYMIZE,
        dataset=dataset,
        params={"plan": plan, "title": "t"},
    )
    recorded = AuditEvent.objects.get(action="job.created").details["params"]["plan"]
    assert recorded["hierarchies"]["sex"] == {"uploaded": True, "values": 2, "levels": 2}
    assert recorded["steps"][-1]["params"]["codebook"] == {"entries": 1}


def test_hierarchies_live_apart_from_the_dataset_row(officer, dataset):
    """A list of datasets never loads hierarchy tables, and a plan refers to an uploaded table
    by digest instead of copying it into every job."""
    from anonweb.datasets.selectors import datasets_for_user
    from anonweb.datasets.services import dataset_set_hierarchy_spec
    from anonweb.jobs.planning import suggest_plan
    from anonweb.jobs.services import job_create

    rows = [[str(a), f"{a // 10 * 10}-{a // 10 * 10 + 9}", "*"] for a in range(100)]
    stored = dataset_set_hierarchy_spec(
        user=officer, dataset=dataset, column="age", spec={"rows": rows}
    )
    assert stored.levels == 3 and stored.values == 100 and stored.is_current
    assert "hierarchies" not in {f.name for f in Dataset._meta.get_fields()}
    assert all("20-29" not in json.dumps(d.columns) for d in datasets_for_user(user=officer))

    plan = suggest_plan(dataset, load_frame(dataset.storage_key))
    assert plan["hierarchies"]["age"] == {"uploaded": stored.sha256, "values": 100, "levels": 3}
    job = job_create(
        user=officer,
        team=dataset.team,
        kind=JobKind.ANONYMIZE,
        dataset=dataset,
        params={"plan": plan, "title": "t"},
    )
    assert "20-29" not in json.dumps(job.params)
    # Replacing the table afterwards leaves the queued job its own version.
    dataset_set_hierarchy_spec(
        user=officer, dataset=dataset, column="age", spec={"builder": "interval", "width": 5}
    )
    assert hierarchies_for(dataset=dataset)["age"].kind == "interval"
    job_execute(job_id=job.pk, worker="test")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.release.plan["hierarchies"]["age"] == {"uploaded": True, "values": 100, "levels": 3}
    # The builder spec is small: the next suggestion carries it inline.
    plan = suggest_plan(dataset, load_frame(dataset.storage_key))
    assert plan["hierarchies"]["age"] == {"builder": "interval", "width": 5}


def test_setting_the_same_hierarchy_twice_keeps_one_version(officer, dataset):
    from anonweb.datasets.services import dataset_set_hierarchy_spec

    spec = {"rows": [["F", "*"], ["M", "*"]]}
    first = dataset_set_hierarchy_spec(user=officer, dataset=dataset, column="sex", spec=spec)
    again = dataset_set_hierarchy_spec(user=officer, dataset=dataset, column="sex", spec=spec)
    assert first.pk == again.pk and Hierarchy.objects.count() == 1
    assert AuditEvent.objects.filter(action="dataset.hierarchy_set").count() == 1


@pytest.mark.parametrize(
    "spec,message",
    [
        ({"rows": [["F", "*"]]}, "does not cover 1 value(s): 'M'"),
        ({"rows": "F;*"}, "'rows' must be a list"),
        ({"builder": "nope"}, "unknown hierarchy builder"),
        ({"rows": [["F", "*"]], "builder": "mask"}, "either rows"),
        ({}, "either rows"),
    ],
)
def test_a_bad_hierarchy_spec_is_refused_with_a_reason(officer, dataset, spec, message):
    from anonweb.core.errors import CoreError
    from anonweb.datasets.services import dataset_set_hierarchy_spec

    with pytest.raises(CoreError, match=re.escape(message)):
        dataset_set_hierarchy_spec(user=officer, dataset=dataset, column="sex", spec=spec)
    assert not Hierarchy.objects.exists()


def test_a_plan_naming_an_unknown_uploaded_hierarchy_fails_its_job(officer, dataset):
    from anonweb.jobs.services import job_create

    plan = _plan()
    plan["hierarchies"]["sex"] = {"uploaded": "0" * 64}
    job = job_create(
        user=officer,
        team=dataset.team,
        kind=JobKind.ANONYMIZE,
        dataset=dataset,
        params={"plan": plan, "title": "t"},
    )
    job_execute(job_id=job.pk, worker="test")
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert "holds no uploaded hierarchy '000000000000' for that column" in job.error_detail


def test_the_suggested_plan_runs_on_a_numeric_quasi_identifier(
    client, officer, team, django_capture_on_commit_callbacks
):
    # zip read as integers: level 0 keeps the numbers while a suppressed row gets "*", and the
    # release's Parquet file once refused such a column (ArrowInvalid: could not convert '*')
    import pandas as pd

    from anonweb.datasets.services import dataset_create, dataset_set_tags
    from tests.web.conftest import csv_upload

    table = pd.DataFrame(
        {
            "name": [f"person {i}" for i in range(9)],
            "zip": [47677] * 3 + [47602] * 3 + [47905] * 2 + [47909],
            "age": [30] * 8 + [80],
            "sex": ["F"] * 9,
            "disease": ["flu", "cancer", "flu", "ulcer", "flu", "cancer", "flu", "ulcer", "flu"],
        }
    )
    ds = dataset_create(user=officer, team=team, upload=csv_upload(table), name="zips")
    tags = {"name": "identifier", "zip": "quasi_identifier", "age": "quasi_identifier"}
    ds = dataset_set_tags(
        user=officer, dataset=ds, tags={**tags, "sex": "quasi_identifier", "disease": "sensitive"}
    )
    client.force_login(officer)
    page = client.get(
        reverse("jobs:plan", args=[ds.pk]), {"k": 2, "suppression": 0.12, "identifiers": "drop"}
    )
    plan = json.loads(page.context["form"].initial["plan"])
    search = plan["steps"][-1]
    assert search["params"]["metric"] == "loss" and search["params"]["aggregate"] == "geometric"
    with django_capture_on_commit_callbacks(execute=False):
        client.post(
            reverse("jobs:plan", args=[ds.pk]),
            {
                "title": "z",
                "purpose": "testing",
                "recipient": "test team",
                "plan": json.dumps(plan),
            },
        )
    job = Job.objects.get(kind=JobKind.ANONYMIZE)
    job_execute(job_id=job.pk, worker="test")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    release = Release.objects.get()
    step = release.report["steps"][-1]
    assert step["levels"]["zip"] == 0 and step["suppressed"] == 1
    assert "geometric mean" in step["information_loss_measure"]
    assert all(c["satisfied"] for c in step["model_checks"])
    published = pd.read_parquet(release_dir(release.storage_key) / "data.parquet")
    assert sorted(published["zip"]) == ["*"] + ["47602"] * 3 + ["47677"] * 3 + ["47905"] * 2
    page = client.get(reverse("releases:detail", args=[release.pk]))
    assert 'data-testid="search-summary"' in page.content.decode()


def test_the_launch_service_refuses_a_bad_plan_with_every_problem(officer, dataset):
    """The service the page and the API share checks the plan itself, so an API client gets
    the same refusal (each problem listed) and nothing is queued."""
    from anonweb.core.errors import PlanError
    from anonweb.jobs.services import anonymize_launch

    plan = {
        "quasi_identifiers": ["age"],
        "steps": [
            {"kind": "optimal_generalization", "params": {"k": True}},
            {"kind": "drop", "params": {"columns": ["nope"]}},
        ],
    }
    with pytest.raises(PlanError) as info:
        anonymize_launch(
            user=officer,
            dataset=dataset,
            plan=plan,
            title="x",
            purpose="testing",
            recipient="test team",
        )
    assert len(info.value.errors) == 2
    assert "not true" in info.value.errors[0] and "unknown column 'nope'" in info.value.errors[1]
    assert not Job.objects.filter(kind=JobKind.ANONYMIZE).exists()


def test_an_integer_column_with_blanks_takes_an_uploaded_arx_hierarchy(
    client, officer, team, django_capture_on_commit_callbacks
):
    """Ages with blank cells are read as integers, so ARX's '39;30-39;*' covers them on upload
    (a float column would show '39.0'); the suggested plan refers to the uploaded hierarchy
    and its release keeps the integers as written beside the suppressed row's '*'."""
    import pandas as pd

    from anonweb.datasets.services import dataset_create, dataset_set_tags
    from tests.web.conftest import csv_upload

    table = pd.DataFrame(
        {
            "age": [39] * 3 + [40] * 3 + [None] * 2 + [85],
            "sex": ["F"] * 9,
            "disease": ["flu", "cancer", "flu", "ulcer", "flu", "cancer", "flu", "ulcer", "flu"],
        },
    ).astype({"age": "Int64"})
    ds = dataset_create(user=officer, team=team, upload=csv_upload(table), name="ages")
    ds.refresh_from_db()
    assert {c["name"]: c["type"] for c in ds.columns}["age"] == "integer"
    ds = dataset_set_tags(
        user=officer,
        dataset=ds,
        tags={"age": "quasi_identifier", "sex": "quasi_identifier", "disease": "sensitive"},
    )
    from anonweb.jobs.services import job_create

    profile = job_create(user=officer, team=team, kind=JobKind.PROFILE, dataset=ds)
    job_execute(job_id=profile.pk, worker="test")
    profile.refresh_from_db()
    assert profile.status == JobStatus.SUCCEEDED, profile.error
    client.force_login(officer)
    for column, rows in (("age", AGE_HIERARCHY), ("sex", b"F;*\nM;*\n")):
        response = client.post(
            reverse("datasets:hierarchy", args=[ds.pk]),
            {"column": column, "file": SimpleUploadedFile(f"{column}.csv", rows)},
            follow=True,
        )
        assert "does not cover" not in response.content.decode()
    assert hierarchy_spec(dataset=ds, column="age")["rows"][39] == ["39", "30-39", "*"]
    page = client.get(
        reverse("jobs:plan", args=[ds.pk]), {"k": 2, "suppression": 0.12, "identifiers": "drop"}
    )
    plan = json.loads(page.context["form"].initial["plan"])
    assert plan["hierarchies"]["age"]["uploaded"] == hierarchies_for(dataset=ds)["age"].sha256
    with django_capture_on_commit_callbacks(execute=False):
        client.post(
            reverse("jobs:plan", args=[ds.pk]),
            {
                "title": "a",
                "purpose": "testing",
                "recipient": "test team",
                "plan": json.dumps(plan),
            },
        )
    job = Job.objects.get(kind=JobKind.ANONYMIZE)
    job_execute(job_id=job.pk, worker="test")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    release = Release.objects.get()
    step = release.report["steps"][-1]
    assert step["levels"] == {"age": 0, "sex": 0} and step["suppressed"] == 1
    assert release.report["risk_before"]["k"] == 1
    published = pd.read_parquet(release_dir(release.storage_key) / "data.parquet")
    assert sorted(published["age"].fillna("")) == ["", "", "*"] + ["39"] * 3 + ["40"] * 3
    csv = (release_dir(release.storage_key) / "data.csv").read_text().splitlines()
    assert sorted(line.split(",")[0] for line in csv[1:]) == sorted(published["age"].fillna(""))


def test_a_refused_plan_is_explained_once_above_the_forms(client, officer, dataset):
    """The server's reasons stand where the check as typed shows its own, at the top of the
    builder, each once (a DP count given a column was listed twice, at the foot of the page)."""
    client.force_login(officer)
    plan = {
        "version": 1,
        "steps": [
            {"kind": "dp_release", "params": {"kind": "count", "epsilon": 0.5, "columns": ["age"]}}
        ],
    }
    page = client.post(
        reverse("jobs:plan", args=[dataset.pk]),
        {"title": "t", "purpose": "p", "recipient": "r", "plan": json.dumps(plan)},
    )
    assert page.status_code == 400
    body = page.content.decode()
    reason = "step 1 (dp_release): a DP count takes no column"
    assert body.count(reason) == 1
    errors = body.index('data-testid="plan-errors"')
    assert errors < body.index(reason) < body.index('id="plan-builder"')


def test_a_suggestion_is_titled_by_its_kind(client, officer, dataset):
    client.force_login(officer)
    url = reverse("jobs:plan", args=[dataset.pk])
    base = {"k": 2, "suppression": 0.0, "identifiers": "drop"}
    titles = {
        mode: client.get(url, {**base, "mode": mode}).context["form"].initial["title"]
        for mode in ("k_anonymity", "dp_histogram", "ldp")
    }
    assert titles == {
        "k_anonymity": "k-anonymous extract",
        "dp_histogram": "Differentially private statistics",
        "ldp": "Locally differentially private extract",
    }


def test_local_dp_epsilon_is_said_per_record_in_total(client, officer, steward, dataset):
    """Randomized response on two columns at ε = 1 each costs each record ε = 2: the preview
    says that total and where it comes from."""
    client.force_login(officer)
    plan = {
        "version": 1,
        "steps": [
            {"kind": "drop", "params": {"columns": ["name"]}},
            {
                "kind": "ldp_randomized_response",
                "params": {"column": "sex", "epsilon": 1, "categories": ["F", "M"]},
            },
            {
                "kind": "ldp_randomized_response",
                "params": {
                    "column": "disease",
                    "epsilon": 1,
                    "categories": ["flu", "gastritis", "cancer"],
                },
            },
        ],
    }
    page = client.post(
        reverse("jobs:plan", args=[dataset.pk]),
        {"title": "t", "purpose": "p", "recipient": "r", "plan": json.dumps(plan), "preview": "1"},
    ).content.decode()
    said = "local DP: ε = 2 per record in total, the sum of each randomized column's ε per record"
    assert said in html.unescape(page)
