"""A steward approves a release in the browser and downloads its sign-off report; the file's
hashes are those of the release's stored files, and it opens on its own (no script, nothing
fetched)."""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from anonweb.accounts.models import Role
from anonweb.jobs.execution import job_execute
from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.jobs.services import job_create
from anonweb.releases.storage import release_dir
from tests.browser.conftest import login
from tests.web.conftest import csv_upload
from tests.web.factories import TeamFactory, member

pytestmark = [pytest.mark.browser, pytest.mark.slow, pytest.mark.django_db(transaction=True)]
SHOTS = Path(os.environ.get("ANONWEB_SCREENSHOTS", "var/test/screenshots"))
JUSTIFICATION = "Bulletin of aggregates only; the homogeneous classes were discussed and accepted."


def _table(n=200, seed=11) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "name": [f"Person {i}" for i in range(n)],
            "zip": rng.choice(["02138", "02139", "02141", "02142", "02152"], n),
            "age": rng.integers(18, 90, n),
            "sex": rng.choice(["F", "M"], n),
            "diagnosis": rng.choice(["flu", "asthma", "diabetes", "migraine"], n),
        }
    )


PLAN = {
    "version": 1,
    "quasi_identifiers": ["zip", "age", "sex"],
    "sensitive": ["diagnosis"],
    "hierarchies": {
        "zip": {"builder": "mask"},
        "age": {"builder": "interval", "width": 10, "start": 0},
        "sex": {"rows": [["F", "*"], ["M", "*"]]},
    },
    "steps": [
        {"kind": "drop", "params": {"columns": ["name"]}},
        {"kind": "optimal_generalization", "params": {"k": 5, "suppression": 0.05}},
    ],
}


def _release(officer, team):
    from anonweb.datasets.services import dataset_create, dataset_set_tags

    ds = dataset_create(user=officer, team=team, upload=csv_upload(_table()), name="clinic")
    ds = dataset_set_tags(
        user=officer,
        dataset=ds,
        tags={
            "name": "identifier",
            "zip": "quasi_identifier",
            "age": "quasi_identifier",
            "sex": "quasi_identifier",
            "diagnosis": "sensitive",
        },
    )
    job = job_create(
        user=officer,
        team=team,
        kind=JobKind.ANONYMIZE,
        dataset=ds,
        params={
            "plan": PLAN,
            "title": "Clinic extract",
            "purpose": "Régional flu bulletin <2026>",
            "recipient": "Health office",
        },
    )
    job_execute(job_id=job.pk, worker="test")
    job = Job.objects.get(pk=job.pk)
    assert job.status == JobStatus.SUCCEEDED, job.error
    return job.release


def test_steward_approves_and_downloads_the_signoff_report(new_context, live_server, tmp_path):
    team = TeamFactory(name="Clinic")
    officer = member(team, Role.PRIVACY_OFFICER, username="olivia")
    member(team, Role.DATA_STEWARD, username="sam")
    release = _release(officer, team)
    url = f"{live_server.url}/releases/{release.pk}/"
    SHOTS.mkdir(parents=True, exist_ok=True)

    context = new_context(viewport={"width": 1280, "height": 720}, accept_downloads=True)
    page = context.new_page()
    login(page, live_server.url, "sam")
    page.goto(url)
    summary = page.locator("[data-testid=search-did]")
    assert "What the search did" in summary.inner_text()
    page.screenshot(path=str(SHOTS / "release-summary.png"))

    page.fill("#note", "Checked the summary, the findings and the hashes.")
    if page.locator("#override").count():
        page.fill("#override", JUSTIFICATION)
    page.click("button[value=approve]")
    page.wait_for_selector("[data-testid=release-status]:has-text('Approved')")

    with page.expect_download() as info:
        page.click("[data-testid=signoff]")
    download = info.value
    assert download.suggested_filename == f"clinic-v{release.version}-signoff.html"
    saved = tmp_path / download.suggested_filename
    download.save_as(saved)
    html = saved.read_text(encoding="utf-8")

    folder = release_dir(release.storage_key)
    on_disk = {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in folder.rglob("*")
        if p.is_file()
    }
    stated = dict(
        re.findall(r'data-name="([^"]+)">.*?data-testid="sha256">([0-9a-f]{64})<', html, re.S)
    )
    assert stated == on_disk and stated["data.csv"] == release.sha256

    # The file stands alone: opened from disk it fetches nothing and shows the approval.
    report = context.new_page()
    requested: list[str] = []
    report.on("request", lambda r: requested.append(r.url))
    report.goto(saved.as_uri())
    assert requested == [saved.as_uri()]
    approval = report.locator("[data-testid=approval]").inner_text()
    assert "Approved" in approval and "sam" in approval
    assert "Checked the summary, the findings and the hashes." in approval
    assert report.locator("[data-testid=purpose]").inner_text() == "Régional flu bulletin <2026>"
    # the plan and the audit details read as tables, the plan's JSON kept to run it again
    zip_builder = report.locator(
        "[data-testid=plan] tr:has(> th:text-is('zip')) tr:has(> th:text-is('builder')) > td"
    )
    assert zip_builder.inner_text() == "mask"
    plan_json = report.locator("[data-testid=plan-json] pre").text_content()
    assert json.loads(plan_json) == release.plan
    created = report.locator("[data-testid=event]:has(code:text-is('release.created'))")
    # the release's hash, beside each published object's (name, hash, version)
    sha = created.locator("[data-testid=event-details] tr:has(> th:text-is('sha256')) > td")
    assert release.sha256 in sha.all_inner_texts()
    assert "{" not in report.locator("[data-testid=audit]").inner_text()
    # the xlsx download is named with the stored file it is written from
    xlsx = report.locator("[data-testid=xlsx]")
    assert xlsx.get_attribute("data-source") == "data.parquet"
    assert report.locator("[data-testid=xlsx-source-sha256]").inner_text() == stated["data.parquet"]
    if release.override:
        assert JUSTIFICATION in report.locator("[data-testid=override-justification]").inner_text()
