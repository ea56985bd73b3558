"""The release page's first lines (what the search did) and the sign-off report: a
self-contained HTML file with the SHA-256 of every stored file, the plan, the gate's findings, the
approval and the release's audit trail, for the team's officers and stewards only."""

from __future__ import annotations

import hashlib
import json
import re
from html import unescape

import pandas as pd
import pytest
from django.urls import reverse
from django.utils.html import escape

from anonweb.accounts.models import Role
from anonweb.audit.models import AuditEvent
from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.jobs.services import job_create, job_execute
from anonweb.releases.models import Release
from anonweb.releases.services import release_review
from anonweb.releases.storage import release_dir
from tests.web.conftest import csv_upload
from tests.web.factories import member

pytestmark = pytest.mark.django_db

PURPOSE = "<script>alert('purpose')</script> Étude régionale"
RECIPIENT = 'Office "R&D" <b>bold</b>'
NOTE = "Checked the report; <img src=x onerror=alert(1)> fine."

# Hand-worked table: with age in decades (level 1 of a width-10 interval hierarchy from 0),
# 20-29 holds 21, 23, 25 (all flu), 40-49 holds 41, 44, 47 (cancer, gastritis, cancer) and
# 60-69 holds 65 alone. With k = 3 and 20% suppression the lone 65 is suppressed (1 of 7 rows).
# After: 2 classes of 3, k = 3; the 20-29 class shares one value of disease (l = 1).
TABLE = pd.DataFrame(
    {
        "age": [21, 23, 25, 41, 44, 47, 65],
        "disease": ["flu", "flu", "flu", "cancer", "gastritis", "cancer", "flu"],
    }
)
PLAN = {
    "version": 1,
    "quasi_identifiers": ["age"],
    "sensitive": ["disease"],
    "hierarchies": {"age": {"builder": "interval", "width": 10, "start": 0}},
    "steps": [
        {
            "kind": "optimal_generalization",
            "params": {"k": 3, "suppression": 0.2, "levels": {"age": 1}},
        }
    ],
}


@pytest.fixture
def ages(officer, team):
    from anonweb.datasets.services import dataset_create, dataset_set_tags

    ds = dataset_create(user=officer, team=team, upload=csv_upload(TABLE), name="ages")
    return dataset_set_tags(
        user=officer, dataset=ds, tags={"age": "quasi_identifier", "disease": "sensitive"}
    )


def launch(officer, dataset, plan=PLAN, purpose=PURPOSE, recipient=RECIPIENT) -> Release:
    job = job_create(
        user=officer,
        team=dataset.team,
        kind=JobKind.ANONYMIZE,
        dataset=dataset,
        params={"plan": plan, "title": "decades", "purpose": purpose, "recipient": recipient},
    )
    job_execute(job_id=job.pk, worker="test")
    job = Job.objects.get(pk=job.pk)
    assert job.status == JobStatus.SUCCEEDED, job.error
    return job.release


@pytest.fixture
def release(officer, ages):
    return launch(officer, ages)


OVERRIDE = "Decades of age for the bulletin: the flu class is accepted <knowingly>."


def approve(steward, release, note):
    """Approve over the default policy's blocking findings (k 5 and l 2: this release has k 3
    and a class with one disease), with a justification."""
    return release_review(
        user=steward, release=release, decision="approve", note=note, override=OVERRIDE
    )


def section(page: str, testid: str) -> str:
    return page.split(f'data-testid="{testid}"', 1)[1].split("</section>")[0]


