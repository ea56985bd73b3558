"""The release gate at the moment of the decision (issue 19, item 1).

Release 1 generalizes age, release 2 keeps sex and region; both keep the glucose reading, unique
per patient, so they can be joined row by row. Release 2 is written second and is blocked with
``conflict_linkage``; a steward approves it over the finding. Release 1, written first with
nothing to conflict with, must now be refused without a justification: its page, the API, the
review and the sign-off report all give the conflict with release 2 as it stands."""

import json

import pytest
from django.urls import reverse

from anonweb.audit.models import AuditEvent
from anonweb.releases.gate import release_gate_now
from anonweb.releases.services import ReleaseBlocked, release_approve, release_reject
from tests.web.api.test_api_releases import api
from tests.web.releases.test_conflict_findings import (  # noqa: F401  (fixtures)
    _release,
    bmi,
    bmi_plans,
    stroke,
    stroke_plans,
)

pytestmark = pytest.mark.django_db

JUSTIFICATION = "The recipient holds only this release under contract; reviewed with legal."


@pytest.fixture
def pair(officer, stroke):  # noqa: F811
    by_age, by_sex = stroke_plans(["glucose"])
    first = _release(officer, stroke, by_age, "by age")
    second = _release(officer, stroke, by_sex, "by sex and region")
    return first, second


def codes(findings) -> set[str]:
    """The conflict codes among ``findings`` (release 2 alone is also below k on sex and
    region, which is not what these tests are about)."""
    return {f["code"] for f in findings if f["code"].startswith("conflict_")}


def test_approving_the_earlier_release_after_the_later_needs_the_override(pair, steward):
    first, second = pair
    assert first.findings == []  # written alone: nothing to conflict with then
    assert codes(second.blocking_findings) == {"conflict_linkage"}
    release_approve(user=steward, release=second, override=JUSTIFICATION)
    with pytest.raises(ReleaseBlocked) as refused:
        release_approve(user=steward, release=first, note="looks fine")
    found = refused.value.findings
    assert codes(found) == {"conflict_linkage"}
    assert all(f["facts"]["statuses"]["release 2"] == "approved" for f in found)
    assert sum(f["records"] for f in found) > 0
    first.refresh_from_db()
    assert first.status == "pending"
    approved = release_approve(user=steward, release=first, override=JUSTIFICATION)
    assert approved.status == "approved"
    assert codes(approved.override["findings"]) == {"conflict_linkage"}
    # The audit trail records the findings as they were at the decision, naming release 2.
    event = AuditEvent.objects.get(action="release.approved", target_id=str(first.pk))
    details = json.loads(event.details_text)
    assert codes(details["overridden"]) == {"conflict_linkage"}
    assert all(f["releases"]["release 2"] == "approved" for f in details["overridden"])
    assert details["conflicts_checked"] == [second.pk]


def test_both_pending_block_each_other(pair, steward):
    first, second = pair
    for release in (first, second):
        with pytest.raises(ReleaseBlocked) as refused:
            release_approve(user=steward, release=release)
        assert codes(refused.value.findings) == {"conflict_linkage"}


def test_a_conflict_with_a_release_rejected_since_no_longer_blocks(pair, steward):
    first, second = pair
    release_reject(user=steward, release=second, note="not this one")
    gate = release_gate_now(release=first)
    assert gate.findings == () and gate.checked == ()
    assert release_approve(user=steward, release=first).status == "approved"


def test_the_later_release_no_longer_blocks_once_the_earlier_is_rejected(pair, steward):
    first, second = pair
    assert codes(release_gate_now(release=second).blocking) == {"conflict_linkage"}
    release_reject(user=steward, release=first, note="superseded")
    assert codes(release_gate_now(release=second).blocking) == set()
    assert {f["code"] for f in second.blocking_findings} > {"conflict_linkage"}
    approved = release_approve(user=steward, release=second, override=JUSTIFICATION)
    assert codes(approved.override["findings"]) == set()


def test_the_page_never_says_no_finding_above_the_conflicts(client, pair, steward):
    first, second = pair
    release_approve(user=steward, release=second, override=JUSTIFICATION)
    client.force_login(steward)
    page = client.get(reverse("releases:detail", args=[first.pk])).content.decode()
    assert 'data-testid="conflicts"' in page
    assert 'data-testid="no-findings"' not in page
    assert 'data-code="conflict_linkage"' in page
    assert 'data-testid="override-input"' in page
    assert "[release 2: approved]" in page and "this release: this release" not in page
    # Approving from the page without a justification is refused.
    url = reverse("releases:review", args=[first.pk])
    answer = client.post(url, {"decision": "approve", "note": "ok"}, follow=True).content.decode()
    assert "blocking finding" in answer
    first.refresh_from_db()
    assert first.status == "pending"


