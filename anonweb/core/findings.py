"""What the release gate reports: findings a data steward reads before approving a release.

A finding has a code (one of :data:`CODES`), a severity (``block``: the release cannot be
approved without a written override; ``warn``: shown, nothing to override), a message written
for the steward, the columns concerned and the number of records concerned. ``facts`` holds
counts and parameters only, never a cell value, so a finding can go into the audit trail and
onto any page as it is.

The release policy (:mod:`anonweb.core.release.policy`) and the conflict check
(:mod:`anonweb.core.conflicts.gate`) both produce them; they sit here, before both wings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

BLOCK = "block"
WARN = "warn"
SEVERITIES = (BLOCK, WARN)

# code -> one sentence: what it means and what to do about it
CODES: dict[str, str] = {
    "identifier_released": (
        "A column tagged identifier goes out unchanged (most of its values are the source's): "
        "drop, tokenize or suppress it."
    ),
    "identifier_partly_masked": (
        "A column tagged identifier goes out only partly masked (kept digits of an SSN or phone "
        "number, an e-mail domain, a first name); it is counted as a quasi-identifier in the "
        "risk after."
    ),
    "free_text": (
        "A text column with mostly distinct or long values goes out verbatim; tag it "
        "(quasi-identifier, or 'keep as is' once reviewed) or transform it."
    ),
    "free_text_kept": (
        "A free-text column goes out verbatim because the officer tagged it 'keep as is'; "
        "shown to the steward, no override needed."
    ),
    "column_untagged": (
        "A released column was never tagged; tag it (an explicit 'keep as is' is enough)."
    ),
    "column_unchecked": (
        "A release written out of core goes out with a column outside its quasi-identifiers and "
        "sensitive columns whose values the policy did not read; drop it, or tag it 'keep as is' "
        "once reviewed."
    ),
    "conflicts_unchecked": (
        "A release written out of core was not checked for conflicts with the earlier live "
        "releases of its source: a part of the check does not run out of core (exact inference "
        "and differencing of published aggregates), or a release's lineage is not kept or "
        "cannot be read; make it in memory, or withdraw the earlier releases, for the check."
    ),
    "no_quasi_identifiers": (
        "No column is tagged or listed as a quasi-identifier, so the re-identification risk of "
        "a record-level release cannot be measured."
    ),
    "risk_k": ("After the plan, some records sit in classes smaller than the team's minimum k."),
    "risk_l": (
        "After the plan, some classes hold fewer distinct sensitive values than the team's "
        "minimum l (with l = 2: every member of the class shares the same sensitive value)."
    ),
    "risk_t": (
        "After the plan, some classes' sensitive distribution is further than the team's t "
        "from the whole table's."
    ),
    "risk_model": (
        "After the plan, some classes fail another privacy model of the team's policy (its "
        "figure is beyond the policy's threshold, e.g. a sensitive value's relative gain in a "
        "class beyond β)."
    ),
    "risk_global": (
        "After the plan, the global re-identification risk (sdcMicro's mean individual risk "
        "with the survey weights: expected re-identifications per record) is above the team's "
        "maximum."
    ),
    "risk_household": (
        "After the plan, some household's risk (the chance that at least one of its members "
        "is re-identified, sdcMicro's household risk) is above the team's maximum."
    ),
    "risk_prosecutor": (
        "After the plan, some records' prosecutor re-identification risk (1 / class size) is "
        "above the team's maximum."
    ),
    "conflict_intersection": (
        "Combined with another approved or pending release of the source (earlier or later), "
        "records' classes intersect to fewer than k people or fewer than l sensitive values "
        "(composition attack)."
    ),
    "conflict_linkage": (
        "The release can be joined row by row with another approved or pending release of the "
        "source, earlier or later (same row order, a column unique per record, shared tokens), "
        "and joined the records fall below the policy's k or l."
    ),
    "conflict_exact_inference": (
        "Aggregates of this and other live releases of the source together fix individual "
        "numeric values."
    ),
    "conflict_differencing": (
        "Aggregates of this and other live releases of the source together confine individual "
        "numeric values to within the p% rule."
    ),
    "conflict_incomplete": (
        "Part of the conflict check could not be decided within its budget; treat it as a "
        "possible conflict."
    ),
    "synthetic_below_baseline": (
        "A DP synthetic table whose two-way marginals are no closer to the source's than those "
        "of the independent baseline at the same ε (each column drawn on its own): the model's "
        "associations are noise."
    ),
    "dp_exact_figures": (
        "A differentially private release would also publish exact figures of the source "
        "(its row count, its risk, a utility report measured on it)."
    ),
    "attack_excess": (
        "An attack on the release (linkage, inference or singling out) succeeds more often "
        "than on people not in it by more than the policy allows."
    ),
    "attack_membership": (
        "The distance to the closest released record tells people in the release from people "
        "not in it better than the policy allows."
    ),
    "attack_no_control": (
        "The policy caps the attacks' excess over chance, but the release was attacked "
        "without a control held out, so the cap cannot be checked."
    ),
}


@dataclass(frozen=True)
class Finding:
    """One thing the gate found about a release."""

    code: str
    severity: str
    message: str
    columns: tuple[str, ...] = ()
    records: int = 0
    facts: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.code not in CODES:
            raise ValueError(f"unknown finding code {self.code!r}")
        if self.severity not in SEVERITIES:
            raise ValueError(f"severity must be one of {SEVERITIES}, not {self.severity!r}")
        object.__setattr__(self, "columns", tuple(str(c) for c in self.columns))
        object.__setattr__(self, "records", int(self.records))
        object.__setattr__(self, "facts", dict(self.facts))

    @property
    def blocks(self) -> bool:
        return self.severity == BLOCK

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "message": self.message,
            "columns": list(self.columns),
            "records": self.records,
            "facts": dict(self.facts),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Finding:
        return cls(
            code=data["code"],
            severity=data["severity"],
            message=data.get("message", ""),
            columns=tuple(data.get("columns") or ()),
            records=int(data.get("records") or 0),
            facts=dict(data.get("facts") or {}),
        )


def blocking(findings: Iterable[Finding]) -> list[Finding]:
    """The findings that stop an approval."""
    return [f for f in findings if f.blocks]
