"""Two releases of one source that are each 2-diverse but disclose every value together."""

import io

import numpy as np
import pandas as pd
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from anonweb.datasets.services import dataset_create, dataset_set_tags
from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import JobKind, JobStatus
from anonweb.jobs.services import job_create
from anonweb.releases.storage import load_aligned, release_dir

pytestmark = pytest.mark.django_db


@pytest.fixture
def source(officer, team):
    df = pd.DataFrame(
        {
            "h": list("PPQQRR"),
            "g": list("XYYZZX"),
            "disease": ["flu", "hiv", "cancer", "flu", "hiv", "cancer"],
        }
    )
    buf = io.StringIO()
    df.to_csv(buf, index=False)
    ds = dataset_create(
        user=officer,
        team=team,
        upload=SimpleUploadedFile("c.csv", buf.getvalue().encode()),
        name="c",
    )
    return dataset_set_tags(
        user=officer,
        dataset=ds,
        tags={"h": "quasi_identifier", "g": "quasi_identifier", "disease": "sensitive"},
    )


def _release(officer, dataset, keep, drop):
    plan = {
        "version": 1,
        "quasi_identifiers": [keep],
        "sensitive": ["disease"],
        "steps": [{"kind": "drop", "params": {"columns": [drop]}}],
    }
    job = job_create(
        user=officer,
        team=dataset.team,
        kind=JobKind.ANONYMIZE,
        dataset=dataset,
        params={"plan": plan, "title": keep},
    )
    job_execute(job_id=job.pk, worker="t")
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    return job.release


def test_the_second_release_is_flagged_and_the_first_shows_it_too(client, officer, steward, source):
    first = _release(officer, source, keep="h", drop="g")
    assert first.conflicts_checked == [] and not first.conflict_findings.exists()
    second = _release(officer, source, keep="g", drop="h")
    (finding,) = second.conflict_findings.all()
    assert finding.type == "intersection" and finding.records == 6
    assert finding.facts["l_combined"] == 1
    assert finding.facts["l_by_release"] == {"release 1": 2, "release 2": 2}
    client.force_login(steward)
    for release in (first, second):
        page = client.get(reverse("releases:detail", args=[release.pk])).content.decode()
        assert 'data-testid="conflicts"' in page
        assert "release 1 l = 2; release 2 l = 2; combined l = 1" in page


def test_published_rows_are_shuffled_and_the_alignment_stays_private(
    client, officer, steward, source
):
    from anonweb.releases.services import release_approve

    release = _release(officer, source, keep="h", drop="g")
    published = pd.read_parquet(release_dir(release.storage_key) / "data.parquet")
    aligned = load_aligned(release.storage_key)
    assert aligned["h"].tolist() == list("PPQQRR")
    assert sorted(published["disease"]) == sorted(aligned["disease"])
    release_approve(
        user=steward,
        release=release,
        override="Reviewed: the findings are accepted for this test release.",
    )
    client.force_login(steward)
    body = b"".join(
        client.get(reverse("releases:download", args=[release.pk])).streaming_content
    ).decode()
    assert "source_rows" not in body and len(body.splitlines()) == 7


def test_shuffling_hides_row_order_across_many_rows(officer, team):
    rng = np.random.default_rng(3)
    df = pd.DataFrame({"q": rng.integers(0, 5, 200), "s": rng.integers(0, 3, 200)})
    buf = io.StringIO()
    df.to_csv(buf, index=False)
    ds = dataset_create(
        user=officer,
        team=team,
        upload=SimpleUploadedFile("d.csv", buf.getvalue().encode()),
        name="d",
    )
    ds = dataset_set_tags(
        user=officer, dataset=ds, tags={"q": "quasi_identifier", "s": "sensitive"}
    )
    plan = {"version": 1, "quasi_identifiers": ["q"], "sensitive": ["s"], "steps": []}
    job = job_create(
        user=officer,
        team=team,
        kind=JobKind.ANONYMIZE,
        dataset=ds,
        params={"plan": plan, "title": "t"},
    )
    job_execute(job_id=job.pk, worker="t")
    job.refresh_from_db()
    published = pd.read_parquet(release_dir(job.release.storage_key) / "data.parquet")
    assert (published["q"].to_numpy() != df["q"].to_numpy()).sum() > 50
