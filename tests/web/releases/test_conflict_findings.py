"""The release job checks each new release against the earlier ones of the same source: seed
000's BMI example through two microaggregations, and two releases joinable by a reading kept
unique per record; findings show on both releases' pages, values to the officer only."""

import io
import re

import numpy as np
import pandas as pd
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from anonweb.audit.models import AuditEvent
from anonweb.datasets.services import dataset_create, dataset_set_tags
from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import JobKind, JobStatus
from anonweb.jobs.services import job_create
from anonweb.releases.models import ConflictFinding
from anonweb.releases.services import release_approve, release_reject

pytestmark = pytest.mark.django_db

NAMES = [
    "Bob Smith",
    "Kate Jones",
    "Jane Armstrong",
    "Doug Fulton",
    "Louis Fisher",
    "John Hopkins",
    "Susane Lippencott",
]
BMI = [24, 35, 41, 43, 44, 48, 50]
# With this second column MDAV groups the lower four and the upper three (seed 000's k_1); on BMI
# alone it groups the lower three and the upper four (k_2).
HEIGHT = [171, 171, 165, 174, 174, 198, 184]


def _upload(officer, team, df, name, tags):
    buf = io.StringIO()
    df.to_csv(buf, index=False)
    ds = dataset_create(
        user=officer,
        team=team,
        upload=SimpleUploadedFile(f"{name}.csv", buf.getvalue().encode()),
        name=name,
    )
    return dataset_set_tags(user=officer, dataset=ds, tags=tags)


def _release(officer, dataset, plan, title="r"):
    job = job_create(
        user=officer,
        team=dataset.team,
        kind=JobKind.ANONYMIZE,
        dataset=dataset,
        params={"plan": {"version": 1, **plan}, "title": title},
    )
    job_execute(job_id=job.pk, worker="t")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    return job.release


@pytest.fixture
def bmi(officer, team):
    df = pd.DataFrame({"name": NAMES, "bmi": BMI, "height": HEIGHT})
    return _upload(
        officer,
        team,
        df,
        "bmi",
        {"name": "identifier", "bmi": "sensitive", "height": "quasi_identifier"},
    )


def bmi_plans():
    first = {
        "quasi_identifiers": ["height"],
        "steps": [
            {"kind": "drop", "params": {"columns": ["name"]}},
            {"kind": "microaggregation", "params": {"columns": ["bmi", "height"], "k": 3}},
        ],
    }
    second = {
        "quasi_identifiers": ["height"],
        "steps": [
            {"kind": "drop", "params": {"columns": ["name", "height"]}},
            {"kind": "microaggregation", "params": {"columns": ["bmi"], "k": 3}},
        ],
    }
    return first, second


def test_bmi_second_release_discloses_doug_fulton(client, officer, steward, analyst, bmi):
    first_plan, second_plan = bmi_plans()
    first = _release(officer, bmi, first_plan, "k1")
    assert first.conflicts_checked == [] and not first.conflict_findings.exists()
    second = _release(officer, bmi, second_plan, "k2")
    assert second.conflicts_checked == [first.pk]
    (finding,) = ConflictFinding.objects.filter(release=second, type="exact_inference")
    assert finding.records == 1 and finding.columns == ["bmi"]
    assert set(finding.involved.all()) == {first, second}
    assert "release 1" in finding.explanation and "release 2" in finding.explanation
    assert "43" not in finding.explanation  # no figures for the steward's eyes
    # The release gate holds it as a blocking finding.
    (gate,) = [f for f in second.findings if f["code"] == "conflict_exact_inference"]
    assert gate["severity"] == "block" and gate["records"] == 1
    # The officer sees source row 4 (Doug Fulton) and the value an attacker infers.
    client.force_login(officer)
    page = client.get(reverse("releases:detail", args=[second.pk])).content.decode()
    assert 'data-testid="inferred-values"' in page
    assert "<td>4</td><td>43.0</td>" in page
    # The steward sees the finding on both pages, without the value.
    client.force_login(steward)
    for release in (first, second):
        page = client.get(reverse("releases:detail", args=[release.pk])).content.decode()
        assert 'data-testid="conflicts"' in page and "Exact inference" in page
        assert 'data-type="exact_inference"' in page
        assert "inferred-values" not in page and "43.0" not in page
    # An analyst sees the approved release and nothing about the others or the source.
    release_approve(
        user=steward,
        release=first,
        override="Reviewed: the findings are accepted for this test release.",
    )
    client.force_login(analyst)
    page = client.get(reverse("releases:detail", args=[first.pk])).content.decode()
    assert "conflict" not in page.lower() and "release 2" not in page
    # The audit trail holds counts, never the value or the explanation.
    event = AuditEvent.objects.filter(action="release.created", target_id=str(second.pk)).get()
    assert '"exact_inference":1' in event.details_text.replace(" ", "")
    # (as a number: a digest in the details may hold the digits "43" by chance)
    details = event.details_text.replace(str(second.pk), "")
    assert not re.search(r"(?<![\w.])43(\.0*)?(?![\w.])", details), details


