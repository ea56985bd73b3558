"""The release page's first lines (what the search did) and the sign-off report: a
self-contained HTML file with the SHA-256 of every stored file, the plan, the gate's findings, the
approval and the release's audit trail, for the team's officers and stewards only."""

from __future__ import annotations

import hashlib
import io
import json
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

import pandas as pd
import pytest
from django.urls import reverse
from django.utils.html import escape

from anonweb.accounts.models import Role
from anonweb.audit.models import AuditEvent
from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.jobs.services import job_create
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


# ---- reading the report back: its HTML as a tree, its key/value tables as values -------------

VOID = {"meta", "br", "hr", "img", "input", "link", "col", "wbr"}


@dataclass
class Node:
    tag: str
    attrs: dict = field(default_factory=dict)
    children: list = field(default_factory=list)

    @property
    def elements(self) -> list[Node]:
        return [c for c in self.children if isinstance(c, Node)]

    @property
    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text for c in self.children)

    def all(self, tag: str | None = None, **attrs) -> list[Node]:
        """Every descendant with this tag (any if None) and these attributes (testid=...)."""
        want = {("data-testid" if k == "testid" else k): v for k, v in attrs.items()}
        found = []
        for child in self.elements:
            if (tag is None or child.tag == tag) and all(
                child.attrs.get(k) == v for k, v in want.items()
            ):
                found.append(child)
            found += child.all(tag, **attrs)
        return found

    def one(self, tag: str | None = None, **attrs) -> Node:
        (found,) = self.all(tag, **attrs)
        return found

    def rows(self) -> list[Node]:
        """This table's own rows (not those of the tables nested in its cells)."""
        body = [e for e in self.elements if e.tag in ("thead", "tbody")] or [self]
        return [r for part in body for r in part.elements if r.tag == "tr"]

    def cells(self) -> list[Node]:
        return [c for c in self.elements if c.tag in ("th", "td")]


