"""All record-level attacks on one release, against a control when there is one."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.attacks.matching import Column, is_numeric
from anonweb.core.attacks.records import (
    Combos,
    dcr_auc,
    inference_successes,
    linkage_successes,
    neighbours,
    release_combos,
)
from anonweb.core.attacks.singling_out import draw_predicates, singled_out
from anonweb.core.attacks.stats import AttackRate, auc_interval
from anonweb.core.errors import DataError, ParameterError

DEFAULT_TARGETS = 2000
DEFAULT_TOLERANCE = 0.05
SINGLING_OUT_GROUP = 5000
NO_CONTROL = (
    "No control was held out: the rates are what the attacks achieve, but the excess over "
    "what an attacker would guess about anyone cannot be measured."
)

Progress = Callable[[float, str], None]


@dataclass(frozen=True)
class AttackReport:
    known: tuple[str, ...]
    sensitive: tuple[str, ...]
    linkage: AttackRate
    inference: Mapping[str, AttackRate]
    singling_out: AttackRate
    membership_auc: float | None
    members: int
    non_members: int
    tolerance: float = DEFAULT_TOLERANCE
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def controlled(self) -> bool:
        return self.linkage.control_rate is not None

    @property
    def membership_ci(self) -> tuple[float, float] | None:
        if self.membership_auc is None:
            return None
        return auc_interval(self.membership_auc, self.members, self.non_members)

    def to_dict(self) -> dict[str, Any]:
        ci = self.membership_ci
        return {
            "known": list(self.known),
            "sensitive": list(self.sensitive),
            "tolerance": self.tolerance,
            "linkage": self.linkage.to_dict(),
            "inference": {c: r.to_dict() for c, r in self.inference.items()},
            "singling_out": self.singling_out.to_dict(),
            "membership": {
                "auc": None if self.membership_auc is None else round(self.membership_auc, 6),
                "ci": None if ci is None else [round(ci[0], 6), round(ci[1], 6)],
                "members": self.members,
                "non_members": self.non_members,
            },
            "note": None if self.controlled else NO_CONTROL,
            "sentences": sentences(self.to_figures()),
        }

    def to_figures(self) -> dict[str, Any]:
        """The figures without the sentences (what :func:`sentences` reads)."""
        return {
            "known": list(self.known),
            "linkage": self.linkage.to_dict(),
            "inference": {c: r.to_dict() for c, r in self.inference.items()},
            "singling_out": self.singling_out.to_dict(),
            "membership": {"auc": self.membership_auc, "ci": self.membership_ci},
        }


def _pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _names(cols: Sequence[str]) -> str:
    cols = list(cols)
    return cols[0] if len(cols) == 1 else ", ".join(cols[:-1]) + " and " + cols[-1]


def _figure(r: Mapping[str, Any], what: str) -> str:
    lo, hi = r["ci"]
    if r["excess"] is None:
        return f"{what} {_pct(r['rate'])} of the time (95% CI {_pct(lo)}–{_pct(hi)}; no control)"
    more = "more" if r["excess"] >= 0 else "less"
    return (
        f"{what} {_pct(abs(r['excess']))} {more} often than chance "
        f"(95% CI {_pct(lo)} to {_pct(hi)})"
    )


def sentences(figures: Mapping[str, Any]) -> list[str]:
    """Each attack's figure as a sentence a data steward reads."""
    who = f"An attacker who knows {_names(figures['known'])} of someone in the release"
    out = [_figure(figures["linkage"], f"{who} can link them to their row")]
    for col, r in figures["inference"].items():
        out.append(_figure(r, f"{who} can guess their {col}"))
    out.append(
        _figure(
            figures["singling_out"],
            "Predicates written from the release isolate exactly one person",
        )
    )
    auc, ci = figures["membership"]["auc"], figures["membership"]["ci"]
    if auc is not None and ci is not None:
        out.append(
            "The distance to the closest released record tells people in the release from "
            f"people not in it with an AUC of {auc:.2f} (95% CI {ci[0]:.2f}–{ci[1]:.2f}; "
            "0.50 is chance)."
        )
    return [s if s.endswith(".") else s + "." for s in out]


