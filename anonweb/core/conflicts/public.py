"""The public and private entries of a conflict finding: what the release pages and the gate
show everyone who may see the release (counts, columns, releases, an explanation without
figures), and what only privacy officers read (the records, the values an attacker would infer,
the explanation with its figures). :mod:`anonweb.core.release.report` lists these splits with
the others."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

# A finding's keys that are not facts: what it is, and what only officers read (the records and
# the values an attacker would infer, and their intervals).
_NOT_FACTS = frozenset(
    {"type", "records", "explanation", "releases", "columns", "values", "intervals"}
)
# What a privacy officer reads of a finding beyond its public entry.
PRIVATE_FINDING_KEYS = ("explanation", "records", "values", "intervals")
_FIGURE = r"-?[\d,]*\.?\d+(?:e[+-]?\d+)?"


def without_figures(text: str) -> str:
    """The explanation without the figures from which a value could be worked out (the
    published group figures, the arithmetic, the column's bounds): for everyone but officers."""
    text = re.sub(rf" \({_FIGURE}\)", "", text)
    text = re.sub(rf"bounds, {_FIGURE} to {_FIGURE}\)", "bounds)", text)
    term = rf"{_FIGURE}(?: × {_FIGURE})?"
    text = re.sub(rf": {term} − {term}$", "", text)
    text = re.sub(rf"; {term} − {term} is that person's", "; the difference is that person's", text)
    return text


def public_finding(
    private: Mapping[str, Any],
    *,
    labels: Mapping[str, int | None],
    l_by_release: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The entry of a conflict finding that the release pages and the gate show (counts,
    columns, releases and an explanation without figures), from the core's finding as a dict
    (``private``: what only officers read). ``labels`` maps each release label it involves to
    its id; ``l_by_release`` the distinct l of each release alone, per column."""
    facts = {key: value for key, value in private.items() if key not in _NOT_FACTS}
    if l_by_release:
        facts["l_by_release"] = dict(l_by_release)
    return {
        "type": private["type"],
        "records": len(private.get("records") or ()),
        "columns": list(private.get("columns") or ()),
        "releases": list(private.get("releases") or ()),
        "labels": dict(labels),
        "explanation": without_figures(str(private.get("explanation", ""))),
        "facts": facts,
    }


def undecided_finding(text: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The public and private entries of a combination the check could not decide within its
    work budget (``text`` says which)."""
    private = {"type": "undecided", "explanation": text, "records": []}
    public = {
        "type": "undecided",
        "records": 0,
        "columns": [],
        "releases": [],
        "labels": {},
        "explanation": without_figures(text),
        "facts": {},
    }
    return public, private


def private_finding_detail(private: Mapping[str, Any]) -> dict[str, Any]:
    """What a privacy officer reads of a finding beyond its public entry: the explanation with
    its figures, the records and the values an attacker would infer."""
    defaults: dict[str, Any] = {"explanation": "", "records": [], "values": {}, "intervals": {}}
    return {key: private.get(key, defaults[key]) for key in PRIVATE_FINDING_KEYS}
