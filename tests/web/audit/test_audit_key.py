"""The audit chain is keyed and anchored: someone who can rewrite the table, but holds neither
the key (kept outside the database) nor the anchor file, cannot make a rewrite verify, however
consistently they recompute the hashes and the head."""

from __future__ import annotations

import hashlib
import json
import stat

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from anonweb.audit.models import AuditEvent, AuditHead
from anonweb.audit.selectors import audit_verify_chain
from anonweb.audit.services import GENESIS, audit_record, canonical_json, canonical_payload

pytestmark = pytest.mark.django_db


@pytest.fixture
def anchored(settings, django_capture_on_commit_callbacks):
    """Five committed events (their heads anchored), with the anchor required."""
    settings.ANONWEB_AUDIT_ANCHOR_MAY_BE_ABSENT = False
    with django_capture_on_commit_callbacks(execute=True):
        for i in range(5):
            audit_record(actor=None, action=f"dataset.tagged.{i}", details={"columns": i})
    return list(AuditEvent.objects.order_by("seq"))


def _rewrite_without_the_key(events, *, scheme=None):
    """What someone with write access to the table can do: recompute every hash with SHA-256
    (as an unkeyed chain would be hashed), relink the chain and move the head."""
    prev = GENESIS
    for event in events:
        if scheme is not None:
            event.scheme = scheme
        event.prev_hash = prev
        event.hash = hashlib.sha256(canonical_payload(event)).hexdigest()
        AuditEvent.objects.filter(pk=event.pk).update(
            scheme=event.scheme,
            details_text=event.details_text,
            prev_hash=event.prev_hash,
            hash=event.hash,
        )
        prev = event.hash
    AuditHead.objects.filter(id=1).update(last_hash=prev, count=len(events))


def _verify_fails(match: str) -> None:
    with pytest.raises(CommandError, match="audit chain broken"):
        call_command("audit_verify")
    assert match in audit_verify_chain().reason


def test_an_untouched_chain_verifies_against_its_key_and_anchor(anchored, capsys):
    call_command("audit_verify")
    assert "5 events verified" in capsys.readouterr().out


def test_an_edit_with_every_later_hash_and_the_head_recomputed_is_caught(anchored):
    anchored[2].details_text = canonical_json({"columns": 99})
    _rewrite_without_the_key(anchored)
    _verify_fails("does not match its hash")


def test_a_rewrite_claiming_the_unkeyed_scheme_is_caught(anchored):
    anchored[2].details_text = canonical_json({"columns": 99})
    _rewrite_without_the_key(anchored, scheme=2)
    _verify_fails("anchored for sequence 5")


def test_deleting_an_event_and_renumbering_the_rest_is_caught(anchored):
    AuditEvent.objects.filter(pk=anchored[1].pk).delete()
    rest = [anchored[0], *anchored[2:]]
    for seq, event in enumerate(rest, start=1):
        event.seq = seq
        AuditEvent.objects.filter(pk=event.pk).update(seq=seq)
    _rewrite_without_the_key(rest)
    _verify_fails("anchored")


def test_cutting_the_last_events_and_moving_the_head_back_is_caught(anchored):
    AuditEvent.objects.filter(seq__gt=3).delete()
    AuditHead.objects.filter(id=1).update(last_hash=anchored[2].hash, count=3)
    _verify_fails("sequence 5 was anchored")


def test_an_anchor_line_not_signed_with_the_key_is_reported(anchored, settings):
    line = {"seq": 9, "hash": "0" * 64, "at": "2026-01-01T00:00:00+00:00", "mac": "f" * 64}
    with open(settings.ANONWEB_AUDIT_ANCHOR, "a") as anchor:
        anchor.write(json.dumps(line) + "\n")
    _verify_fails("not signed with the audit key")


def test_a_removed_anchor_is_reported(anchored, settings):
    settings.ANONWEB_AUDIT_ANCHOR.unlink()
    _verify_fails("no signed head is anchored")


def test_an_event_rolled_back_is_never_anchored(anchored, settings):
    before = settings.ANONWEB_AUDIT_ANCHOR.read_text()
    with pytest.raises(RuntimeError):
        from django.db import transaction

        with transaction.atomic():
            audit_record(actor=None, action="dataset.tagged.rolled_back")
            raise RuntimeError("the change failed")
    assert settings.ANONWEB_AUDIT_ANCHOR.read_text() == before
    assert audit_verify_chain().ok


def test_the_key_is_made_once_outside_the_database(settings, tmp_path):
    from anonweb.audit.keys import audit_key

    settings.ANONWEB_AUDIT_KEY = ""
    settings.ANONWEB_AUDIT_KEY_FILE = tmp_path / "audit_key"
    key = audit_key()
    assert len(key) >= 32 and audit_key() == key
    assert stat.S_IMODE(settings.ANONWEB_AUDIT_KEY_FILE.stat().st_mode) == 0o600
    event = audit_record(actor=None, action="dataset.tagged")
    stored = AuditEvent.objects.filter(pk=event.pk).values()[0]
    assert not any(key.decode() in str(value) for value in stored.values())
    # another key does not verify the events this one keyed
    settings.ANONWEB_AUDIT_KEY = "another-key-of-at-least-thirty-two-characters"
    assert "does not match its hash" in audit_verify_chain().reason
