"""What of a result quotes the source, and the result without it.

Raw values (whole source records, cell values, labels read from the source) are for the team's
privacy officers. Everyone else reads the *public part* of a result, made here:

* a risk profile or any job result (:func:`public_result`): each list of records or values
  becomes its count, a class's quasi-identifier values become their column names;
* a release's utility (:func:`public_utility`): a source category that the release does not
  itself publish loses its label (the counts stay), so a token column's frequencies cannot be
  matched back to the names they replace;
* a failure (:class:`Failure`): the message given to everyone is built from facts (the kind of
  failure and the columns concerned), never from the text of an exception, which may quote
  cells; that text is the officer's ``detail``.

A purge applies the same functions to what it keeps: what non-officers may read is what
survives the source.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from anonweb.core.errors import CoreError, DataError, HierarchyError, ParameterError, PlanError

# Lists under these names hold records or values of the source.
VALUE_LISTS = frozenset(
    {"disclosing_classes", "examples", "top_values", "sample", "values", "highest_risk_records"}
)
# Mappings under these names are keyed by levels or columns and hold source values.
VALUE_MAPS = frozenset({"level_labels", "level_names"})
# A released category read "(other)" stands for the categories past the top ones.
OTHER = "(other)"
WITHHELD = "source value {n} (shown to privacy officers)"


def public_result(value: Any) -> Any:
    """``value`` (a job result, a risk profile, a what-if answer) without the source's values:
    each list named in ``VALUE_LISTS`` becomes ``<name>_count``, a mapping named in
    ``VALUE_MAPS`` is left out, and a ``quasi_identifiers`` mapping (a class's values) becomes
    its keys. The input is not modified."""
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in VALUE_LISTS and isinstance(item, list):
                out[f"{key}_count"] = len(item)
            elif key in VALUE_MAPS:
                continue
            elif key == "quasi_identifiers" and isinstance(item, Mapping):
                out[key] = sorted(item)
            else:
                out[key] = public_result(item)
        return out
    if isinstance(value, list):
        return [public_result(item) for item in value]
    return value


def public_utility(utility: Mapping[str, Any]) -> dict[str, Any]:
    """A release's utility report without the source's own labels: in each column's
    ``original`` distribution of categories, a label that the ``released`` side does not show
    becomes ``source value <n>`` (its count and share stay, in their order). Histograms (bin
    edges and counts) and the summary figures stay. The input is not modified."""
    out = dict(utility)
    columns = []
    for column in utility.get("columns") or []:
        column = dict(column)
        original = column.get("original")
        released = column.get("released") or {}
        if isinstance(original, Mapping) and original.get("kind") == "categories":
            published = set(released.get("labels") or []) | {OTHER}
            labels = []
            for n, label in enumerate(original.get("labels") or [], start=1):
                labels.append(label if label in published else WITHHELD.format(n=n))
            column["original"] = {**original, "labels": labels}
        columns.append(column)
    out["columns"] = columns
    return out


# The kind of each failure of the core, in words a privacy officer reads without the message.
FAILURE_KINDS: dict[str, str] = {
    "plan": "The plan was refused",
    "hierarchy": "A generalization hierarchy does not fit its column",
    "parameter": "A parameter is out of range or does not fit the data",
    "data": "The table does not hold what the job needs",
    "unreadable": "The uploaded file could not be read as a table",
    "input": "The input was refused",
}


@dataclass(frozen=True)
class Failure:
    """Why a job failed. ``summary`` is for everyone who may see the job: it is built from
    ``kind`` (a fixed sentence) and ``columns`` (names from the table's schema), never from the
    text of an exception. ``detail`` is the message as the failing code wrote it, which may quote
    the source: privacy officers only."""

    kind: str
    columns: tuple[str, ...] = ()
    detail: str = ""
    _fixed: str = field(default="", repr=False)

    @classmethod
    def stated(cls, kind: str, sentence: str) -> Failure:
        """A failure the application itself describes (a lost worker, a queue that is down, an
        internal error's reference): ``sentence`` is its own text, with no data in it."""
        return cls(kind=kind, detail=sentence, _fixed=sentence)

    @property
    def summary(self) -> str:
        if self._fixed:
            return self._fixed
        sentence = FAILURE_KINDS.get(self.kind, FAILURE_KINDS["input"])
        if self.columns:
            names = ", ".join(self.columns)
            sentence += f" (column{'s' if len(self.columns) > 1 else ''} concerned: {names})"
        return f"{sentence}. The message in full may quote the data: the team's privacy officers see it."

    def facts(self) -> dict[str, Any]:
        """What an audit event records of it: the kind and the columns."""
        return {"failure": self.kind, "columns": list(self.columns)}


def failure_kind(exc: CoreError) -> str:
    if isinstance(exc, PlanError):
        return "plan"
    if isinstance(exc, HierarchyError):
        return "hierarchy"
    if isinstance(exc, ParameterError):
        return "parameter"
    if isinstance(exc, DataError):
        return "data"
    return "input"


def failure_of(exc: CoreError, *, columns: Iterable[str], kind: str | None = None) -> Failure:
    """The failure ``exc`` describes, for a table with ``columns``: its kind (``kind``, else
    from its class), the columns it names (a column counts when its name appears in the message
    as a word) and the message as its detail."""
    message = str(exc)
    named = []
    for column in columns:
        name = str(column)
        if not name:
            continue
        pattern = rf"(?<![\w]){re.escape(name)}(?![\w])"
        if re.search(pattern, message):
            named.append(name)
    return Failure(kind=kind or failure_kind(exc), columns=tuple(named), detail=message)