def test_one_scheme_twice_finds_nothing(client, officer, steward, bmi):
    _, plan = bmi_plans()
    _release(officer, bmi, plan)
    again = _release(officer, bmi, plan)
    assert not again.conflict_findings.exists()
    client.force_login(steward)
    page = client.get(reverse("releases:detail", args=[again.pk])).content.decode()
    assert 'data-testid="no-conflicts"' in page and "Checked against 1 earlier" in page


def test_rejected_releases_are_not_checked_and_findings_show_their_live_status(
    client, officer, steward, bmi
):
    first_plan, second_plan = bmi_plans()
    first = _release(officer, bmi, first_plan)
    second = _release(officer, bmi, second_plan)
    release_reject(user=steward, release=first, note="no")
    client.force_login(steward)
    page = client.get(reverse("releases:detail", args=[second.pk])).content.decode()
    assert "no longer live" in page and "rejected" in page
    third = _release(officer, bmi, second_plan)
    assert third.conflicts_checked == [second.pk]  # the rejected one is left out
    assert not third.conflict_findings.exists()


def stroke_table(n: int = 200) -> pd.DataFrame:
    """Patients with a glucose reading unique to each (a column that joins two releases)."""
    rng = np.random.default_rng(8)
    return pd.DataFrame(
        {
            "pid": [f"P{i:05d}" for i in rng.permutation(n)],
            "age": rng.integers(20, 80, n),
            "sex": rng.choice(["F", "M"], n),
            "region": rng.choice(list("ABCDEFGHIJ"), n),
            "glucose": np.round(rng.uniform(60, 250, n), 2) + np.arange(n) * 1e-4,
            "stroke": rng.choice(["yes", "no"], n, p=[0.3, 0.7]),
        }
    )


STROKE_TAGS = {
    "pid": "identifier",
    "age": "quasi_identifier",
    "sex": "quasi_identifier",
    "region": "quasi_identifier",
    "glucose": "other",
    "stroke": "sensitive",
}


@pytest.fixture
def stroke(officer, team):
    return _upload(officer, team, stroke_table(), "stroke", STROKE_TAGS)


def stroke_plans(keep: list[str], tokenize: bool = False):
    """Release A generalizes age, release B keeps sex and region; both keep ``keep``."""
    others = [c for c in ("pid", "glucose") if c not in keep]
    token = [{"kind": "tokenize", "params": {"columns": ["pid"], "key": "k"}}] if tokenize else []
    by_age = {
        "quasi_identifiers": ["age"],
        "sensitive": ["stroke"],
        "steps": [
            {"kind": "drop", "params": {"columns": ["sex", "region", *others]}},
            {"kind": "generalize", "params": {"levels": {"age": 1}}},
            *token,
        ],
        "hierarchies": {"age": {"builder": "interval", "width": 20}},
    }
    by_sex = {
        "quasi_identifiers": ["sex", "region"],
        "sensitive": ["stroke"],
        "steps": [{"kind": "drop", "params": {"columns": ["age", *others]}}, *token],
    }
    return by_age, by_sex


