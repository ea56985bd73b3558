"""Recipients are access: a release that names its recipients (analysts and groups of the team)
is seen and downloaded by them only, through every page and API route; one that names none goes
to every analyst of the team, as before. A steward sends a release outside the team with a
single-use, expiring link. Every download records who received what."""

from __future__ import annotations

import io
from datetime import timedelta

import pandas as pd
import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from anonweb.accounts.models import ApiToken, Role
from anonweb.accounts.services import team_group_create
from anonweb.audit.models import AuditEvent
from anonweb.jobs.models import Job, JobKind
from anonweb.releases.models import Release, ReleaseLink
from anonweb.releases.services import release_approve
from tests.web.api.test_api import run_queued
from tests.web.api.test_api_releases import PLAN
from tests.web.factories import member

pytestmark = pytest.mark.django_db


def api(user=None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.credentials(HTTP_AUTHORIZATION=f"Token {ApiToken.issue(user)[1]}")
    return client


def launch(officer, dataset, **extra):
    body = {"title": "QA extract", "purpose": "checks", "recipient": "Internal QA", "plan": PLAN}
    return api(officer).post(
        f"/api/v1/datasets/{dataset.pk}/releases/", {**body, **extra}, format="json"
    )


def approved_release(officer, steward, dataset, **extra) -> Release:
    response = launch(officer, dataset, **extra)
    assert response.status_code == 202, response.content
    (job,) = run_queued()
    assert job.status == "succeeded", job.error
    release = Release.objects.get(job=job)
    return release_approve(
        user=steward,
        release=release,
        note="checked",
        override="Six synthetic rows: the policy's k does not apply to this extract.",
    )


@pytest.fixture
def bob(team):
    return member(team, Role.ANALYST, username="bob")


@pytest.fixture
def qa(team, officer):
    """A group of the team with one analyst, cy."""
    cy = member(team, Role.ANALYST, username="cy")
    return team_group_create(actor=officer, team=team, name="qa", members=[cy])


def urls(release) -> dict[str, str]:
    page_download = reverse("releases:download", args=[release.pk])
    return {
        "page": reverse("releases:detail", args=[release.pk]),
        "page csv": page_download,
        "page parquet": page_download + "?format=parquet",
        "page xlsx": page_download + "?format=xlsx",
        "api": f"/api/v1/releases/{release.pk}/",
        "api csv": f"/api/v1/releases/{release.pk}/download/",
        "api parquet": f"/api/v1/releases/{release.pk}/download/?format=parquet",
        "api xlsx": f"/api/v1/releases/{release.pk}/download/?format=xlsx",
    }


def statuses(client, user, release) -> dict[str, int]:
    client.force_login(user)
    out = {}
    for name, url in urls(release).items():
        response = client.get(url) if name.startswith("page") else api(user).get(url)
        out[name] = response.status_code
        if response.streaming:
            b"".join(response.streaming_content)  # read to the end, which closes the file
    return out


def listed(client, user, release) -> tuple[bool, bool]:
    """Whether the release is in the user's release list, on the page and in the API."""
    client.force_login(user)
    page = client.get(reverse("releases:list")).content.decode()
    on_page = reverse("releases:detail", args=[release.pk]) in page
    in_api = release.pk in [r["id"] for r in api(user).get("/api/v1/releases/").json()]
    return on_page, in_api


def test_a_release_named_for_recipients_is_theirs_only(
    client, officer, steward, analyst, bob, qa, dataset
):
    release = approved_release(officer, steward, dataset, recipients=["ana", "group:qa"])
    cy = qa.members.get()

    assert set(statuses(client, bob, release).values()) == {404}
    assert listed(client, bob, release) == (False, False)
    for receiver in (analyst, cy, officer, steward):
        assert set(statuses(client, receiver, release).values()) == {200}, receiver
        assert listed(client, receiver, release) == (True, True)

    # the analyst who does not receive it reads nothing of it in the audit trail either
    client.force_login(bob)
    assert api(bob).get("/api/v1/audit/?action=release.approved").json() == []
    assert api(analyst).get("/api/v1/audit/?action=release.approved").json() != []

    # who received what: one event per download, with the user and the format
    downloads = AuditEvent.objects.filter(action="release.downloaded", target_id=str(release.pk))
    received = sorted((e.details["user"], e.details["format"]) for e in downloads)
    assert received == sorted(
        (u, f) for u in ("ana", "cy", "olivia", "sam") for f in ("csv", "parquet", "xlsx") * 2
    )


def test_a_release_received_several_ways_is_listed_once(client, officer, steward, dataset, team):
    """Named, and in two groups that receive it, and a member in two roles: one row each."""
    from anonweb.accounts.services import membership_grant
    from anonweb.releases.selectors import releases_for_user

    membership_grant(actor=None, team=team, user=officer, role=Role.DATA_STEWARD)
    cy = member(team, Role.ANALYST, username="cy")
    for name in ("qa", "qb"):
        team_group_create(actor=officer, team=team, name=name, members=[cy])
    release = approved_release(officer, steward, dataset, recipients=["cy", "group:qa", "group:qb"])
    for user in (cy, officer, steward):
        assert list(releases_for_user(user=user)) == [release], user
    assert listed(client, cy, release) == (True, True)
    assert len(api(cy).get("/api/v1/releases/").json()) == 1


def test_a_group_member_receives_it_only_while_an_analyst_of_the_team(
    client, officer, steward, qa, dataset
):
    from anonweb.accounts.models import Membership

    release = approved_release(officer, steward, dataset, recipients=["group:qa"])
    cy = qa.members.get()
    assert statuses(client, cy, release)["api csv"] == 200
    Membership.objects.filter(user=cy).delete()
    assert statuses(client, cy, release)["api csv"] == 404


def test_without_recipients_every_analyst_receives_it_and_the_page_says_so(
    client, officer, steward, analyst, bob, dataset
):
    release = approved_release(officer, steward, dataset)
    assert release.recipients == []
    for reader in (analyst, bob):
        assert set(statuses(client, reader, release).values()) == {200}
    client.force_login(steward)
    page = client.get(reverse("releases:detail", args=[release.pk])).content.decode()
    assert "every analyst of the team (no recipients were named)" in page
    assert api(steward).get(f"/api/v1/releases/{release.pk}/").json()["recipients"] == []


def test_the_release_json_and_page_carry_the_recipients(
    client, officer, steward, analyst, qa, dataset
):
    release = approved_release(officer, steward, dataset, recipients=[" ana ", "group:qa", "ana"])
    assert release.recipients == ["ana", "group:qa"]
    body = api(steward).get(f"/api/v1/releases/{release.pk}/").json()
    assert body["recipients"] == ["ana", "group:qa"]
    assert body["recipient"] == "Internal QA"
    client.force_login(officer)
    page = client.get(reverse("releases:detail", args=[release.pk])).content.decode()
    assert "<code>ana</code>, <code>group:qa</code> only" in page
    created = AuditEvent.objects.get(action="release.created", target_id=str(release.pk))
    assert created.details["recipients"] == ["ana", "group:qa"]
    signoff = client.get(reverse("releases:signoff", args=[release.pk]))
    assert '<td data-testid="recipients">ana, group:qa only</td>' in signoff.content.decode()


@pytest.mark.parametrize(
    "recipients,message",
    [
        (["olivia"], "'olivia' is not an analyst of team Clinic"),
        (["nobody"], "'nobody' is not an analyst of team Clinic"),
        (["group:ops"], "no group 'ops' in team Clinic"),
        (["group:elsewhere-qa"], "no group 'elsewhere-qa' in team Clinic"),
        (["ana", "ana bob"], "'ana bob' is not a username (or group:NAME for a group)"),
        ("ana", "recipients: Expected a list of items"),
    ],
)
def test_a_launch_naming_anyone_else_is_refused(
    officer, analyst, other_team, outsider, dataset, recipients, message
):
    team_group_create(actor=outsider, team=other_team, name="elsewhere-qa", members=[outsider])
    response = launch(officer, dataset, recipients=recipients)
    assert response.status_code == 400
    body = response.json()
    assert message in (body.get("error") or " ".join(body.get("errors", [])))
    assert not Job.objects.filter(kind=JobKind.ANONYMIZE).exists()


def test_the_launch_page_takes_recipients_and_refuses_unknown_ones(
    client, officer, steward, analyst, qa, dataset
):
    import json

    client.force_login(officer)
    url = reverse("jobs:plan", args=[dataset.pk])
    page = client.get(url).content.decode()
    assert "Empty: every analyst of the team receives it." in page
    form = {
        "title": "QA",
        "purpose": "checks",
        "recipient": "Internal QA",
        "plan": json.dumps(PLAN),
    }
    refused = client.post(url, {**form, "recipients": "ana, group:nope"})
    assert refused.status_code == 400
    assert "no group &#x27;nope&#x27; in team Clinic" in refused.content.decode()
    assert not Job.objects.filter(kind=JobKind.ANONYMIZE).exists()
    launched = client.post(url, {**form, "recipients": "ana, group:qa"})
    assert launched.status_code == 302
    (job,) = run_queued()
    assert Release.objects.get(job=job).recipients == ["ana", "group:qa"]


# ---- links for recipients outside the team -----------------------------------------------------


def issue(steward, release, **body):
    body = {"recipient": "auditor at the ministry", "format": "parquet", "hours": 48, **body}
    return api(steward).post(f"/api/v1/releases/{release.pk}/links/", body, format="json")


def test_a_link_gives_the_file_once_and_nothing_else(client, officer, steward, dataset):
    release = approved_release(officer, steward, dataset)
    response = issue(steward, release)
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["format"] == "parquet" and body["recipient"] == "auditor at the ministry"
    url = body["url"].removeprefix("http://testserver")
    link = ReleaseLink.objects.get(pk=body["id"])
    assert url.rstrip("/").split("/")[-1] not in link.token_sha256  # only a hash is stored

    client.logout()
    page = client.get(url)
    assert page.status_code == 200
    text = page.content.decode()
    for private in (dataset.name, release.title, "checks", "Internal QA", "sam", "olivia"):
        assert private not in text
    got = client.post(url)
    assert got.status_code == 200
    assert got["Content-Disposition"] == f'attachment; filename="release-{link.pk}.parquet"'
    table = pd.read_parquet(io.BytesIO(b"".join(got.streaming_content)))
    assert len(table) == release.rows

    again = client.post(url)
    assert again.status_code == 410
    assert "has been used already" in again.content.decode()
    assert client.get(url).status_code == 410

    issued = AuditEvent.objects.get(action="release.link_issued")
    assert issued.actor_name == "sam"
    assert issued.details["link"] == link.pk and issued.details["format"] == "parquet"
    used = AuditEvent.objects.get(action="release.downloaded", target_id=str(release.pk))
    assert used.details["link"] == link.pk
    assert used.details["for"] == "auditor at the ministry"
    assert used.details["format"] == "parquet"


def test_an_expired_link_is_refused(client, officer, steward, dataset):
    release = approved_release(officer, steward, dataset)
    url = issue(steward, release, hours=1).json()["url"].removeprefix("http://testserver")
    ReleaseLink.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    client.logout()
    for response in (client.get(url), client.post(url)):
        assert response.status_code == 410
        assert "This download link has expired" in response.content.decode()
    assert not AuditEvent.objects.filter(action="release.downloaded").exists()
    assert ReleaseLink.objects.get().used_at is None


def test_an_unknown_link_is_404(client):
    assert client.get(reverse("releases:link", args=["not-a-token"])).status_code == 404
    assert client.post(reverse("releases:link", args=["not-a-token"])).status_code == 404


def test_only_a_steward_issues_links_and_only_for_an_approved_release(
    client, officer, steward, analyst, dataset
):
    release = approved_release(officer, steward, dataset)
    assert issue(officer, release).status_code == 403
    assert issue(analyst, release).status_code == 403
    assert issue(steward, release, hours=0).status_code == 400
    assert issue(steward, release, format="pdf").status_code == 400
    response = launch(officer, dataset)
    (job,) = run_queued()
    pending = Release.objects.get(job=job)
    response = issue(steward, pending)
    assert response.status_code == 409
    assert "Only an approved release" in response.json()["error"]
    assert not ReleaseLink.objects.exists()


def test_the_steward_issues_a_link_on_the_release_page(client, officer, steward, dataset):
    release = approved_release(officer, steward, dataset)
    client.force_login(steward)
    page = client.get(reverse("releases:detail", args=[release.pk])).content.decode()
    assert 'data-testid="link-form"' in page
    shown = client.post(
        reverse("releases:link_issue", args=[release.pk]),
        {"label": "external auditor", "format": "csv", "hours": 24},
    )
    assert shown.status_code == 200
    text = shown.content.decode()
    start = text.index('data-testid="link-url">') + len('data-testid="link-url">')
    url = text[start : text.index("</code>", start)].removeprefix("http://testserver")
    client.logout()
    got = client.post(url)
    assert got.status_code == 200 and got["Content-Type"] == "text/csv"
    assert b"".join(got.streaming_content).startswith(b"age,sex,disease")
    client.force_login(steward)
    page = client.get(reverse("releases:detail", args=[release.pk])).content.decode()
    assert "external auditor" in page and "not yet" not in page


# ---- groups of a team ---------------------------------------------------------------------------


def test_groups_hold_members_of_their_team_and_every_change_is_audited(
    team, officer, analyst, bob, outsider
):
    from anonweb.accounts.services import MembershipError, team_group_set_members

    group = team_group_create(actor=officer, team=team, name="qa", members=[analyst])
    team_group_set_members(actor=officer, group=group, members=[bob])
    events = AuditEvent.objects.filter(action__startswith="group.").order_by("seq")
    assert [(e.action, e.actor_name, e.details) for e in events] == [
        ("group.created", "olivia", {"name": "qa"}),
        ("group.members_changed", "olivia", {"name": "qa", "added": ["ana"], "removed": []}),
        ("group.members_changed", "olivia", {"name": "qa", "added": ["bob"], "removed": ["ana"]}),
    ]
    with pytest.raises(MembershipError, match="not members of team Clinic: eve"):
        team_group_set_members(actor=officer, group=group, members=[bob, outsider])
    with pytest.raises(MembershipError, match="already has a group 'qa'"):
        team_group_create(actor=officer, team=team, name="qa")
    assert list(group.members.all()) == [bob]


def test_a_group_made_in_the_admin_goes_through_the_services(client, team, analyst):
    from django.contrib.auth import get_user_model

    from anonweb.accounts.models import TeamGroup

    root = get_user_model().objects.create_superuser(username="root", password="x" * 20)
    client.force_login(root)
    response = client.post(
        reverse("admin:accounts_teamgroup_add"),
        {"team": team.pk, "name": "qa", "members": [analyst.pk]},
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    group = TeamGroup.objects.get(team=team, name="qa")
    assert list(group.members.all()) == [analyst]
    assert [e.actor_name for e in AuditEvent.objects.filter(action__startswith="group.")] == [
        "root",
        "root",
    ]
