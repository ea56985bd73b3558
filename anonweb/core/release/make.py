"""Making a release: the one path from a plan and a table to a release ready to write, which the
web job and the command line both call, so the same plan, table and randomness make the same
release everywhere.

:func:`make_release` holds out the attack control, publishes
(:func:`~anonweb.core.release.publish.publish`: the plan, row shuffling, report scrubbing),
checks perturbed numeric columns against a maximum-knowledge intruder, keeps the lineage (which
source record each row is, and the means microaggregation published), attacks the release,
reconstructs values from the aggregates of every live release of the source, checks conflicts
with the earlier releases and evaluates the release policy. What a step does to rows (perturbs,
changes them, makes synthetic records) is read from the step registry.

Randomness and secrets come from the caller; the earlier releases too, as core objects
(:class:`~anonweb.core.conflicts.release.EarlierRelease`): reading them from a database or from
files is the caller's business.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.attacks.options import AttackOptions, attack_options
from anonweb.core.attacks.reconstruction import reconstruction_report
from anonweb.core.attacks.release import attack_release, hold_out
from anonweb.core.attacks.run import DEFAULT_TARGETS
from anonweb.core.conflicts.inference import Aggregate
from anonweb.core.conflicts.lineage import microaggregated
from anonweb.core.conflicts.release import (
    GATE_NEW_LABEL,
    ConflictCheck,
    EarlierRelease,
    release_conflicts,
)
from anonweb.core.io.export import DEFAULT_FORMAT, export_format
from anonweb.core.release.plan import get_step
from anonweb.core.release.policy import (
    QUASI_IDENTIFIER,
    SENSITIVE,
    PolicyResult,
    PolicyThresholds,
    evaluate_release,
)
from anonweb.core.release.publish import publish, row_preserving
from anonweb.core.release.steps import Plan
from anonweb.core.risk.intruder import intruder_check

# The step whose means are published on the members' rows: a lineage aggregate.
MICROAGGREGATION = "microaggregation"
# Below this many records the intruder check has too few to compare.
INTRUDER_MIN_ROWS = 20
# How far through the making each stage is (a fraction of the whole, for progress reports).
STAGES = {
    "publish": 60 / 70,
    "intruder": 60 / 70,
    "attacks": 62 / 70,
    "reconstruction": 64 / 70,
    "conflicts": 65 / 70,
    "gate": 67 / 70,
}

Earlier = Sequence[EarlierRelease] | Callable[[], Sequence[EarlierRelease]]


@dataclass(frozen=True)
class MadeRelease:
    """A release ready to write.

    ``frame`` is the output as published; ``report`` the internal report (with ``intruder``,
    ``attacks`` and ``reconstruction``), ``published`` the published one. ``released`` is what
    the policy read (the rows in source order when they are the source's). ``source_rows[j]`` is
    the row of the whole table that published row ``j`` describes (None when the rows are not
    the source's), ``aggregates`` what it published about groups of source rows, ``dp`` whether
    it is differentially private: its lineage, kept privately. ``conflicts`` is the check against
    the earlier releases (None when it does not apply), ``gate`` the policy's result.
    ``control_rows`` are the rows of the whole table held out as the attacks' control."""

    frame: pd.DataFrame
    report: dict[str, Any]
    published: dict[str, Any]
    released: pd.DataFrame = field(repr=False)
    source_rows: NDArray[np.int64] | None = field(repr=False)
    aggregates: tuple[Aggregate, ...] = field(repr=False)
    dp: bool
    conflicts: ConflictCheck | None
    gate: PolicyResult
    control_rows: NDArray[np.int64] | None = field(default=None, repr=False)

    def csv_bytes(self, *, sep: str = ",") -> bytes:
        return self.export_bytes(DEFAULT_FORMAT, sep=sep)

    def export_bytes(self, fmt: str, *, sep: str | None = None) -> bytes:
        """The released table in export format ``fmt`` (``sep``: a delimited text's
        separator), written by the format's one writer."""
        return export_format(fmt).to_bytes(self.frame, sep=sep)

    def lineage(self) -> dict[str, Any]:
        """The lineage in counts (see :func:`lineage_summary`)."""
        return lineage_summary(self.source_rows, self.aggregates, dp=self.dp)


def lineage_summary(
    rows: NDArray[Any] | None, aggregates: Sequence[Aggregate], *, dp: bool
) -> dict[str, Any]:
    """A release's lineage in counts, never values: whether its rows are the source's records,
    and for each aggregate the column, the statistic and how many groups and records it covers."""
    out: dict[str, Any] = {
        "records": None if rows is None else int(np.asarray(rows).size),
        "dp": dp,
        "aggregates": [],
    }
    for a in aggregates:
        groups = np.asarray(a.groups)
        members = groups[groups >= 0]
        out["aggregates"].append(
            {
                "column": a.column,
                "statistic": a.statistic,
                "groups": int(np.unique(members).size),
                "records": int(members.size),
            }
        )
    return out


def synthetic(plan: Plan) -> bool:
    """The plan publishes synthetic records (new rows, attacked like records)."""
    return any(get_step(s.kind).output == "synthetic" for s in plan.steps)


def perturbed_columns(plan: Plan) -> list[str]:
    """The columns the plan's perturbing steps (noise, swapping, microaggregation...) name."""
    columns: list[str] = []
    for step in plan.steps:
        if get_step(step.kind).perturbs:
            params = step.params
            columns += list(params.get("columns") or []) + (
                [params["column"]] if params.get("column") else []
            )
    return list(dict.fromkeys(columns))


def microaggregated_columns(plan: Plan) -> list[str]:
    """The columns whose group means microaggregation publishes (lineage aggregates)."""
    return [
        c
        for step in plan.steps
        if step.kind == MICROAGGREGATION
        for c in step.params.get("columns") or []
    ]


def attacked_columns(
    plan: Plan,
    tags: Mapping[str, str | None],
    columns: Sequence[str],
    attacks: AttackOptions | None,
) -> tuple[list[str], list[str]]:
    """What the attacker knows and what they try to learn: the plan's ``attacks`` columns, by
    default the plan's quasi-identifiers and sensitive columns with the tagged ones."""
    known = (attacks.known if attacks and attacks.known else None) or [
        *plan.quasi_identifiers,
        *tagged(tags, columns, QUASI_IDENTIFIER),
    ]
    sensitive = (attacks.sensitive if attacks and attacks.sensitive else None) or [
        *plan.sensitive,
        *tagged(tags, columns, SENSITIVE),
    ]
    return list(known), list(sensitive)


def tagged(tags: Mapping[str, str | None], columns: Sequence[str], role: str) -> list[str]:
    """The ``columns`` tagged with ``role``, in table order."""
    return [str(c) for c in columns if tags.get(str(c)) == role]


def make_release(
    table: pd.DataFrame,
    plan: Plan,
    *,
    rng: np.random.Generator,
    secrets: Mapping[str, bytes] | None = None,
    tags: Mapping[str, str | None],
    thresholds: PolicyThresholds | None = None,
    earlier: Earlier = (),
    attacks: AttackOptions | None = None,
    keep_order: bool = False,
    before_spending: Callable[[], None] | None = None,
    progress: Callable[[float, str], None] | None = None,
    population: Any = None,
) -> MadeRelease:
    """Make a release of ``table`` (never modified) with ``plan``.

    ``tags`` maps a column to its role (the dataset's column tags), ``thresholds`` is the team's
    policy, ``earlier`` the earlier live releases of the source (or a function returning them,
    called once the plan has run, so releases written meanwhile are counted). ``attacks`` sets
    the attack evaluation (default: the plan's own ``attacks``). ``before_spending`` runs before
    any mechanism reads the data. ``progress(fraction, what)`` reports how far it is.
    ``population`` is the population table the search's population-based models read."""
    thresholds = thresholds or PolicyThresholds()
    # Tags in one order, the plan's columns first and then the table's, so the columns each
    # check lists come in the same order whatever order the caller's mapping has (a dataset's
    # tags, or the command line's options).
    order = [*plan.quasi_identifiers, *plan.sensitive, *map(str, table.columns), *tags]
    tags = {c: tags[c] for c in dict.fromkeys(order) if c in tags}
    report_progress = progress or (lambda fraction, what: None)
    if attacks is None and plan.attacks:
        attacks = attack_options(plan.attacks)
    whole = table
    # The control is held out at random before the plan runs, so it is people of the same
    # population who are not in the release.
    ran_on, control, kept = hold_out(whole, attacks, rng=rng)

    def step_progress(fraction: float, what: str) -> None:
        report_progress(STAGES["publish"] * fraction, what)

    made = publish(
        ran_on,
        plan,
        rng=rng,
        secrets=secrets,
        keep_order=keep_order,
        before_spending=before_spending,
        progress=step_progress,
        population=population,
    )
    report, output = made.report, made.frame
    released = made.aligned if made.aligned is not None else output
    # Which record each published row is: the shuffle's mapping, or source order if it was kept.
    rows = made.source_rows
    if rows is None and made.aligned is not None:
        rows = np.arange(len(made.aligned), dtype=np.int64)
    # The lineage names rows of the whole table, as every other release's does.
    source_rows = rows if kept is None or rows is None else kept[rows]
    aggregates: tuple[Aggregate, ...] = ()
    dp = not row_preserving(plan)
    if not dp and made.aligned is not None:
        aligned = made.aligned
        intruder = _intruder(ran_on, aligned, plan, rng)
        if intruder is not None:
            report_progress(
                STAGES["intruder"],
                "verifying the perturbation against a maximum-knowledge intruder",
            )
            report["intruder"] = intruder
        # The means microaggregation published, over groups of the whole table's rows.
        aggregates = microaggregated(
            whole,
            aligned,
            np.arange(len(aligned)) if kept is None else kept,
            columns=microaggregated_columns(plan),
            label=GATE_NEW_LABEL,
        )
    if rows is not None or synthetic(plan):
        report_progress(
            STAGES["attacks"],
            "attacking the release: linkage, inference, singling out, membership",
        )
        known, sensitive = attacked_columns(plan, tags, whole.columns, attacks)
        report["attacks"] = attack_release(
            ran_on,
            output,
            known=known,
            sensitive=sensitive,
            control=control,
            lineage=rows,
            targets=attacks.targets if attacks else DEFAULT_TARGETS,
            rng=rng,
        )
    others = list(earlier() if callable(earlier) else earlier)
    report_progress(
        STAGES["reconstruction"],
        "reconstructing values from the aggregates of every live release of the source",
    )
    report["reconstruction"] = reconstruction_report(
        whole,
        [(GATE_NEW_LABEL, aggregates, dp)]
        + [(e.label, e.aggregates, e.dp) for e in others if e.error is None],
    )
    conflicts = None
    if dp or source_rows is not None:
        report_progress(STAGES["conflicts"], "checking for conflicts with earlier releases")
        conflicts = release_conflicts(
            whole,
            frame=output if source_rows is not None else None,
            rows=source_rows,
            earlier=others,
            quasi_identifiers=tagged(tags, whole.columns, QUASI_IDENTIFIER),
            plan_quasi_identifiers=plan.quasi_identifiers,
            sensitive=[*tagged(tags, whole.columns, SENSITIVE), *plan.sensitive],
            aggregates=aggregates,
            dp=dp,
            k=thresholds.k,
            l=thresholds.l,
        )
    report_progress(STAGES["gate"], "checking the release against the team's release policy")
    gate = evaluate_release(
        ran_on,
        released,
        plan=plan,
        tags=tags,
        thresholds=thresholds,
        report=made.published,
        conflicts=conflicts.gate_findings() if conflicts is not None else (),
        internal_report=report,
        attacks=report.get("attacks"),
    )
    return MadeRelease(
        frame=output,
        report=report,
        published=made.published,
        released=released,
        source_rows=source_rows,
        aggregates=aggregates,
        dp=dp,
        conflicts=conflicts,
        gate=gate,
        control_rows=None if kept is None else np.setdiff1d(np.arange(len(whole)), kept),
    )


def _intruder(
    source: pd.DataFrame, aligned: pd.DataFrame, plan: Plan, rng: np.random.Generator
) -> dict[str, Any] | None:
    """Maximum-knowledge intruder check on the numeric columns the plan perturbed, if any."""
    columns = [
        c
        for c in perturbed_columns(plan)
        if c in aligned.columns
        and pd.api.types.is_numeric_dtype(source[c])
        and pd.api.types.is_numeric_dtype(aligned[c])
    ]
    if not columns or len(source) < INTRUDER_MIN_ROWS:
        return None
    return intruder_check(source, aligned, columns=columns, rng=rng).to_dict()