def test_the_api_and_the_page_agree(client, pair, steward, analyst):
    first, second = pair
    release_approve(user=steward, release=second, override=JUSTIFICATION)
    as_steward = api(steward)
    gate = as_steward.get(f"/api/v1/releases/{first.pk}/gate/").json()
    assert codes(gate["findings"]) == {"conflict_linkage"} and gate["rechecked"]
    assert [(o["id"], o["status"]) for o in gate["checked"]] == [(second.pk, "approved")]
    refused = as_steward.post(
        f"/api/v1/releases/{first.pk}/review/", {"decision": "approve"}, format="json"
    )
    assert refused.status_code == 409
    assert refused.json()["findings"] == [f for f in gate["findings"] if f["severity"] == "block"]
    client.force_login(steward)
    page = client.get(reverse("releases:detail", args=[first.pk])).content.decode()
    for f in gate["findings"]:
        assert f'data-code="{f["code"]}"' in page
    # The gate is internal: an analyst may see the approved release 2, not its gate.
    assert api(analyst).get(f"/api/v1/releases/{second.pk}/gate/").status_code == 403
    assert api(analyst).get(f"/api/v1/releases/{first.pk}/gate/").status_code == 404


def test_the_signoff_report_lists_the_conflict_current_when_it_is_generated(client, pair, steward):
    first, second = pair
    release_approve(user=steward, release=second, override=JUSTIFICATION)
    release_approve(user=steward, release=first, override=JUSTIFICATION)
    client.force_login(steward)
    html = client.get(reverse("releases:signoff", args=[first.pk])).content.decode()
    assert 'data-testid="no-findings"' not in html
    assert 'data-code="conflict_linkage"' in html
    assert 'data-testid="signoff-conflict"' in html and "release 2" in html
    # the override states what the conflicts were checked against at the decision
    assert "its conflicts checked then against release 2 (approved)" in html


def test_an_unchanged_state_is_checked_once_and_a_change_is_checked_again(
    monkeypatch, pair, steward
):
    import anonweb.releases.gate as gate_module

    first, second = pair
    runs = []
    real = gate_module.release_conflict_check

    def counted(**kwargs):
        runs.append(kwargs["exclude_id"])
        return real(**kwargs)

    monkeypatch.setattr(gate_module, "release_conflict_check", counted)
    one = release_gate_now(release=first)
    again = release_gate_now(release=first)
    assert runs == [first.pk] and one.version == again.version
    assert codes(again.findings) == {"conflict_linkage"}
    # Another release's state changes: the next look is a new state, checked afresh.
    # The approval of release 2 decides on the check its publishing job made, in the state
    # that still holds (release 1 live): not checked again.
    release_approve(user=steward, release=second, override=JUSTIFICATION)
    assert runs == [first.pk]
    after = release_gate_now(release=first)
    assert runs == [first.pk, first.pk] and after.version != one.version
    conflicts = [f for f in after.findings if f["code"].startswith("conflict_")]
    assert {f["facts"]["statuses"]["release 2"] for f in conflicts} == {"approved"}
    # Its own approval does not change what release 1 conflicts with: no new check.
    release_gate_now(release=second)
    assert runs.count(second.pk) == 0
    release_reject(user=steward, release=first, note="no")
    assert codes(release_gate_now(release=second).findings) == set()
    assert runs.count(second.pk) == 1