class TreeBuilder(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#document")
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        node = Node(tag, dict(attrs))
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_endtag(self, tag):
        assert self.stack[-1].tag == tag, f"</{tag}> closes <{self.stack[-1].tag}>"
        self.stack.pop()

    def handle_data(self, data):
        self.stack[-1].children.append(data)


def parse(html: str) -> Node:
    builder = TreeBuilder()
    builder.feed(html)
    builder.close()
    assert builder.stack == [builder.root], "unclosed elements"
    return builder.root


def shown(node: Node):
    """A value as the key/value tables show it: a table is a dict, a numbered list a list, and
    anything else the text of the cell."""
    loose = "".join(c for c in node.children if isinstance(c, str)).strip()
    if len(node.elements) == 1 and not loose:
        (only,) = node.elements
        if only.tag == "table" and only.attrs.get("class") == "kv":
            return {r.cells()[0].text: shown(r.cells()[1]) for r in only.rows()}
        if only.tag == "ol" and only.attrs.get("class") == "kv-list":
            return [shown(li) for li in only.elements]
    return node.text


def as_shown(value):
    """What a stored value should read as in those tables: nested dicts and lists of records as
    they are; a list of plain values as one line; no value, yes and no as words."""
    if isinstance(value, dict):
        return {str(k): as_shown(v) for k, v in value.items()} if value else "—"
    if isinstance(value, list | tuple):
        if not value:
            return "—"
        if all(not isinstance(v, dict | list | tuple) for v in value):
            return ", ".join(as_shown(v) for v in value)
        return [as_shown(v) for v in value]
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return repr(value) if isinstance(value, float) else str(value)


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


def api_client(user):
    from rest_framework.test import APIClient

    from anonweb.accounts.models import ApiToken

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {ApiToken.issue(user)[1]}")
    return client


def xlsx_download(user, release) -> pd.DataFrame:
    response = api_client(user).get(f"/api/v1/releases/{release.pk}/download/?format=xlsx")
    assert response.status_code == 200, response.content[:200]
    return pd.read_excel(io.BytesIO(response.content), dtype=str, keep_default_na=False)


def test_signoff_names_the_stored_file_the_xlsx_download_is_written_from(client, officer, release):
    client.force_login(officer)
    html = signoff(client, release).content.decode()
    said = parse(html).one(testid="xlsx")
    source = said.attrs["data-source"]
    stated = said.one(testid="xlsx-source-sha256").text
    path = release_dir(release.storage_key) / source
    # the file it names is one of the stored files, listed with the same hash as on disk
    assert stated == stated_hashes(html)[source] == hashlib.sha256(path.read_bytes()).hexdigest()
    # the download's cells are that file's rows and columns
    stored = pd.read_parquet(path).astype(str)
    assert xlsx_download(officer, release).equals(stored)
    # and it is written from that file, not another copy of the rows: change the file and the
    # download and the report's hash follow it
    changed = pd.read_parquet(path).replace({"disease": {"flu": "grippe"}})
    changed.to_parquet(path, index=False)
    assert set(xlsx_download(officer, release)["disease"]) == {"grippe", "cancer", "gastritis"}
    html = signoff(client, release).content.decode()
    now = parse(html).one(testid="xlsx").one(testid="xlsx-source-sha256").text
    assert now == hashlib.sha256(path.read_bytes()).hexdigest() != stated
    assert "grippe" not in (release_dir(release.storage_key) / "data.csv").read_text()


def test_signoff_says_when_a_release_has_no_xlsx_download(client, officer, release, monkeypatch):
    from dataclasses import replace

    from anonweb.core.io.export import EXPORT_FORMATS

    # a sheet of 5 rows: the 7 released rows do not fit, as a release of more than 1,048,575
    monkeypatch.setitem(EXPORT_FORMATS, "xlsx", replace(EXPORT_FORMATS["xlsx"], max_rows=5))
    response = api_client(officer).get(f"/api/v1/releases/{release.pk}/download/?format=xlsx")
    assert response.status_code == 400 and "more than a spreadsheet holds" in str(response.json())
    client.force_login(officer)
    doc = parse(signoff(client, release).content.decode())
    assert not doc.all(testid="xlsx")
    assert "its 7 rows are more than a spreadsheet holds (5)" in doc.one(testid="no-xlsx").text


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
    before = parse(signoff(client, release).content.decode())
    assert "Not yet approved" in before.one(testid="approval").text
    approve(steward, release, "fine by me")
    release.refresh_from_db()
    doc = parse(signoff(client, release).content.decode())
    approval = doc.one(testid="approval").text
    assert "Approved" in approval and steward.username in approval and "fine by me" in approval
    assert "Not yet approved" not in approval
    override = doc.one(testid="override").text
    assert OVERRIDE in override and "risk_k" in override
    # the plan, every parameter as a table, and as JSON to run it again
    assert shown(doc.one(testid="plan")) == as_shown(release.plan)
    assert shown(doc.one(testid="plan"))["hierarchies"]["age"]["builder"] == "interval"
    assert json.loads(doc.one(testid="plan-json").one("pre").text) == release.plan
    # the gate's findings, each with its code
    findings = [r.attrs["data-code"] for r in doc.one(testid="findings").all(testid="finding")]
    assert findings == [f["code"] for f in release.findings] and "risk_k" in findings
    # the audit trail as it was when the report was made (its own download is recorded after)
    events = list(
        AuditEvent.objects.filter(target_type="release", target_id=str(release.pk)).order_by("seq")
    )
    assert events[-1].action == "release.signoff_downloaded"
    rows = doc.one(testid="audit").all(testid="event")
    assert [int(r.attrs["data-seq"]) for r in rows] == [e.seq for e in events[:-1]]
    for row, event in zip(rows, events[:-1], strict=True):
        seq, _when, who, action, details = row.cells()
        assert (seq.text, who.text, action.text) == (str(event.seq), event.actor_name, event.action)
        assert shown(details) == as_shown(event.details)
    actions = [e.action for e in events[:-1]]
    assert {"release.created", "release.approved", "release.signoff_downloaded"} <= set(actions)
    created = shown(rows[actions.index("release.created")].cells()[4])
    assert created["sha256"] == release.sha256 and created["plan"] == as_shown(release.plan)
    assert "{&quot;" not in str(doc.one(testid="audit").text)
    assert "k holds, but 1 class (3 records) shares one value of disease" in doc.text


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
    doc = parse(html)
    plan = doc.one(testid="plan-json").one("pre").text
    assert json.loads(plan) == plan_dict and '"prénom"' in plan
    assert shown(doc.one(testid="plan"))["steps"][0]["params"]["columns"] == "prénom"
    assert "\\u00e9" not in html
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
    from rest_framework.test import APIClient

    from anonweb.accounts.models import ApiToken

    approve(steward, release, "ok")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {ApiToken.issue(officer)[1]}")
    response = client.get(f"/api/v1/releases/{release.pk}/signoff/")
    assert response.status_code == 200
    assert response["Content-Disposition"].startswith("attachment;")
    assert stated_hashes(response.content.decode())["data.csv"] == release.sha256
    client.credentials(HTTP_AUTHORIZATION=f"Token {ApiToken.issue(analyst)[1]}")
    response = client.get(f"/api/v1/releases/{release.pk}/signoff/")
    assert response.status_code == 403 and "error" in response.json()


def test_each_event_of_the_signoff_audit_trail_is_rendered_once(client, officer, release):
    import re

    from anonweb.common.charts import builds

    client.force_login(officer)
    first = signoff(client, release).content.decode()
    before = builds["signoff-row"]
    second = signoff(client, release).content.decode()
    # the second report adds the first one's download, the only row rendered for it
    assert builds["signoff-row"] == before + 1
    rows = [re.findall(r'<tr data-testid="event".*?</tr>', html) for html in (first, second)]
    assert len(rows[1]) == len(rows[0]) + 1 and rows[1][: len(rows[0])] == rows[0]
    assert (
        'data-testid="event-details"' in rows[1][-1] and "release.signoff_downloaded" in rows[1][-1]
    )
