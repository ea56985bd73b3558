"""A first guess at each column's role from its name, made when an upload is read; the privacy
officer confirms or changes it."""

from __future__ import annotations

import re

from anonweb.datasets.models import ColumnRole

# Column names that almost always hold direct identifiers; only a first guess for the officer.
_IDENTIFIER_NAME = re.compile(
    r"(^|[_\s-])(name|full.?name|first.?name|last.?name|surname|ssn|social.?security|e-?mail|"
    r"phone|telephone|mobile|address|street|passport|licen[cs]e|iban|account|patient.?id|mrn)($|[_\s-])",
    re.IGNORECASE,
)


def guess_tags(columns: list[str]) -> dict[str, str]:
    """Columns named like direct identifiers are tagged so; the others stay untagged until the
    officer decides (the release gate blocks untagged columns)."""
    return {c: ColumnRole.IDENTIFIER for c in columns if _IDENTIFIER_NAME.search(c)}