def test_a_reading_unique_per_record_in_two_releases_joins_them(client, officer, steward, stroke):
    by_age, by_sex = stroke_plans(["glucose"])
    a = _release(officer, stroke, by_age)
    b = _release(officer, stroke, by_sex)
    kinds = set(ConflictFinding.objects.filter(release=b).values_list("type", flat=True))
    assert kinds == {"linkage"}
    k_finding = ConflictFinding.objects.get(release=b, facts__has_key="k_joined")
    assert k_finding.facts["link"] == "columns" and "glucose" in k_finding.facts["link_columns"]
    assert k_finding.facts["k_joined"] < 5 <= k_finding.facts["k"]
    l_finding = ConflictFinding.objects.get(release=b, columns=["stroke"])
    assert l_finding.records > 0 and l_finding.facts["l_joined"] == 1
    assert set(l_finding.facts["l_by_release"]) == {"release 1", "release 2"}
    client.force_login(steward)
    page = client.get(reverse("releases:detail", args=[a.pk])).content.decode()
    assert 'data-type="linkage"' in page and "k if linked" in page


def test_the_check_gives_the_release_gate_block_findings(officer, steward, bmi):
    from anonweb.core.conflicts.lineage import microaggregated
    from anonweb.core.findings import BLOCK
    from anonweb.datasets.storage import load_frame
    from anonweb.releases.conflicts import release_conflict_check

    first_plan, second_plan = bmi_plans()
    first = _release(officer, bmi, first_plan)
    release_approve(
        user=steward,
        release=first,
        override="Reviewed: the findings are accepted for this test release.",
    )
    source = load_frame(bmi.storage_key)
    # The second scheme, as the job makes it: rows shuffled, the means microaggregation publishes.
    groups = np.array([0, 0, 0, 1, 1, 1, 1])
    means = np.bincount(groups, weights=BMI) / np.bincount(groups)
    released = pd.DataFrame({"bmi": means[groups]}).iloc[::-1].reset_index(drop=True)
    rows = np.arange(7)[::-1].copy()
    check = release_conflict_check(
        dataset=bmi,
        source=source,
        plan=second_plan,
        frame=released,
        rows=rows,
        aggregates=microaggregated(source, released, rows, columns=["bmi"], label="x"),
    )
    (finding,) = check.gate_findings()
    assert finding.code == "conflict_exact_inference" and finding.severity == BLOCK
    assert finding.records == 1 and finding.columns == ("bmi",)
    assert finding.facts["statuses"] == {"release 1": "approved", "this release": "new"}
    assert "this release" in finding.message and "43" not in finding.message


def test_the_api_gives_the_findings_with_values_for_officers_only(officer, steward, bmi):
    from tests.web.api.test_api_releases import api

    first_plan, second_plan = bmi_plans()
    first = _release(officer, bmi, first_plan)
    second = _release(officer, bmi, second_plan)
    as_steward = api(steward).get(f"/api/v1/releases/{first.pk}/").json()
    (finding,) = as_steward["conflicts"]
    assert finding["type"] == "exact_inference" and finding["records"] == 1
    assert finding["found_by"] == second.pk and "private" not in finding
    assert [(r["version"], r["status"]) for r in finding["releases"]] == [
        (1, "awaiting_review"),
        (2, "awaiting_review"),
    ]
    (finding,) = api(officer).get(f"/api/v1/releases/{second.pk}/").json()["conflicts"]
    assert finding["private"]["records"] == [4] and finding["private"]["values"] == {"4": 43.0}


def test_tokens_under_each_releases_own_key_do_not_join_them(officer, stroke):
    # The job draws a fresh key for every release: the same patient gets different tokens.
    by_age, by_sex = stroke_plans(["pid"], tokenize=True)
    _release(officer, stroke, by_age)
    b = _release(officer, stroke, by_sex)
    assert not b.conflict_findings.filter(type="linkage").exists()
    # The same column kept as it is joins them (the control).
    by_age, by_sex = stroke_plans(["pid"])
    _release(officer, stroke, by_age)
    d = _release(officer, stroke, by_sex)
    linked = d.conflict_findings.filter(type="linkage")
    assert linked.exists() and all(f.facts["link_columns"] == ["pid"] for f in linked)
