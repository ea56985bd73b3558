"""Record-level releases that can be joined, and what the join exposes.

Two releases of one source can be joined row to row when

* they list the records they share in the **same order** (files written in source order, or one
  a subset of the other in the same order);
* they share **columns with the same value for the same person** that single records out: a
  column kept unique per record in both (a lab reading), tokens made with the same key, or a
  combination of agreeing columns. Tokens made with different keys differ for the same person
  and join nothing.

Joined, a record's class is the intersection of its class in each release (the *joined*
partition); it is checked for k (fewer than K people) and l (fewer than L distinct sensitive
values), with the privacy-model code every other check uses. Records that each release alone
already exposes are left to that release's own report: a finding is what the combination adds.

Without a join, an attacker who knows a person's quasi-identifiers still finds the person's class
in each release, and the person's sensitive value must be in both: the composition attack of
:mod:`.intersection`, here for releases that may cover different records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.conflicts.findings import Finding
from anonweb.core.conflicts.intersection import common_values
from anonweb.core.models.diversity import sensitive_counts
from anonweb.core.risk.classes import EquivalenceClasses, combine_codes, dense_codes, group_codes

AGREEMENT = 0.99  # share of shared records whose cells must match for a column to join them
MIN_ORDERED = 10  # fewer shared records in the same order could be chance (1 in 10! at most)

# The sensitive column's codes in each release of a pair (None for a release without it).
_SideCodes = tuple[NDArray[Any] | None, NDArray[Any] | None]


@dataclass(frozen=True)
class RecordRelease:
    """A record-level release: ``frame`` as published (lineage id removed), ``rows[j]`` the
    source row of its row ``j``, and the quasi-identifier columns it carries."""

    label: str
    frame: pd.DataFrame
    rows: NDArray[Any]
    quasi_identifiers: tuple[str, ...]


@dataclass(frozen=True)
class Join:
    """How two releases join: ``how`` is "row order" or "columns"; ``linked`` marks the shared
    records (in :func:`shared` order) that are joined one to one."""

    how: str
    columns: tuple[str, ...]
    linked: NDArray[Any]

    def describe(self) -> str:
        if self.how == "row order":
            return "they list the records they share in the same order"
        cols = ", ".join(self.columns)
        return f"they share column(s) {cols} with the same value for the same person"


def shared(a: RecordRelease, b: RecordRelease) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any]]:
    """Source rows in both releases, and their positions in each."""
    return np.intersect1d(a.rows, b.rows, assume_unique=True, return_indices=True)


def find_join(a: RecordRelease, b: RecordRelease) -> Join | None:
    rows, ia, ib = shared(a, b)
    if not rows.size:
        return None
    if rows.size >= MIN_ORDERED and np.array_equal(np.argsort(ia), np.argsort(ib)):
        return Join("row order", (), np.ones(rows.size, dtype=bool))
    agreeing = [
        c
        for c in a.frame.columns
        if c in b.frame.columns and _agreement(a.frame[c], b.frame[c], ia, ib) >= AGREEMENT
    ]
    if not agreeing:
        return None
    linked = _linked(a, b, agreeing, ia, ib)
    if not linked.any():
        return None
    # Name the columns that single records out by themselves, if any: a token, a reading.
    alone = [c for c in agreeing if len(agreeing) > 1 and _linked(a, b, [c], ia, ib).any()]
    return Join("columns", tuple(alone or agreeing), linked)


def _linked(
    a: RecordRelease, b: RecordRelease, columns: list[str], ia: NDArray[Any], ib: NDArray[Any]
) -> NDArray[Any]:
    """Shared records whose values in ``columns`` occur once in each release (and agree)."""
    both = pd.concat([a.frame[columns], b.frame[columns]], ignore_index=True)
    key = group_codes(both.astype(str), columns)
    key_a, key_b = key[: len(a.frame)], key[len(a.frame) :]
    count_a = np.bincount(key_a, minlength=key.max() + 1)
    count_b = np.bincount(key_b, minlength=key.max() + 1)
    return np.asarray(
        (count_a[key_a[ia]] == 1) & (count_b[key_b[ib]] == 1) & (key_a[ia] == key_b[ib])
    )


def _agreement(x: pd.Series, y: pd.Series, ia: NDArray[Any], ib: NDArray[Any]) -> float:
    u = x.iloc[ia].reset_index(drop=True)
    v = y.iloc[ib].reset_index(drop=True)
    same = (u.astype(str) == v.astype(str)) | (u.isna() & v.isna())
    return float(same.mean())


def class_codes(r: RecordRelease, qis: list[str]) -> NDArray[Any]:
    """Class of each row of ``r`` on the quasi-identifiers it carries (as published)."""
    return group_codes(r.frame.reset_index(drop=True), qis)


def pair_findings(
    a: RecordRelease,
    b: RecordRelease,
    *,
    sensitive: list[str],
    k: int | None,
    l: int | None,  # noqa: E741 (the literature's letter)
    unlinked_k: bool,
) -> list[Finding]:
    """Findings for one pair of record-level releases."""
    qa = [q for q in a.quasi_identifiers if q in a.frame.columns]
    qb = [q for q in b.quasi_identifiers if q in b.frame.columns]
    rows, ia, ib = shared(a, b)
    if not rows.size or not qa or not qb:
        return []
    join = find_join(a, b)
    ca, cb = class_codes(a, qa), class_codes(b, qb)
    joint = combine_codes([(ca[ia], int(ca.max()) + 1), (cb[ib], int(cb.max()) + 1)], rows.size)
    ec = EquivalenceClasses(("joined",), joint, np.bincount(joint))
    size_a, size_b = np.bincount(ca)[ca[ia]], np.bincount(cb)[cb[ib]]
    labels = (a.label, b.label)
    out: list[Finding] = []
    if k is not None:
        small = below_k(ec.record_sizes(), size_a, size_b, k)
        if join is not None and (small & join.linked).any():
            hit = small & join.linked
            out.append(_k_finding("linkage", rows, hit, ec, k, labels, join))
        elif unlinked_k and join is None and small.any():
            out.append(_k_finding("intersection", rows, small, ec, k, labels, None))
    for s in sensitive:
        if join is not None:
            f = _linked_l(a, b, s, rows, ia, ib, ca, cb, ec, join, l)
        else:
            f = _composition(a, b, s, rows, ia, ib, ca, cb, l)
        if f is not None:
            out.append(f)
    return out


def below_k(
    joint: NDArray[Any], size_a: NDArray[Any], size_b: NDArray[Any], k: int
) -> NDArray[Any]:
    """Joined classes of fewer than ``k`` people whose class in each release alone holds at
    least ``k``: what the combination adds (per record in memory, per joined class out of
    core)."""
    return np.asarray((joint < k) & (size_a >= k) & (size_b >= k))


def below_l(joined: NDArray[Any], alone_ok: NDArray[Any], l_min: int) -> NDArray[Any]:
    """Joined (or intersected) value sets of fewer than ``l_min`` values where each release
    alone shows at least ``l_min`` (``alone_ok``)."""
    return np.asarray((joined < l_min) & alone_ok)


def _k_finding(
    kind: str,
    rows: NDArray[Any],
    hit: NDArray[Any],
    ec: EquivalenceClasses,
    k: int,
    labels: tuple[str, str],
    join: Join | None,
) -> Finding:
    sizes = ec.record_sizes()[hit]
    return k_finding(kind, rows_of_subset(rows, hit), int(sizes.min()), k, labels, join)


def k_finding(
    kind: str,
    records: tuple[int, ...],
    smallest: int,
    k: int,
    labels: tuple[str, str],
    join: Join | None,
) -> Finding:
    """The k finding of a pair: ``records`` (source rows, ascending) fall in joined classes of
    fewer than ``k`` people, the smallest of ``smallest``."""
    a, b = labels
    if join is not None:
        text = (
            f"{a} and {b} can be joined row by row ({join.describe()}); joined, "
            f"{len(records)} record(s) fall in classes of fewer than {k} people (smallest: "
            f"{smallest}) although each release alone keeps them among at least {k}"
        )
    else:
        text = (
            f"{a} and {b} generalize the quasi-identifiers differently: an attacker who knows a "
            f"person's values places them in a class of each, and {len(records)} record(s) "
            f"share both classes with fewer than {k} people (smallest: {smallest}). The "
            "releases cannot be joined row by row today; any join (a shared key, external "
            "data) would expose these records"
        )
    facts: dict[str, object] = {"k": k, "k_joined": smallest}
    if join is not None:
        facts.update(link=join.how, link_columns=list(join.columns))
    return Finding(kind, records, text, labels, (), facts=facts)


def _released_codes(
    a: RecordRelease, b: RecordRelease, s: str
) -> tuple[NDArray[Any], NDArray[Any]] | None:
    """The sensitive column as each release shows it, coded jointly (None if one lacks it)."""
    if s not in a.frame.columns or s not in b.frame.columns:
        return None
    both = pd.concat([a.frame[s], b.frame[s]], ignore_index=True)
    codes, _ = dense_codes(both.astype(object).where(both.notna(), None))
    return codes[: len(a.frame)], codes[len(a.frame) :]


def _distinct(codes: NDArray[Any], values: NDArray[Any]) -> NDArray[Any]:
    """Distinct sensitive values of each row's class (the models' l-diversity counts)."""
    ec = EquivalenceClasses(("class",), codes, np.bincount(codes))
    per_class = sensitive_counts(ec, pd.Series(values, name="s")).distinct
    return np.asarray(per_class[codes])


def _linked_l(
    a: RecordRelease,
    b: RecordRelease,
    s: str,
    rows: NDArray[Any],
    ia: NDArray[Any],
    ib: NDArray[Any],
    ca: NDArray[Any],
    cb: NDArray[Any],
    ec: EquivalenceClasses,
    join: Join,
    l: int | None,  # noqa: E741
) -> Finding | None:
    coded: _SideCodes | None = _released_codes(a, b, s) or _one_side(a, b, s)
    if coded is None:
        return None
    va, vb = coded
    # Joined, the attacker sees the released values of both rows; take A's where it has them.
    if va is not None:
        joined_values = va[ia]
    else:
        assert vb is not None  # _one_side gives the codes of the side that has the column
        joined_values = vb[ib]
    l_min = 2 if l is None else l
    joined = _distinct(ec.codes, joined_values)
    alone_ok = np.ones(rows.size, dtype=bool)
    if va is not None:
        alone_ok &= _distinct(ca, va)[ia] >= l_min
    if vb is not None:
        alone_ok &= _distinct(cb, vb)[ib] >= l_min
    hit = below_l(joined, alone_ok, l_min) & join.linked
    if not hit.any():
        return None
    return linked_l_finding(
        (a.label, b.label), s, rows_of_subset(rows, hit), l_min, int(joined[hit].min()), join
    )


def linked_l_finding(
    labels: tuple[str, str],
    s: str,
    records: tuple[int, ...],
    l_min: int,
    l_joined: int,
    join: Join,
) -> Finding:
    """The l finding of two releases joined row by row: ``records`` fall in joined classes with
    fewer than ``l_min`` distinct ``s`` values (the fewest: ``l_joined``)."""
    a, b = labels
    text = (
        f"{a} and {b} can be joined row by row ({join.describe()}); joined, "
        f"{len(records)} record(s) fall in classes with fewer than {l_min} distinct {s} "
        f"values{' (the value is disclosed)' if l_min == 2 else ''}, though each release alone "
        f"shows at least {l_min}"
    )
    facts: dict[str, object] = {"l": l_min, "l_joined": l_joined, "link": join.how}
    facts["link_columns"] = list(join.columns)
    return Finding("linkage", records, text, labels, (s,), facts=facts)


def _one_side(a: RecordRelease, b: RecordRelease, s: str) -> _SideCodes | None:
    """Only one release shows the sensitive column: joined, its values reach the other's rows."""
    for side, r in ((0, a), (1, b)):
        if s in r.frame.columns:
            codes, _ = dense_codes(r.frame[s].astype(object).where(r.frame[s].notna(), None))
            return (codes, None) if side == 0 else (None, codes)
    return None


