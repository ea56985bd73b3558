"""Signs that a file was read, without error, into something other than what it holds.

A semicolon file read with commas becomes one column named ``name;ssn;age``; numbers written
with a decimal comma (``3,5``, ``1.234,5``) become text. Neither fails to read, so the reader
says so instead: a :class:`ReadWarning` names the columns and the fix. Warnings are facts about
the file's shape (column names, separators), never its cells.

:func:`to_decimal_point` is the fix for the second: with the decimal mark set to a comma, a
value written ``1.234,5`` is read as ``1234.5``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

SEPARATOR_NAMES = {",": "comma", ";": "semicolon", "\t": "tab", "|": "pipe"}
_PLURAL = {",": "commas", ";": "semicolons", "\t": "tabs", "|": "pipes"}

# A number with a decimal comma and, optionally, dots between groups of three digits.
DECIMAL_COMMA = r"^[+-]?(?:[0-9]{1,3}(?:\.[0-9]{3})+|[0-9]+)(?:,[0-9]+)?$"


@dataclass(frozen=True)
class ReadWarning:
    """Something the reader noticed: ``code`` (``separator`` or ``decimal_comma``), a sentence
    for the privacy officer with the fix, and the columns concerned."""

    code: str
    message: str
    columns: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "columns": list(self.columns)}


def _separator_name(sep: str) -> str:
    return SEPARATOR_NAMES.get(sep, repr(sep))


def separator_warning(header: list[str], sep: str) -> ReadWarning | None:
    """A warning when the header, split at ``sep``, is one column that holds another common
    separator: the file is most likely separated by that one."""
    if len(header) != 1:
        return None
    name = header[0]
    found = [(name.count(c), c) for c in SEPARATOR_NAMES if c != sep and c in name]
    if not found:
        return None
    likely = max(found)[1]
    shown = name if len(name) <= 60 else name[:57] + "..."
    return ReadWarning(
        "separator",
        f"Read with the {_separator_name(sep)} as separator, the file has one column, named "
        f"{shown!r}, which holds {_PLURAL[likely]}: the file is most likely separated by "
        f"{_PLURAL[likely]}. Upload it again with the separator set to "
        f"{_separator_name(likely)} (or to Detect).",
        (name,),
    )


def decimal_comma_warning(columns: list[str]) -> ReadWarning:
    listed = ", ".join(repr(c) for c in columns)
    these = "Column" if len(columns) == 1 else "Columns"
    return ReadWarning(
        "decimal_comma",
        f"{these} {listed} hold numbers written with a comma (such as 3,5 or 1.234,5) and were "
        "read as text. If the comma is the decimal mark, upload the file again with the "
        "decimal mark set to comma to read them as numbers.",
        tuple(columns),
    )


def decimal_comma_numbers(values: pa.Array) -> bool:
    """Whether every value present is a number written with a decimal comma (or an integer)."""
    present = values.drop_null()
    if len(present) == 0:
        return True
    return bool(pc.all(pc.match_substring_regex(present, DECIMAL_COMMA)).as_py())


def to_decimal_point(values: pa.Array) -> pa.Array:
    """Values written with a decimal comma (and dots between thousands) in the usual notation:
    ``1.234,5`` -> ``1234.5``. Other values are left as they are."""
    matches = pc.match_substring_regex(values, DECIMAL_COMMA)
    if not pc.any(matches).as_py():
        return values
    plain = pc.replace_substring(pc.replace_substring(values, ".", ""), ",", ".")
    return pc.if_else(matches, plain, values)