def _check(
    source: pd.DataFrame,
    release: pd.DataFrame | Combos,
    control: pd.DataFrame | None,
    known: Sequence[str],
    sensitive: Sequence[str],
    targets: int,
) -> None:
    if not known:
        raise ParameterError("name the columns the attacker knows")
    both = set(known) & set(sensitive)
    if both:
        raise ParameterError(
            f"{_names(sorted(both))} cannot be both known to the attacker and sensitive"
        )
    released = release.frame if isinstance(release, Combos) else release
    for label, frame in (("source", source), ("release", released), ("control", control)):
        if frame is None:
            continue
        missing = [c for c in (*known, *sensitive) if c not in frame.columns]
        if missing:
            raise DataError(f"the {label} has no column {', '.join(map(repr, missing))}")
        if len(frame) == 0:
            raise DataError(f"the {label} has no rows")
    if isinstance(targets, bool) or not isinstance(targets, int) or targets < 1:
        raise ParameterError(
            f"the number of targets must be a positive whole number, got {targets!r}"
        )


def _sample(n: int, size: int, rng: np.random.Generator) -> NDArray[np.int64]:
    return np.sort(rng.choice(n, size=min(n, size), replace=False)).astype(np.int64)


def _columns(
    combos: Combos,
    people: pd.DataFrame,
    names: Sequence[str],
    ranges: Mapping[str, float],
    tolerance: float,
    hierarchies: Mapping[str, pd.DataFrame] | None,
) -> dict[str, Column]:
    return {
        c: Column(
            c,
            combos.frame[c],
            people[c].reset_index(drop=True),
            source_range=ranges[c],
            tolerance=tolerance,
            levels=(hierarchies or {}).get(c),
        )
        for c in names
    }