def _composition(
    a: RecordRelease,
    b: RecordRelease,
    s: str,
    rows: NDArray[Any],
    ia: NDArray[Any],
    ib: NDArray[Any],
    ca: NDArray[Any],
    cb: NDArray[Any],
    l: int | None,  # noqa: E741
) -> Finding | None:
    coded = _released_codes(a, b, s)
    if coded is None:
        return None
    va, vb = coded
    l_min = 2 if l is None else l
    common = common_values(ca, va, cb, vb, ca[ia], cb[ib])
    alone_ok = (_distinct(ca, va)[ia] >= l_min) & (_distinct(cb, vb)[ib] >= l_min)
    hit = below_l(common, alone_ok, l_min)
    if not hit.any():
        return None
    return composition_finding(
        (a.label, b.label), s, rows_of_subset(rows, hit), l_min, int(common[hit].min())
    )


def composition_finding(
    labels: tuple[str, str], s: str, records: tuple[int, ...], l_min: int, l_combined: int
) -> Finding:
    """The composition attack's finding: for ``records`` the two classes an attacker places
    them in share fewer than ``l_min`` values of ``s`` (the fewest: ``l_combined``)."""
    a, b = labels
    text = (
        f"an attacker who knows these people's quasi-identifiers finds their class in "
        f"{a} and in {b}; their {s} must be a value both classes hold, and for "
        f"{len(records)} record(s) fewer than {l_min} such values remain"
        f"{' (the value is disclosed)' if l_min == 2 else ''}, though each release alone "
        f"shows at least {l_min}"
    )
    facts: dict[str, object] = {"l": l_min, "l_combined": l_combined}
    return Finding("intersection", records, text, labels, (s,), facts=facts)


def rows_of_subset(rows: NDArray[Any], mask: NDArray[Any]) -> tuple[int, ...]:
    return tuple(int(r) for r in rows[mask])
