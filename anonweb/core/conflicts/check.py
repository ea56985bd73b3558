"""The conflict check: what several releases of one source disclose together.

Every interface (the web's release job, the API, ``manage.py conflicts``) describes each release
as a :class:`ReleaseView` — its published rows with the private mapping back to source rows, and
the aggregates it published about numeric columns (its lineage) — and calls
:func:`check_conflicts`. Findings (:class:`~.findings.Finding`) are of four types:

* ``exact_inference`` and ``differencing`` (:mod:`.inference`): numeric values fixed, or confined
  within the p% rule, by the aggregates of all releases together;
* ``linkage`` (:mod:`.linkage`): releases that can be joined row by row, whose joined classes
  have fewer than K people or fewer than L distinct sensitive values;
* ``intersection``: the composition attack on sensitive values, and (``unlinked_k``) joined
  classes smaller than K for releases that cannot be joined today.

A finding reports what the combination adds: records that one release (or, for a new release,
the earlier releases together) already disclose are not counted again. What a single release
discloses on its own through its aggregates is reported too, as ``exact_inference`` naming that
release alone. Differentially private releases are left out: their noise is accounted for by the
privacy budget.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.conflicts.findings import Finding, rows_of
from anonweb.core.conflicts.inference import Aggregate, Inference, figure, infer, recipe
from anonweb.core.conflicts.linkage import RecordRelease, pair_findings
from anonweb.core.errors import DataError, ParameterError

DEFAULT_P = 0.05  # the p% rule: a value known to within ±5 % of itself is disclosed
_ORDER = {"exact_inference": 0, "differencing": 1, "linkage": 2, "intersection": 3}


@dataclass(frozen=True)
class ReleaseView:
    """One release as the check sees it.

    ``frame``: the record-level rows as published, without the lineage id column, and
    ``rows[j]``: the source row of row ``j`` (both None for an aggregate table).
    ``aggregates``: what it published about numeric columns over groups of source records.
    ``dp``: a differentially private release (noisy by design; left out of this check).
    """

    label: str
    frame: pd.DataFrame | None = None
    rows: NDArray[Any] | None = None
    aggregates: tuple[Aggregate, ...] = ()
    quasi_identifiers: tuple[str, ...] = ()
    dp: bool = False


@dataclass(frozen=True)
class ConflictReport:
    findings: tuple[Finding, ...]
    incomplete: tuple[str, ...] = ()
    releases: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())

    @property
    def conflicting(self) -> bool:
        """Something was found, or a part could not be decided (treated as found)."""
        return bool(self.findings or self.incomplete)

    def to_dict(self, ids: Sequence[Any] | None = None, *, values: bool = True) -> dict[Any, Any]:
        return {
            "findings": [f.to_dict(ids, values=values) for f in self.findings],
            "incomplete": list(self.incomplete),
            "releases": list(self.releases),
            "notes": list(self.notes),
        }


def check_conflicts(
    source: pd.DataFrame,
    releases: Sequence[ReleaseView],
    *,
    quasi_identifiers: Sequence[str] = (),
    sensitive: Sequence[str] = (),
    k: int | None = None,
    l: int | None = None,  # noqa: E741 (the literature's letter)
    p: float | None = DEFAULT_P,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    new: str | None = None,
    unlinked_k: bool = True,
    budget: int | None = None,
) -> ConflictReport:
    """Check ``releases`` of ``source`` against each other.

    With ``new``, the release of that label is checked against the others (taken together as
    already known); without, every release against every other. ``bounds`` are the public
    bounds of numeric columns (default: the column's observed range); ``p`` the p% threshold
    for intervals (None: exact values only).
    """
    _validate(source, releases, sensitive, k, l, p, new)
    views = [v for v in releases if not v.dp]
    notes = tuple(
        f"{v.label} is differentially private: its noise is counted in the privacy budget, "
        "not in this check"
        for v in releases
        if v.dp
    )
    findings: list[Finding] = []
    incomplete: list[str] = []
    for column, aggs in _by_column(views).items():
        f, inc = _aggregate_findings(
            source, column, aggs, new=new, p=p, bounds=(bounds or {}).get(column), budget=budget
        )
        findings += f
        incomplete += inc
    records = [
        RecordRelease(
            v.label,
            v.frame.reset_index(drop=True),
            np.asarray(v.rows, dtype=np.int64),
            tuple(v.quasi_identifiers or quasi_identifiers),
        )
        for v in views
        if v.frame is not None and v.rows is not None
    ]
    for a, b in _pairs(records, new):
        findings += pair_findings(a, b, sensitive=list(sensitive), k=k, l=l, unlinked_k=unlinked_k)
    return ConflictReport(
        tuple(sorted_findings(findings)), tuple(incomplete), tuple(v.label for v in releases), notes
    )


def sorted_findings(findings: Sequence[Finding]) -> list[Finding]:
    """Findings in the order every report lists them: by type, then releases and columns (ties
    keep the order they were found in)."""
    return sorted(findings, key=lambda f: (_ORDER[f.type], f.releases, f.columns))


def _validate(
    source: pd.DataFrame,
    releases: Sequence[ReleaseView],
    sensitive: Sequence[str],
    k: int | None,
    l: int | None,  # noqa: E741
    p: float | None,
    new: str | None,
) -> None:
    labels = [v.label for v in releases]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise ParameterError(f"two releases are called {dupes[0]!r}")
    if new is not None and new not in labels:
        raise ParameterError(f"no release called {new!r} to check")
    if k is not None and (not isinstance(k, int | np.integer) or k < 2):
        raise ParameterError(f"k must be a whole number of at least 2, got {k!r}")
    if l is not None and (not isinstance(l, int | np.integer) or l < 2):
        raise ParameterError(f"l must be a whole number of at least 2, got {l!r}")
    if p is not None and not 0 < p < 1:
        raise ParameterError(f"p must be a fraction between 0 and 1, got {p!r}")
    missing = [s for s in sensitive if s not in source.columns]
    if missing:
        raise DataError(f"unknown sensitive column(s): {', '.join(map(str, missing))}")
    n = len(source)
    for v in releases:
        if v.rows is None:
            continue
        rows = np.asarray(v.rows)
        if rows.size and (rows.min() < 0 or rows.max() >= n):
            raise DataError(f"{v.label}: refers to rows outside the source ({n} rows)")
        if np.unique(rows).size != rows.size:
            raise DataError(f"{v.label}: lists a source record twice")


def _by_column(views: Sequence[ReleaseView]) -> dict[str, list[Aggregate]]:
    out: dict[str, list[Aggregate]] = defaultdict(list)
    for v in views:
        for a in v.aggregates:
            out[a.column].append(a)
    return out


def _pairs(
    records: list[RecordRelease], new: str | None
) -> list[tuple[RecordRelease, RecordRelease]]:
    if new is None:
        return list(combinations(records, 2))
    mine = [r for r in records if r.label == new]
    return [(m, r) for m in mine for r in records if r.label != new]


def _aggregate_findings(
    source: pd.DataFrame,
    column: str,
    aggs: list[Aggregate],
    *,
    new: str | None,
    p: float | None,
    bounds: tuple[float, float] | None,
    budget: int | None,
) -> tuple[list[Finding], list[str]]:
    if column not in source.columns:
        raise DataError(f"the source has no column {column!r}")
    x = pd.to_numeric(source[column], errors="coerce").to_numpy(dtype=float)
    labels = sorted({a.release for a in aggs})
    if new is None:
        baselines = [{r} for r in labels]
        alone = labels
    else:
        baselines = [b for b in ({r for r in labels if r != new}, {new}) if b & set(labels)]
        alone = [new] if new in labels else []
    runs = {
        frozenset(b): infer(
            x, [a for a in aggs if a.release in b], bounds=bounds, budget=budget, p=p
        )
        for b in baselines
    }
    everything = frozenset(labels)
    combined = runs.get(everything) or infer(x, aggs, bounds=bounds, budget=budget, p=p)
    findings: list[Finding] = []
    for r in alone:
        lone = runs[frozenset({r})]
        findings += _exact(lone, lone.determined, column, alone=r)
        findings += _interval(lone, lone.narrow(p, x), column, p, alone=r)
    if len(labels) > 1:
        known = np.zeros(x.size, dtype=bool)
        known_interval = np.zeros(x.size, dtype=bool)
        for run in runs.values():
            known |= run.determined
            known_interval |= run.determined | run.narrow(p, x)
        findings += _exact(combined, combined.determined & ~known, column)
        findings += _interval(combined, combined.narrow(p, x) & ~known_interval, column, p)
    incomplete: list[str] = []
    if combined.undecided.any():
        incomplete.append(
            f"{column}: the equations of {', '.join(labels)} about {int(combined.undecided.sum())} "
            "record(s) are too many to solve within the work budget; treat them as disclosed "
            "until checked"
        )
    return findings, incomplete


def _exact(
    inf: Inference, mask: NDArray[Any], column: str, *, alone: str | None = None
) -> list[Finding]:
    """One finding per (kind, releases involved), explained by its first record's arithmetic."""
    rows = np.flatnonzero(mask)
    if not rows.size:
        return []
    aggs = inf.aggregates
    release_of = np.array([a.release for a in aggs] + [""], dtype=object)
    k1, k2 = inf.explained[rows, 0], inf.explained[rows, 2]
    general = k1 == -2
    key = np.where(general, -1, k1) * (len(aggs) + 2) + np.where(k2 >= 0, k2, -1)
    out: list[Finding] = []
    for code in np.unique(key).tolist():
        members = rows[key == code]
        kind, text = recipe(inf, int(members[0]))
        a, b = inf.explained[members[0], 0], inf.explained[members[0], 2]
        involved = (
            sorted({x.release for x in aggs})
            if a == -2
            else sorted({release_of[a], *([release_of[b]] if b >= 0 else [])})
        )
        lead = f"{alone} alone: " if alone else ""
        many = f"{members.size} records, for example: " if members.size > 1 else ""
        out.append(
            Finding(
                kind,
                tuple(int(r) for r in members),
                f"{lead}{many}{text}",
                tuple(involved),
                (column,),
                values={int(r): float(inf.values[r]) for r in members},
                facts={"disclosed": int(members.size)},
            )
        )
    return out


def _interval(
    inf: Inference, mask: NDArray[Any], column: str, p: float | None, *, alone: str | None = None
) -> list[Finding]:
    if p is None or not mask.any():
        return []
    rows = rows_of(mask)
    releases = tuple(sorted({a.release for a in inf.aggregates}))
    lo, hi = inf.bounds
    who = f"{alone} alone confines" if alone else f"Together, {', '.join(releases)} confine"
    text = (
        f"{who} {len(rows)} record(s)' {column} to an interval within ±{p:.0%} of the true "
        f"value (the equations of the published groups and the column's bounds, {figure(lo)} "
        f"to {figure(hi)})"
    )
    return [
        Finding(
            "exact_inference",
            rows,
            text,
            releases,
            (column,),
            values={r: float((inf.low[r] + inf.high[r]) / 2) for r in rows},
            intervals={r: (float(inf.low[r]), float(inf.high[r])) for r in rows},
            facts={"within": p},
        )
    ]