def test_release_page_opens_with_the_hand_worked_search_summary(client, officer, release):
    client.force_login(officer)
    page = client.get(reverse("releases:detail", args=[release.pk])).content.decode()
    assert page.index('data-testid="search-did"') < page.index("<h2>")
    first = section(page, "search-did")
    assert re.search(r'data-testid="search-levels">age 1<', first)
    assert "1 record suppressed</span> (still in the file, with <code>*</code>" in first
    assert "k = 3 over 2 classes" in first
    # t against the distribution of all 7 records (flu 4/7, cancer 2/7, gastritis 1/7): the
    # 40-49 class (cancer 2/3, gastritis 1/3) is at 1/2 (4/7 + 8/21 + 4/21) = 4/7 = 0.571
    assert "disease l = 1, t = 0.571." in first
    assert "k holds, but 1 class (3 records) shares one value of disease" in first
    measure = release.report["steps"][0]["information_loss_measure"]
    assert f"({escape(measure)})" in first
    # the suppressed record is in the file, starred
    csv = (release_dir(release.storage_key) / "data.csv").read_text()
    assert csv.count("*") == 1 and len(csv.strip().splitlines()) == 8


def test_no_disclosure_warning_when_every_class_is_diverse(client, officer, ages):
    plan = {**PLAN, "steps": [{"kind": "optimal_generalization", "params": {"k": 6}}]}
    release = launch(officer, ages, plan=plan)
    client.force_login(officer)
    first = section(
        client.get(reverse("releases:detail", args=[release.pk])).content.decode(), "search-did"
    )
    assert "0 records suppressed" in first and "still in the file" not in first
    assert 'data-testid="discloses"' not in first


def test_analyst_reads_the_summary_from_the_published_report(client, steward, analyst, release):
    approve(steward, release, "ok")
    client.force_login(analyst)
    page = client.get(reverse("releases:detail", args=[release.pk])).content.decode()
    first = section(page, "search-did")
    assert "1 record suppressed" in first and "k = 3 over 2 classes" in first
    assert 'data-testid="signoff"' not in page


def signoff(client, release):
    return client.get(reverse("releases:signoff", args=[release.pk]))


def stated_hashes(html: str) -> dict[str, str]:
    rows = re.findall(
        r'data-name="([^"]+)">.*?data-testid="sha256">([0-9a-f]{64})<', html, flags=re.S
    )
    return dict(rows)


def test_signoff_states_the_sha256_of_every_stored_file(client, officer, release):
    client.force_login(officer)
    response = signoff(client, release)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    assert response["Content-Disposition"] == 'attachment; filename="ages-v1-signoff.html"'
    html = response.content.decode()
    folder = release_dir(release.storage_key)
    on_disk = {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in folder.rglob("*")
        if p.is_file()
    }
    assert {"data.csv", "data.parquet", "private/source_rows.npy"} <= set(on_disk)
    assert stated_hashes(html) == on_disk
    assert on_disk["data.csv"] == release.sha256
    assert "matches" in html and 'data-testid="hash-mismatch"' not in html


def test_signoff_names_a_file_changed_after_publication(client, officer, release):
    path = release_dir(release.storage_key) / "data.csv"
    path.write_bytes(path.read_bytes() + b"41,flu\n")
    client.force_login(officer)
    html = signoff(client, release).content.decode()
    mismatch = html.split('data-testid="hash-mismatch"')[1].split("</p>")[0]
    assert (
        f"data.csv does not match the hash recorded at publication ({release.sha256})" in mismatch
    )
    assert "Do not sign off" in mismatch


def test_signoff_is_self_contained_and_escapes_user_text(client, officer, steward, release):
    approve(steward, release, NOTE)
    client.force_login(officer)
    html = signoff(client, release).content.decode()
    assert "<script" not in html.lower()
    assert not re.search(r"<(link|img|iframe|object|embed)\b", html, flags=re.I)
    assert not re.search(r"<[^>]*\b(src|href)\s*=", html, flags=re.I)
    assert "http://" not in html and "https://" not in html
    assert "<style>" in html
    assert "&lt;script&gt;alert(&#x27;purpose&#x27;)&lt;/script&gt; Étude régionale" in html
    assert "Office &quot;R&amp;D&quot; &lt;b&gt;bold&lt;/b&gt;" in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_signoff_has_the_plan_findings_approval_and_audit_trail(client, officer, steward, release):
    client.force_login(officer)
    before = signoff(client, release).content.decode()
    assert "Not yet approved" in before.split('data-testid="approval"')[1]
    approve(steward, release, "fine by me")
    html = signoff(client, release).content.decode()
    approval = html.split('data-testid="approval"')[1].split("</div>")[0]
    assert "Approved" in approval and steward.username in approval and "fine by me" in approval
    override = html.split('data-testid="override"')[1].split("</div>")[0]
    assert escape(OVERRIDE) in override and "risk_k" in override
    assert "Not yet approved" not in approval
    plan = unescape(html.split('data-testid="plan">')[1].split("</pre>")[0])
    assert '"builder": "interval"' in plan and '"suppression": 0.2' in plan
    for f in release.findings:
        assert f'data-code="{f["code"]}"' in html
    audit = html.split('data-testid="audit"')[1].split("</table>")[0]
    for action in ("release.created", "release.approved", "release.signoff_downloaded"):
        assert f"<code>{action}</code>" in audit
    assert "k holds, but 1 class (3 records) shares one value of disease" in html