def test_an_unchanged_state_reads_the_whole_gate_kept_and_a_status_change_shows_at_once(
    pair, steward
):
    """The gate is kept whole under its state: a second look reads no recorded conflict
    finding, and gives the same findings, releases checked and notes; a status change of
    another release of the source is a new state, seen on the next look."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    first, second = pair
    one = release_gate_now(release=first)
    with CaptureQueriesContext(connection) as ctx:
        again = release_gate_now(release=first)
    assert not any("releases_conflictfinding" in q["sql"] for q in ctx.captured_queries)
    assert (again.findings, again.checked, again.notes, again.version, again.rechecked) == (
        one.findings,
        one.checked,
        one.notes,
        one.version,
        one.rechecked,
    )
    assert [c["status"] for c in again.checked] == ["pending"]
    assert codes(again.findings) == {"conflict_linkage"}
    release_reject(user=steward, release=second, note="no")
    after = release_gate_now(release=first)
    assert after.checked == () and after.version != one.version
    assert codes(after.findings) == set()


def test_the_comparison_gives_each_side_its_gate_as_it_stands(pair, steward):
    first, second = pair
    release_approve(user=steward, release=second, override=JUSTIFICATION)
    body = api(steward).get(f"/api/v1/releases/compare/?a={first.pk}&b={second.pk}").json()
    rows = {r["label"]: r for r in body["findings"]}
    linkage = [label for label in rows if label.startswith("conflict_linkage")]
    assert linkage and all(rows[label]["a"].startswith("block") for label in linkage)
    assert rows["Blocking findings"]["a"] == len(release_gate_now(release=first).blocking)


def test_once_the_source_is_purged_the_recorded_conflicts_still_decide(
    pair, officer, steward, django_capture_on_commit_callbacks
):
    from anonweb.jobs.retention import dataset_purge

    first, second = pair
    release_approve(user=steward, release=second, override=JUSTIFICATION)
    with django_capture_on_commit_callbacks(execute=True):
        dataset_purge(user=officer, dataset=first.dataset, reason="study closed")
    first.refresh_from_db()
    gate = release_gate_now(release=first)
    assert not gate.rechecked and "purged" in " ".join(gate.notes)
    # the conflicts release 2's check recorded with release 1, release 2 still live
    assert codes(gate.blocking) == {"conflict_linkage"}
    assert all(f["facts"]["recorded"] for f in gate.conflicts)
    assert all("release 2: approved" in f["message"] for f in gate.conflicts)
    with pytest.raises(ReleaseBlocked):
        release_approve(user=steward, release=first)


def test_three_microaggregations_conflicts_follow_the_live_releases(officer, steward, bmi):  # noqa: F811
    """Seed 000's two BMI schemes, the second released twice. Release 3 adds nothing when it is
    written (releases 1 and 2 already give Doug Fulton's BMI away), and release 2's check of
    itself against 1 and 3 finds nothing new either; the conflict recorded between 1 and 2
    still holds it. Once release 2 is rejected, 1 and 3 give the BMI away together, a conflict
    no check made when a release was written could have found."""
    first_plan, second_plan = bmi_plans()
    first = _release(officer, bmi, first_plan)
    second = _release(officer, bmi, second_plan)
    third = _release(officer, bmi, second_plan)
    assert not third.conflict_findings.exists()

    def pairs(release):
        return [
            (f["code"], sorted(f["facts"]["releases"]), bool(f["facts"].get("recorded")))
            for f in release_gate_now(release=release).conflicts
        ]

    assert pairs(first) == [("conflict_exact_inference", ["release 2", "this release"], False)]
    assert pairs(second) == [("conflict_exact_inference", ["release 1", "this release"], True)]
    assert pairs(third) == []
    release_reject(user=steward, release=second, note="discloses a record")
    assert pairs(first) == [("conflict_exact_inference", ["release 3", "this release"], False)]
    assert pairs(third) == [("conflict_exact_inference", ["release 1", "this release"], False)]
    with pytest.raises(ReleaseBlocked):
        release_approve(user=steward, release=third)


def test_an_override_written_for_findings_that_changed_since_is_refused(client, pair, steward):
    from tests.web.releases.test_conflict_findings import stroke_plans as plans

    first, second = pair
    client.force_login(steward)
    page = client.get(reverse("releases:detail", args=[first.pk])).content.decode()
    seen = release_gate_now(release=first).version
    assert f'name="gate_version" value="{seen}"' in page
    # Meanwhile another release of the source is written: release 1 is checked against it too.
    by_age, _ = plans(["glucose"])
    _release(first.requested_by, first.dataset, by_age, "by age again")
    url = reverse("releases:review", args=[first.pk])
    body = {"decision": "approve", "override": JUSTIFICATION, "gate_version": seen}
    answer = client.post(url, body, follow=True).content.decode()
    assert "changed since you read the findings" in answer
    first.refresh_from_db()
    assert first.status == "pending"
    # Read again, the override goes through, over the findings of the state it was written for.
    now = release_gate_now(release=first)
    assert now.version != seen
    client.post(url, {**body, "gate_version": now.version})
    first.refresh_from_db()
    assert first.status == "approved"
    assert len(first.override["findings"]) == len(now.blocking)


def test_the_api_takes_the_gate_version_the_override_was_written_for(pair, steward):
    first, second = pair
    as_steward = api(steward)
    seen = as_steward.get(f"/api/v1/releases/{first.pk}/gate/").json()["version"]
    release_approve(user=steward, release=second, override=JUSTIFICATION)
    url = f"/api/v1/releases/{first.pk}/review/"
    body = {"decision": "approve", "override": JUSTIFICATION, "gate_version": seen}
    stale = as_steward.post(url, body, format="json")
    assert stale.status_code == 409 and "changed since" in stale.json()["error"]
    assert codes(stale.json()["findings"]) == {"conflict_linkage"}
    current = as_steward.get(f"/api/v1/releases/{first.pk}/gate/").json()["version"]
    done = as_steward.post(url, {**body, "gate_version": current}, format="json")
    assert done.status_code == 200 and done.json()["status"] == "approved"
