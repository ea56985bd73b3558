"""The release path every interface calls: run the plan, then apply the protections that travel
with the release (not with one runner):

* **row shuffling**: a row-per-source-row output is published in a random order drawn from the
  caller's ``rng``, so two releases cannot be joined by row position; the mapping back to source
  rows (``source_rows``) is returned for private keeping (conflict checks), never published.
  ``keep_order=True`` keeps source order and says so in the published report;
* **a fresh key per release**: :func:`fresh_secrets` draws one key per secret a plan names, from
  the caller's source of random bytes (``secrets.token_bytes``), for secrets not supplied;
* **report scrubbing**: the internal report loses the raw values of the source's disclosing
  classes, and the published report (:func:`~anonweb.core.release.report.published_report`)
  keeps only what the released data shows and the plan's public parameters;
* **CSV neutralisation**: :meth:`Published.csv_bytes` and :meth:`Published.export_bytes` write
  through the export formats' writers (spreadsheet formulas neutralised).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from anonweb.core.io.export import DEFAULT_FORMAT, export_format
from anonweb.core.release.plan import get_step, plan_to_dict
from anonweb.core.release.report import published_report
from anonweb.core.release.run import apply_plan
from anonweb.core.release.steps import Plan


@dataclass(frozen=True)
class Published:
    """A release ready to write: ``frame`` as published; ``aligned`` the same rows in source
    order (row-per-source-row outputs only; for private checks); ``source_rows[j]`` the source
    row of published row ``j`` (None when the rows are not the source's, or order was kept)."""

    frame: pd.DataFrame
    report: dict[str, Any]
    published: dict[str, Any]
    aligned: pd.DataFrame | None = field(default=None, repr=False)
    source_rows: np.ndarray[Any, Any] | None = field(default=None, repr=False)

    def csv_bytes(self, *, sep: str = ",") -> bytes:
        return self.export_bytes(DEFAULT_FORMAT, sep=sep)

    def export_bytes(self, fmt: str, *, sep: str | None = None) -> bytes:
        """The published table in export format ``fmt`` (``sep``: a delimited text's
        separator)."""
        return export_format(fmt).to_bytes(self.frame, sep=sep)


def secret_names(plan: Plan | Mapping[str, Any]) -> set[str]:
    """Secrets a plan refers to by name (``"key": "release-key"``)."""
    if isinstance(plan, Plan):
        all_params = [dict(s.params) for s in plan.steps]
    else:
        all_params = [dict(s.get("params") or {}) for s in plan.get("steps", [])]
    return {p["key"] for p in all_params if isinstance(p.get("key"), str)}


def fresh_secrets(
    plan: Plan | Mapping[str, Any],
    random_bytes: Callable[[int], bytes],
    supplied: Mapping[str, bytes] | None = None,
) -> dict[str, bytes]:
    """One new 32-byte key per secret the plan names and the caller did not supply: tokens are
    stable within a release and unlinkable across releases. Keys are never written."""
    out = dict(supplied or {})
    for name in sorted(secret_names(plan) - set(out)):
        out[name] = random_bytes(32)
    return out


def row_preserving(plan: Plan) -> bool:
    """The output lists the source's records (no aggregate or synthetic step)."""
    return all(get_step(s.kind).output == "rows" for s in plan.steps)


def scrub_report(report: dict[str, Any]) -> dict[str, Any]:
    """The internal report without the raw quasi-identifier and sensitive values of the source's
    disclosing classes (reduced to their count)."""
    before = report.get("risk_before") or {}
    for sa in (before.get("sensitive") or {}).values():
        sa.pop("disclosing_classes", None)
    return report


def publish(
    df: pd.DataFrame,
    plan: Plan,
    *,
    rng: np.random.Generator,
    secrets: Mapping[str, bytes] | None = None,
    keep_order: bool = False,
    before_spending: Callable[[], None] | None = None,
    public_plan: Mapping[str, Any] | None = None,
    progress: Callable[[float, str], None] | None = None,
    population: Any = None,
) -> Published:
    """Run ``plan`` on ``df`` and prepare its release (see the module's notes)."""
    output, report = apply_plan(
        df,
        plan,
        rng=rng,
        secrets=secrets,
        before_spending=before_spending,
        progress=progress,
        population=population,
    )
    internal = scrub_report(report.to_dict())
    aligned = None
    source_rows = None
    frame = output.reset_index(drop=True)
    shuffled = False
    if row_preserving(plan) and len(frame) == len(df):
        aligned = frame
        if not keep_order:
            source_rows = rng.permutation(len(frame))
            frame = aligned.iloc[source_rows].reset_index(drop=True)
            shuffled = True
    published = published_report(
        internal,
        public_plan if public_plan is not None else plan_to_dict(plan),
        keep_order=not shuffled,
    )
    if aligned is None:
        published["row_order"] = "not the source's records"
    return Published(frame, internal, published, aligned, source_rows)
