"""The audit chain verifies whatever JSON it stores, on SQLite and PostgreSQL, survives the
deletion of users and teams, and names every tampered event (an edit, a removal or a reordering
of any field), not only the first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import timedelta

import pytest
from django.db import connection, transaction
from hypothesis import HealthCheck, given, note
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from anonweb.audit.models import AuditEvent, AuditHead
from anonweb.audit.selectors import audit_verify_chain
from anonweb.audit.services import FORBIDDEN_KEY_PARTS, audit_record
from tests.conftest import REQUIRE_SERVICES, ROOT, unavailable
from tests.web.factories import Role, TeamFactory, UserFactory, member

pytestmark = pytest.mark.django_db
TABLE = AuditEvent._meta.db_table

# Floats of every magnitude, with the ones jsonb used to rewrite (1e16 and up, 1e308) and the
# smallest subnormal spelled out so every run meets them.
FLOATS = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from(
    [1e16, 1e20, 1e23, -1e300, 1.7976931348623157e308, 5e-324, 2.2250738585072014e-308, -0.0, 0.1]
)
KEYS = st.text(max_size=12).filter(lambda k: not any(p in k.lower() for p in FORBIDDEN_KEY_PARTS))
LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | FLOATS
    | st.text(max_size=30)  # any code point: NUL, unpaired surrogates, emoji, RTL marks
)
JSON = st.recursive(
    LEAVES,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
    max_leaves=25,
)
DETAILS = st.dictionaries(KEYS, JSON, max_size=5)
NAMES = st.text(min_size=0, max_size=200)

SETTINGS = hsettings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class _Rollback(Exception):
    pass


def _in_rollback(fn):
    """Run ``fn`` in a transaction that is always rolled back: each example starts afresh."""
    try:
        with transaction.atomic():
            AuditEvent.objects.all().delete()  # bulk SQL: the append-only guard is per instance
            AuditHead.objects.all().delete()
            fn()
            raise _Rollback
    except _Rollback:
        pass


class _Named:
    """Something with a name and no row, as an actor or team of any spelling would be."""

    def __init__(self, name, pk=None):
        self.username = self.name = name
        self.pk = pk

    def __str__(self):
        return self.name


@SETTINGS
@given(events=st.lists(st.tuples(DETAILS, NAMES, NAMES, NAMES), min_size=1, max_size=6))
def test_any_json_details_verify_after_the_database_round_trip(events):
    def run():
        written = [
            audit_record(
                actor=_Named(actor) if actor else None,
                team=_Named(team, pk=None) if team else None,
                action=action or "test.event",
                details=details,
            )
            for details, actor, team, action in events
        ]
        report = audit_verify_chain()
        note(report.reason)
        assert report.ok and report.checked == len(events)
        for event, (details, *_rest) in zip(written, events):
            stored = AuditEvent.objects.get(pk=event.pk)
            assert stored.details == json.loads(json.dumps(details)), "details come back as given"
            assert stored.hash == event.hash

    _in_rollback(run)


# --- tampering -------------------------------------------------------------------------------

EDITS = {
    # field: (an edit, a deletion) as SQL expressions on the stored value
    "seq": ("seq + 1000", None),
    "scheme": ("1", None),
    "created_at": ("created_at + interval '1 second'", None),
    "actor_id": ("COALESCE(actor_id, 0) + 7", "NULL"),
    "actor_name": ("'mallory'", "''"),
    "team_id": ("COALESCE(team_id, 0) + 7", "NULL"),
    "team_name": ("'Other team'", "''"),
    "action": ("'release.approved'", "''"),
    "target_type": ("'dataset'", "''"),
    "target_id": ("'999'", "''"),
    "details_text": ("%(details_edit)s", "'{}'"),
    "prev_hash": ("%(hex)s", "''"),
    "hash": ("%(hex)s", None),
}


def _sql_edit(expr: str) -> str:
    if connection.vendor == "sqlite":
        return expr.replace(
            "created_at + interval '1 second'",
            "strftime('%%Y-%%m-%%d %%H:%%M:%%f', created_at, '+1 second')",
        )
    return expr


def _details_edit(text: str) -> str:
    """A change a forger might make: a value altered, or the same keys in another order."""
    value = json.loads(text)
    if len(value) >= 2:
        return json.dumps(dict(reversed(list(value.items()))), separators=(",", ":"))
    value["rows"] = (value.get("rows") or 0) + 1 if isinstance(value.get("rows"), int) else 1
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


TAMPER = st.one_of(
    st.tuples(st.just("edit"), st.sampled_from(sorted(EDITS)), st.booleans()),
    st.tuples(st.just("delete_event"), st.none(), st.none()),
    st.tuples(st.just("swap_seq"), st.none(), st.integers(min_value=0, max_value=50)),
)


def _rows():
    return {
        row["id"]: row
        for row in AuditEvent.objects.values(
            "id",
            "seq",
            "scheme",
            "created_at",
            "actor_id",
            "actor_name",
            "team_id",
            "team_name",
            "action",
            "target_type",
            "target_id",
            "details_text",
            "prev_hash",
            "hash",
        )
    }


def _apply(op, event_id, ids, counter):
    kind, field, arg = op
    with connection.cursor() as cursor:
        if kind == "delete_event":
            cursor.execute(f"DELETE FROM {TABLE} WHERE id = %s", [event_id])
        elif kind == "swap_seq":
            others = [i for i in ids if i != event_id]
            if not others:
                return
            other = others[arg % len(others)]
            cursor.execute(
                f"SELECT seq FROM {TABLE} WHERE id IN (%s, %s) ORDER BY id",
                sorted([event_id, other]),
            )
            a, b = (r[0] for r in cursor.fetchall())
            low, high = sorted([event_id, other])
            cursor.execute(f"UPDATE {TABLE} SET seq = -1 WHERE id = %s", [low])
            cursor.execute(f"UPDATE {TABLE} SET seq = %s WHERE id = %s", [a, high])
            cursor.execute(f"UPDATE {TABLE} SET seq = %s WHERE id = %s", [b, low])
        else:
            edit, deletion = EDITS[field]
            expr = deletion if (arg and deletion is not None) else edit
            params = []
            if expr == "%(details_edit)s":
                cursor.execute(f"SELECT details_text FROM {TABLE} WHERE id = %s", [event_id])
                params.append(_details_edit(cursor.fetchone()[0]))
                expr = "%s"
            elif expr == "%(hex)s":
                params.append(f"{counter:064x}")
                expr = "%s"
            cursor.execute(
                f"UPDATE {TABLE} SET {field} = {_sql_edit(expr)} WHERE id = %s", [*params, event_id]
            )


@SETTINGS
@given(
    details=st.lists(DETAILS, min_size=2, max_size=7),
    tampering=st.lists(
        st.tuples(TAMPER, st.integers(min_value=0, max_value=100)), min_size=1, max_size=3
    ),
)
def test_every_tampered_event_is_named(details, tampering):
    def run():
        team = TeamFactory()
        user = UserFactory()
        for i, d in enumerate(details):
            audit_record(actor=user if i % 2 else None, team=team, action=f"test.e{i}", details=d)
        assert audit_verify_chain().ok
        before = _rows()
        walk_before = sorted(before, key=lambda i: before[i]["seq"])
        for n, (op, pick) in enumerate(tampering):
            ids = sorted(_rows())
            if ids:
                _apply(op, ids[pick % len(ids)], ids, counter=n + 1)
        after = _rows()
        walk_after = sorted(after, key=lambda i: after[i]["seq"])
        changed = {i for i in after if after[i] != before[i]}
        deleted = set(before) - set(after)
        note(f"changed {sorted(changed)} deleted {sorted(deleted)}")

        report = audit_verify_chain()
        note(report.reason)
        named = set(report.broken_ids)
        if not changed and not deleted:
            assert report.ok
            return
        assert not report.ok
        # Every edited, reordered or rewritten event is named ...
        assert changed <= named
        # ... and the event that followed a removed one (or the chain's end, for the last).
        for gone in deleted:
            later = [i for i in walk_after if after[i]["seq"] > before[gone]["seq"]]
            if later:
                assert later[0] in named
            else:
                assert any(p.event_id is None for p in report.problems)

        # Nothing else is blamed: only tampered events and the ones right after them.
        def successors(walk, of):
            return {walk[k + 1] for k, i in enumerate(walk[:-1]) if i in of}

        allowed = (
            changed | successors(walk_before, changed | deleted) | successors(walk_after, changed)
        )
        assert named <= allowed

    _in_rollback(run)


def test_the_floats_that_jsonb_rewrote_verify(team):
    # The case that broke the first chain: Python hashed 1e+20, jsonb gave 100000000000000000000.
    audit_record(actor=None, team=team, action="budget", details={"epsilon": 1e20, "ldp": 1e308})
    audit_record(actor=None, team=team, action="later", details={})
    report = audit_verify_chain()
    assert report.ok, report.reason
    assert AuditEvent.objects.get(action="budget").details == {"epsilon": 1e20, "ldp": 1e308}


def test_a_later_edit_is_still_reported_after_an_earlier_break(team):
    events = [
        audit_record(actor=None, team=team, action=f"e{i}", details={"i": i}) for i in range(5)
    ]
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {TABLE} SET action = 'forged' WHERE id = %s", [events[1].pk])
        cursor.execute(f"UPDATE {TABLE} SET actor_name = 'mallory' WHERE id = %s", [events[3].pk])
    report = audit_verify_chain()
    assert report.broken_ids == [events[1].pk, events[3].pk]


def test_deleting_a_user_or_a_team_keeps_the_chain_verifiable():
    team = TeamFactory(name="Doomed team")
    user = member(team, Role.PRIVACY_OFFICER, username="leaver")
    audit_record(actor=user, team=team, action="before", details={"x": 1})
    user_id, team_id = user.pk, team.pk
    user.delete()
    team.delete()
    audit_record(actor=None, action="after")
    report = audit_verify_chain()
    assert report.ok, report.reason
    kept = AuditEvent.objects.get(action="before")
    assert (kept.actor_id, kept.actor_name) == (user_id, "leaver")
    assert (kept.team_id, kept.team_name) == (team_id, "Doomed team")


def test_the_command_lists_every_broken_event(team, capsys):
    from django.core.management import call_command
    from django.core.management.base import CommandError

    events = [audit_record(actor=None, team=team, action=f"e{i}") for i in range(4)]
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {TABLE} SET action = 'x' WHERE id IN (%s, %s)", [events[0].pk, events[2].pk]
        )
    with pytest.raises(CommandError, match="2 place"):
        call_command("audit_verify")
    err = capsys.readouterr().err
    assert f"event #{events[0].pk}" in err and f"event #{events[2].pk}" in err


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_events_of_the_first_scheme_still_verify_after_the_migration():
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    executor.migrate([("audit", "0001_initial")])
    old = executor.loader.project_state([("audit", "0001_initial")]).apps
    OldEvent, OldHead = old.get_model("audit", "AuditEvent"), old.get_model("audit", "AuditHead")
    try:
        import datetime as dt
        import hashlib

        prev = "0" * 64
        for seq, details in enumerate([{"rows": 6, "name": "é"}, {"k": [1, 2.5, None]}], start=1):
            event = OldEvent.objects.create(
                seq=seq,
                created_at=dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + timedelta(seconds=seq),
                actor_name="system",
                action="old.event",
                details=details,
                prev_hash=prev,
                hash=f"{seq:064x}",
            )
            event.refresh_from_db()  # the first scheme hashed the value as read back
            payload = {
                "seq": seq,
                "created_at": event.created_at.astimezone(dt.UTC).isoformat(
                    timespec="microseconds"
                ),
                "actor_id": None,
                "actor_name": "system",
                "team_id": None,
                "action": "old.event",
                "target_type": "",
                "target_id": "",
                "details": event.details,
                "prev_hash": prev,
            }
            digest = hashlib.sha256(
                json.dumps(
                    payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False
                ).encode()
            ).hexdigest()
            OldEvent.objects.filter(pk=event.pk).update(hash=digest)
            prev = digest
        OldHead.objects.create(id=1, last_hash=prev, count=2)
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
    audit_record(actor=None, action="new.event", details={"epsilon": 1e20})
    report = audit_verify_chain()
    assert report.ok and report.checked == 3, report.reason
    assert list(AuditEvent.objects.order_by("seq").values_list("scheme", flat=True)) == [1, 1, 3]


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_properties_hold_on_the_other_database(tmp_path):
    """The suite runs on one database; this runs the properties above on the other one."""
    env = dict(os.environ)
    if connection.vendor == "postgresql":
        env.pop("DATABASE_URL", None)  # SQLite, always at hand
    else:
        url = os.environ.get("ANONWEB_TEST_POSTGRES_URL", "")
        if not url:
            unavailable(
                "set ANONWEB_TEST_POSTGRES_URL (or run the suite on PostgreSQL) to check the "
                "audit chain on PostgreSQL too",
                required=REQUIRE_SERVICES,
            )
        env["DATABASE_URL"] = url
    env["ANONWEB_VAR_DIR"] = str(tmp_path / "var")
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            f"{__file__}::test_any_json_details_verify_after_the_database_round_trip",
            f"{__file__}::test_every_tampered_event_is_named",
            f"{__file__}::test_the_floats_that_jsonb_rewrote_verify",
            f"{__file__}::test_deleting_a_user_or_a_team_keeps_the_chain_verifiable",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "4 passed" in result.stdout
