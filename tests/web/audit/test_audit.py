import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from anonweb.audit.models import AuditEvent
from anonweb.audit.selectors import audit_verify_chain
from anonweb.audit.services import AuditDetailError, audit_record, compute_hash

pytestmark = pytest.mark.django_db


def _events(team, n=4):
    return [
        audit_record(actor=None, team=team, action="test.event", details={"i": i}) for i in range(n)
    ]


def test_chain_links_each_event_to_the_previous(team):
    events = _events(team)
    assert events[0].prev_hash == "0" * 64
    for before, after in zip(events, events[1:]):
        assert after.prev_hash == before.hash
        assert after.seq == before.seq + 1
    assert all(compute_hash(e) == e.hash for e in AuditEvent.objects.all())
    report = audit_verify_chain()
    assert report.ok and report.checked == 4


def test_verify_command_catches_an_edit_made_directly_in_the_database(team, capsys):
    events = _events(team)
    call_command("audit_verify")
    assert "4 events verified" in capsys.readouterr().out
    table = AuditEvent._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET action = %s WHERE id = %s", ["test.forged", events[2].pk]
        )
    with pytest.raises(CommandError) as exc:
        call_command("audit_verify")
    assert f"event #{events[2].pk}" in str(exc.value)
    assert "edited" in str(exc.value)


@pytest.mark.parametrize(
    "field,value",
    [
        ("details_text", '{"i":99}'),
        ("actor_name", "mallory"),
        ("actor_id", 424242),
        ("team_name", "Elsewhere"),
        ("team_id", 424242),
        ("action", "test.forged"),
        ("target_type", "release"),
        ("target_id", "99"),
        ("created_at", "2001-01-01 00:00:00+00:00"),
        ("prev_hash", "f" * 64),
        ("seq", 1000),
        ("scheme", 1),
    ],
)
def test_every_stored_field_is_covered_by_the_hash(team, officer, field, value):
    """An edit of any one field of an event, made in the database, makes that event's content
    disagree with its hash: the hash covers every field (a hash that left out the details or
    the actor's name would let those be rewritten unnoticed)."""
    events = [
        audit_record(actor=officer, team=team, action="test.event", details={"i": i})
        for i in range(3)
    ]
    target = events[1]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {AuditEvent._meta.db_table} SET {field} = %s WHERE id = %s",
            [value, target.pk],
        )
    report = audit_verify_chain()
    edited = [p for p in report.problems if p.event_id == target.pk]
    assert edited and "it was edited" in edited[0].reason, report.reason


def test_verify_catches_a_deleted_event(team):
    events = _events(team)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {AuditEvent._meta.db_table} WHERE id = %s", [events[1].pk])
    report = audit_verify_chain()
    assert not report.ok and report.broken_id == events[2].pk


def test_verify_catches_a_removed_tail(team):
    events = _events(team)
    with connection.cursor() as cursor:
        cursor.execute(f"DELETE FROM {AuditEvent._meta.db_table} WHERE id = %s", [events[-1].pk])
    report = audit_verify_chain()
    assert not report.ok and "removed" in report.reason


def test_events_are_append_only_through_the_orm(team):
    event = _events(team, 1)[0]
    with pytest.raises(RuntimeError):
        event.save()
    with pytest.raises(RuntimeError):
        event.delete()


@pytest.mark.parametrize(
    "details", [{"hmac_key": "abc"}, {"params": {"seed": 4}}, {"steps": [{"password": "x"}]}]
)
def test_secrets_are_refused(team, details):
    with pytest.raises(AuditDetailError):
        audit_record(actor=None, team=team, action="x", details=details)
    assert not AuditEvent.objects.exists()


def test_an_event_rolls_back_with_its_change(team):
    from django.db import transaction

    with pytest.raises(ZeroDivisionError), transaction.atomic():
        audit_record(actor=None, team=team, action="x")
        raise ZeroDivisionError("the change failed after its event was written")
    assert not AuditEvent.objects.exists()
    assert audit_verify_chain().ok


def test_audit_page_works_filters_and_hides_other_teams(client, officer, team, other_team):
    audit_record(actor=officer, team=team, action="mine.one")
    audit_record(actor=None, team=other_team, action="theirs.one")
    client.force_login(officer)
    page = client.get(reverse("audit:list"))
    assert page.status_code == 200
    assert b"mine.one" in page.content and b"theirs.one" not in page.content
    filtered = client.get(reverse("audit:list"), {"action": "nothing"})
    assert b"No events." in filtered.content
    only_mine = client.get(reverse("audit:list"), {"actor": "olivia"})
    assert b"<td>mine.one</td>" in only_mine.content


def test_the_action_filter_offers_each_visible_action_once_read_as_distinct_rows(
    client, officer, team, other_team
):
    for action in ("b.two", "a.one", "b.two", "a.one", "b.two"):
        audit_record(actor=officer, team=team, action=action)
    audit_record(actor=None, team=other_team, action="theirs.one")
    client.force_login(officer)
    with CaptureQueriesContext(connection) as ctx:
        page = client.get(reverse("audit:list"))
    visible = set(AuditEvent.objects.filter(team=team).values_list("action", flat=True))
    assert page.context["actions"] == sorted(visible) and "theirs.one" not in visible
    assert {"a.one", "b.two"} <= visible
    # one row per action, not one per event
    assert any(
        "SELECT DISTINCT" in q["sql"] and '"action"' in q["sql"] for q in ctx.captured_queries
    )


def test_each_audit_row_is_rendered_once_and_read_back_as_rendered(
    client, officer, analyst, team, other_team
):
    from django.core.cache import cache

    from anonweb.common.charts import builds

    audit_record(actor=officer, team=team, action="mine.one", details={"n": 1, "cols": ["a"]})
    audit_record(actor=None, team=other_team, action="theirs.one")
    client.force_login(officer)
    before = builds["audit-row"]
    first = client.get(reverse("audit:list"))
    built = builds["audit-row"] - before
    second = client.get(reverse("audit:list"))
    assert built >= 1 and builds["audit-row"] - before == built  # the second view built none

    def rows(page) -> bytes:  # the table (the page's nonce and token change per view)
        return page.content.split(b"<tbody>")[1].split(b"</tbody>")[0]

    assert rows(first) == rows(second) and b"<td>mine.one</td>" in rows(second)
    cache.clear()
    assert rows(client.get(reverse("audit:list"))) == rows(first)  # as a fresh render
    # kept rows never widen what a reader gets: the query decides which rows are listed
    assert b"theirs.one" not in second.content
    client.force_login(analyst)
    assert b"mine.one" not in client.get(reverse("audit:list")).content
