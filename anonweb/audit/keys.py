"""The audit trail's key and its anchor, both kept outside the database.

The key makes each event's hash an HMAC: someone who can write the table but not read the key
cannot recompute the chain after editing, removing or inserting an event. The anchor is an
append-only file where the head (sequence number and hash) is written, signed with the key,
after every committed event: cutting the last events and moving the head back leaves the table
behind its anchor, which ``audit_verify`` reports.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import logging
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

log = logging.getLogger(__name__)

_ANCHOR_CONTEXT = b"anonweb audit anchor\x00"


def audit_key() -> bytes:
    """ANONWEB_AUDIT_KEY, else the key file (ANONWEB_AUDIT_KEY_FILE), made once with a random
    key when it does not exist yet (readable by its owner only)."""
    configured = settings.ANONWEB_AUDIT_KEY
    if configured:
        return str(configured).encode()
    path = Path(settings.ANONWEB_AUDIT_KEY_FILE)
    try:
        text = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        text = _make_key_file(path)
    if len(text) < 32:
        raise ImproperlyConfigured(
            f"the audit key file {path} holds fewer than 32 characters: put a random key in it "
            "or set ANONWEB_AUDIT_KEY"
        )
    return text.encode()


def _make_key_file(path: Path) -> str:
    """Write a random key to ``path`` whole before it appears (a hard link of a finished
    file), so a process reading it meanwhile never sees it empty; if another process made it
    first, its key wins."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = secrets.token_urlsafe(48)
    draft = path.with_name(f".{path.name}.{secrets.token_hex(8)}")
    fd = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as out:
            out.write(text + "\n")
        try:
            os.link(draft, path)
        except FileExistsError:
            return path.read_text(encoding="ascii").strip()
    finally:
        draft.unlink(missing_ok=True)
    return text


def keyed_hash(payload: bytes) -> str:
    return hmac.new(audit_key(), payload, hashlib.sha256).hexdigest()


def _anchor_mac(seq: int, digest: str, at: str) -> str:
    message = _ANCHOR_CONTEXT + f"{seq}:{digest}:{at}".encode("ascii")
    return hmac.new(audit_key(), message, hashlib.sha256).hexdigest()


def anchor_path() -> Path:
    return Path(settings.ANONWEB_AUDIT_ANCHOR)


def anchor_write(*, seq: int, digest: str) -> None:
    """Append the signed head to the anchor (opened for appending only; one write per line,
    so lines of concurrent processes never interleave). Called once the event committed: a
    failure is logged, since the event stands, and the next event anchors the chain again."""
    at = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    line = json.dumps(
        {"seq": seq, "hash": digest, "at": at, "mac": _anchor_mac(seq, digest, at)},
        sort_keys=True,
        separators=(",", ":"),
    )
    path = anchor_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (line + "\n").encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        log.error("audit event %s: its head could not be anchored in %s", seq, path, exc_info=True)


@dataclass(frozen=True)
class Anchor:
    seq: int
    hash: str
    at: str


def anchors_read() -> tuple[list[Anchor], list[str]]:
    """The anchored heads whose signature holds, and a sentence for each line that does not
    (forged or damaged). No file: nothing anchored."""
    path = anchor_path()
    good: list[Anchor] = []
    bad: list[str] = []
    try:
        lines = path.read_text(encoding="ascii", errors="replace").splitlines()
    except FileNotFoundError:
        return good, bad
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            seq, digest, at, mac = entry["seq"], entry["hash"], entry["at"], entry["mac"]
            valid = isinstance(seq, int) and hmac.compare_digest(
                str(mac), _anchor_mac(seq, str(digest), str(at))
            )
        except (ValueError, KeyError, TypeError):
            valid = False
        if not valid:
            bad.append(
                f"line {number} of the anchor {path} is not signed with the audit key "
                "(forged or damaged)"
            )
            continue
        good.append(Anchor(seq=seq, hash=str(digest), at=str(at)))
    return good, bad
