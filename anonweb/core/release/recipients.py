"""Who receives a release: the names a launch gives, ``"USERNAME"`` for an analyst of the team
and ``"group:NAME"`` for a group of the team. No names: every analyst of the team receives it.

Only the form is checked here (the web checks the names against the team, the command line has
no team); the web, the API and ``anonymize`` all read the names through :func:`parse_recipients`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from anonweb.core.errors import ParameterError

GROUP_PREFIX = "group:"
MAX_RECIPIENTS = 200
# Django's username characters; a group name may also hold spaces.
_USERNAME = re.compile(r"^[\w.@+-]{1,150}$")
_GROUP = re.compile(r"^[\w.@+\- ]{1,120}$")


class RecipientError(ParameterError):
    """Recipients that do not name analysts or groups of the team (the API's 400)."""


def split_recipients(text: str) -> list[str]:
    """Names typed in one field (the launch page, ``--recipients``): separated by commas or
    line breaks."""
    return [part for part in re.split(r"[,\r\n]+", text or "") if part.strip()]


def parse_recipients(names: object) -> tuple[str, ...]:
    """The recipients as a launch names them, each once, in the order given; a ParameterError
    listing every malformed name. ``None`` or an empty list: every analyst of the team."""
    if names is None:
        return ()
    if isinstance(names, str) or not isinstance(names, Sequence):
        raise RecipientError(
            'recipients: a list of names, e.g. ["ana", "group:qa"] (analysts or groups of the team)'
        )
    out: list[str] = []
    problems: list[str] = []
    for raw in names:
        if not isinstance(raw, str):
            problems.append(f"{raw!r} is not a name")
            continue
        name = raw.strip()
        if name.lower().startswith(GROUP_PREFIX):
            group = name[len(GROUP_PREFIX) :].strip()
            if not _GROUP.match(group):
                problems.append(f"{name!r} does not name a group (group:NAME)")
                continue
            name = GROUP_PREFIX + group
        elif not _USERNAME.match(name):
            problems.append(f"{name!r} is not a username (or group:NAME for a group)")
            continue
        if name not in out:
            out.append(name)
    if problems:
        raise RecipientError("recipients: " + "; ".join(problems))
    if len(out) > MAX_RECIPIENTS:
        raise RecipientError(
            f"recipients: {len(out)} names, more than {MAX_RECIPIENTS}; name a group instead"
        )
    return tuple(out)


def group_name(recipient: str) -> str | None:
    """The group a parsed recipient names, or None for a username."""
    return recipient[len(GROUP_PREFIX) :] if recipient.startswith(GROUP_PREFIX) else None