def test_signoff_plan_keeps_accents_and_the_report_is_scrubbed(client, officer, team, dataset):
    from anonweb.jobs.publication import release_create

    job = Job.objects.create(
        team=team,
        dataset=dataset,
        kind=JobKind.ANONYMIZE,
        status=JobStatus.RUNNING,
        created_by=officer,
    )
    plan_dict = {"version": 1, "steps": [{"kind": "drop", "params": {"columns": ["prénom"]}}]}
    report = {
        "risk_before": {
            "k": 1,
            "sensitive": {"disease": {"disclosing_classes": [{"zip": "47677", "v": "hiv"}]}},
        }
    }
    release = release_create(
        job=job, frame=pd.DataFrame({"age": ["20-29"]}), plan=plan_dict, report=report, title="r"
    )
    client.force_login(officer)
    html = signoff(client, release).content.decode()
    plan = unescape(html.split('data-testid="plan">')[1].split("</pre>")[0])
    assert json.loads(plan) == plan_dict and '"prénom"' in plan
    assert "47677" not in html and "hiv" not in html


@pytest.mark.parametrize(
    "who,approved,status",
    [
        ("officer", False, 200),
        ("steward", False, 200),
        ("officer", True, 200),
        ("steward", True, 200),
        ("analyst", True, 403),
        ("analyst", False, 404),
        ("outsider", True, 404),
    ],
)
def test_who_may_download_the_signoff(client, request, team, release, who, approved, status):
    if approved:
        second = member(team, Role.DATA_STEWARD, username="sue")
        approve(second, release, "ok")
    user = request.getfixturevalue(who)
    client.force_login(user)
    before = AuditEvent.objects.filter(action="release.signoff_downloaded").count()
    response = signoff(client, release)
    assert response.status_code == status
    recorded = AuditEvent.objects.filter(action="release.signoff_downloaded")
    assert recorded.count() == before + (status == 200)
    if status == 200:
        event = recorded.latest("seq")
        assert event.actor_name == user.username
        assert {f["name"]: f["sha256"] for f in event.details["files"]}["data.csv"] == (
            release.sha256
        )
    else:
        assert b"<td>" not in response.content


def test_signoff_requires_login(client, release):
    response = signoff(client, release)
    assert response.status_code == 302 and "login" in response.url


def test_release_page_links_the_signoff_for_staff(client, steward, release):
    client.force_login(steward)
    page = client.get(reverse("releases:detail", args=[release.pk])).content.decode()
    assert f'href="{reverse("releases:signoff", args=[release.pk])}"' in page


def test_api_signoff_is_the_same_document(officer, analyst, steward, release):
    from rest_framework.authtoken.models import Token
    from rest_framework.test import APIClient

    approve(steward, release, "ok")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=officer).key}")
    response = client.get(f"/api/v1/releases/{release.pk}/signoff/")
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment;")
    assert stated_hashes(response.content.decode())["data.csv"] == release.sha256
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=analyst).key}")
    response = client.get(f"/api/v1/releases/{release.pk}/signoff/")
    assert response.status_code == 403 and "error" in response.json()