def run_attacks(
    source: pd.DataFrame,
    release: pd.DataFrame | Combos,
    *,
    known: Sequence[str],
    sensitive: Sequence[str] = (),
    control: pd.DataFrame | None = None,
    targets: int = DEFAULT_TARGETS,
    rng: np.random.Generator,
    tolerance: float = DEFAULT_TOLERANCE,
    hierarchies: Mapping[str, pd.DataFrame] | None = None,
    lineage: NDArray[Any] | None = None,
    progress: Progress | None = None,
    ranges: Mapping[str, float] | None = None,
    own: NDArray[Any] | None = None,
) -> AttackReport:
    """Linkage, inference, singling out and membership on ``release``, made from ``source``;
    ``control`` holds people of the same population who are not in it.

    ``release`` may be given as its distinct combinations over the attacked columns with their
    counts (:class:`Combos`, e.g. from an engine's histogram of a release too large for memory;
    then without ``lineage``), and ``source`` as a random sample of the source's records (the
    targets and the singling-out group are drawn from it), with ``ranges`` the numeric
    columns' ranges over the whole source (the tolerance is a share of them).

    ``lineage`` (the source row of each release row, -1 for none; kept privately with a
    release) says which row is a person's own: linkage then also succeeds on that row, however
    far noise moved it. For a release given by its combinations, ``own`` says the same: the
    combination of each ``source`` record's own release row (-1 for none), read through the
    lineage. Without either, a person is linked when the row picked agrees with them on every
    attacked column, the only test there is for people not in the release (and one that misses
    the links to a perturbed row of their own).
    """
    known, sensitive = list(known), list(sensitive)
    _check(source, release, control, known, sensitive, targets)
    if not 0 < tolerance < 1:
        raise ParameterError(f"the tolerance is a share of the column's range, got {tolerance}")
    cols = [*known, *sensitive]
    report = progress or (lambda f, m: None)
    given = dict(ranges or {})
    ranges = {
        c: float(given.get(c, source[c].max() - source[c].min())) if is_numeric(source[c]) else 1.0
        for c in cols
    }
    if isinstance(release, Combos):
        if lineage is not None:
            raise ParameterError(
                "a release given by its combinations has no lineage: give each source "
                "record's own combination (own)"
            )
        combos = release
    elif own is not None:
        raise ParameterError("own goes with a release given by its combinations")
    else:
        combos = release_combos(release[cols], cols)
    t_idx = _sample(len(source), targets, rng)
    c_idx = _sample(len(control), targets, rng) if control is not None else np.empty(0, np.int64)
    parts = [source.iloc[t_idx][cols]]
    if control is not None:
        parts.append(control.iloc[c_idx][cols])
    people = pd.concat(parts, ignore_index=True)
    columns = _columns(combos, people, cols, ranges, tolerance, hierarchies)
    nb = neighbours(
        combos, columns, known, len(people), progress=lambda f: report(0.7 * f, "linking")
    )
    members = np.arange(len(t_idx))
    others = np.arange(len(t_idx), len(people))

    def rate(count: Callable[[NDArray[Any]], float]) -> AttackRate:
        if control is None:
            return AttackRate(count(members), len(members))
        return AttackRate(count(members), len(members), count(others), len(others))

    by_source = None
    if lineage is not None:
        lineage = np.asarray(lineage, dtype=np.int64)
        if lineage.shape != (len(combos.of_row),):
            raise DataError("the lineage must give one source row per release row")
        by_source = np.full(len(source), -1, dtype=np.int64)
        kept = lineage >= 0
        by_source[lineage[kept]] = combos.of_row[kept]
    elif own is not None:
        by_source = np.asarray(own, dtype=np.int64)
        if by_source.shape != (len(source),):
            raise DataError("own must give one combination per source record")
    mine = None
    if by_source is not None:
        mine = np.full(len(people), -1, dtype=np.int64)
        mine[members] = by_source[t_idx]

    def link(ps: NDArray[Any]) -> float:
        return linkage_successes(nb, combos, columns, ps, mine if ps is members else None)

    linkage = rate(link)
    inference = {
        s: rate(lambda ps, s=s: inference_successes(nb, combos, columns[s], ps))  # type: ignore[misc]
        for s in sensitive
    }
    report(0.75, "singling out")
    singling = _singling_out(
        source, control, combos, cols, ranges, tolerance, hierarchies, targets, rng
    )
    auc = dcr_auc(nb.dcr[members], nb.dcr[others]) if control is not None else None
    report(1.0, "done")
    return AttackReport(
        known=tuple(known),
        sensitive=tuple(sensitive),
        linkage=linkage,
        inference=inference,
        singling_out=singling,
        membership_auc=auc,
        members=len(members),
        non_members=len(others),
        tolerance=tolerance,
    )


def _singling_out(
    source: pd.DataFrame,
    control: pd.DataFrame | None,
    combos: Combos,
    cols: list[str],
    ranges: Mapping[str, float],
    tolerance: float,
    hierarchies: Mapping[str, pd.DataFrame] | None,
    count: int,
    rng: np.random.Generator,
) -> AttackRate:
    size = min(len(source), SINGLING_OUT_GROUP)
    if control is not None:
        size = min(size, len(control))
    m_idx = _sample(len(source), size, rng)
    parts = [source.iloc[m_idx][cols]]
    if control is not None:
        parts.append(control.iloc[_sample(len(control), size, rng)][cols])
    people = pd.concat(parts, ignore_index=True)
    columns = list(_columns(combos, people, cols, ranges, tolerance, hierarchies).values())
    rows, use = draw_predicates(combos, len(cols), count, rng=rng)
    members = np.arange(size, dtype=np.int64)
    hits = singled_out(rows, use, columns, members)
    if control is None:
        return AttackRate(hits, count)
    others = np.arange(size, 2 * size, dtype=np.int64)
    return AttackRate(hits, count, singled_out(rows, use, columns, others), count)
