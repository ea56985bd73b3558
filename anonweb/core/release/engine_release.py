"""Making a release out of core: :func:`make_engine_release`, the engine path beside
:func:`~anonweb.core.release.make.make_release`, sharing its search options, model checks,
reports and policy.

The engine (DuckDB or Spark; pandas too, for comparison) reads the table's rows: DuckDB streams
them through the plan's row-wise steps a part at a time (Spark does not run those steps yet),
the engine counts the histogram the search reads, writes the chosen node as Parquet and counts
the written release's classes for the risk after and the policy. The evidence beside it (attacks, reconstruction, conflicts,
lineage) is :mod:`anonweb.core.release.engine_evidence`'s.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.assessment.profile import assess_histogram
from anonweb.core.attacks.options import AttackOptions, attack_options
from anonweb.core.conflicts.engine_check import TableRelease
from anonweb.core.conflicts.release import NEW_LABEL, ConflictCheck
from anonweb.core.engine.base import Engine, NodeRelease, Source, WriteResult, fresh_name
from anonweb.core.engine.duckdb_engine import DuckDBEngine
from anonweb.core.engine.histogram import Histogram, histogram_class_data
from anonweb.core.engine.lineage import LINEAGE_WRITTEN, split_lineage
from anonweb.core.engine.select import make_engine
from anonweb.core.errors import CoreError, ParameterError
from anonweb.core.io.hierarchy_builders import resolve_hierarchies, spec_is_fixed
from anonweb.core.release.engine_evidence import (
    conflicts_unchecked,
    engine_attacks,
    engine_conflicts,
    engine_intruder,
    engine_lineage,
    engine_reconstruction,
)
from anonweb.core.release.make import (
    INTRUDER_MIN_ROWS,
    STAGES,
    Earlier,
    attacked_columns,
    lineage_summary,
    perturbed_columns,
    tagged,
)
from anonweb.core.release.plan import (
    DROP,
    SEARCH,
    after_search_problems,
    get_step,
    plan_to_dict,
    validate_plan,
)
from anonweb.core.release.policy import (
    QUASI_IDENTIFIER,
    SENSITIVE,
    PolicyResult,
    PolicyThresholds,
    evaluate_engine_release,
)
from anonweb.core.release.publish import scrub_report
from anonweb.core.release.report import published_report
from anonweb.core.release.run import PlanReport, as_text, one_type_per_column, population_after
from anonweb.core.release.steps import IN_MEMORY, Plan, StepContext, StepSpec
from anonweb.core.risk.classes import suppressed_records
from anonweb.core.search.flash import search_histogram
from anonweb.core.search.release_node import node_release
from anonweb.core.transforms.generalize import model_checks, search_models, search_options

# The step an engine runs on its histogram is the generalization search (SEARCH), which reads the
# engine's histogram and has the engine write its node. The others it runs are row-wise: removing
# columns (DROP: the written release leaves them out) and the steps it streams the table through.


@dataclass(frozen=True)
class EngineRelease:
    """A release an engine wrote out of core (see :func:`make_engine_release`): the Parquet
    file (a folder of them for Spark) at ``path`` with ``rows`` records, its reports and the
    policy's result, as :class:`MadeRelease` has them, and the engine that ran."""

    path: str
    rows: int
    report: dict[str, Any]
    published: dict[str, Any]
    gate: PolicyResult
    engine: str
    # which source row each row of ``path`` is (a Parquet file of one column, kept privately
    # beside the release), or None when the engine could not number the source's rows
    lineage_path: str | None = None
    # the check against the earlier live releases, when it ran out of core and found any
    conflicts: ConflictCheck | None = None

    def lineage(self) -> dict[str, Any]:
        """The lineage in counts: the rows are the source's records; which record each one is
        is kept in a private file (``lineage_path``), and the plan's, the source's and the
        release's digests in the report's ``lineage``."""
        out = lineage_summary(None, (), dp=False)
        out |= self.report.get("lineage") or {}
        out["records"] = self.rows
        return out


def engine_problems(plan: Plan, engine: str) -> list[str]:
    """The plan's steps that ``engine`` cannot run, each with the reason (the step registry's
    ``engines`` declaration)."""
    problems = []
    for i, step in enumerate(plan.steps, 1):
        engines = get_step(step.kind).engines_for(step.params)
        if engine in engines:
            continue
        if set(engines) <= set(IN_MEMORY):
            problems.append(
                f"step {i} ({step.kind}) runs in memory only (its output for one row depends on "
                f"the other rows), not on the {engine} engine"
            )
        else:
            problems.append(
                f"step {i} ({step.kind}) runs on the {', '.join(engines)} engines, not on the "
                f"{engine} engine"
            )
    if sum(s.kind == SEARCH for s in plan.steps) > 1:
        problems.append(f"an engine runs one {SEARCH} step per plan")
    problems += after_search_problems(plan)
    return problems


def make_engine_release(
    source: Source,
    plan: Plan,
    *,
    engine: Engine,
    out: str | Path,
    rng: np.random.Generator,
    tags: Mapping[str, str | None],
    thresholds: PolicyThresholds | None = None,
    keep_order: bool = False,
    progress: Callable[[float, str], None] | None = None,
    secrets: Mapping[str, bytes] | None = None,
    attacks: AttackOptions | None = None,
    earlier: Earlier = (),
) -> EngineRelease:
    """Make a release of ``source`` (a Parquet or CSV file, or a table) with ``plan`` on
    ``engine``, written as Parquet to ``out``, without the table in one process's memory.

    The plan may remove columns, run row-wise steps (masks, keyed tokens, noise, PRAM with a
    matrix: the engine streams the table through them a part at a time, in one pass before the
    search, each row's output depending only on that row, the keys and its draw) and run the
    generalization search (the steps whose ``engines`` include this one); the search reads the
    engine's histogram, the engine writes the chosen node with its suppression, and the risk
    after is measured from the histogram of the written release, by the same functions as
    :func:`make_release`'s: the steps' reports, the risk profiles, the search, the model
    checks, the published report and the policy. ``secrets`` are the keys the steps name.

    The internal report has the evidence :func:`make_release` gives, computed at scale or
    stating that it was not run and why (:mod:`anonweb.core.release.engine_evidence`):
    ``attacks`` (default: the plan's own ``attacks``), ``reconstruction``, ``conflicts``
    against ``earlier`` (the earlier live releases of the source, or a function returning them:
    checked out of core, their records read from their files or tables) and ``lineage``. Beside
    ``out`` the engine writes the release's lineage (``lineage_path``: the source row of each
    row written, never in the release itself), which the caller keeps privately."""
    report_progress = progress or (lambda fraction, what: None)
    thresholds = thresholds or PolicyThresholds()
    order = [*plan.quasi_identifiers, *plan.sensitive, *tags]
    tags = {c: tags[c] for c in dict.fromkeys(order) if c in tags}
    columns = engine.columns(source)
    validate_plan(plan, columns)
    problems = engine_problems(plan, engine.name)
    if problems:
        raise ParameterError("; ".join(problems) + ": use the pandas engine")
    qis = list(plan.quasi_identifiers)
    search = [s for s in plan.steps if s.kind == SEARCH]
    model_sensitive = (
        [m["sensitive"] for m in search[0].params.get("models", []) if "sensitive" in m]
        if search
        else []
    )
    read = _HistogramReader(engine)
    report_progress(0.05, f"counting the table's classes ({engine.name})")
    sensitive = list(plan.sensitive)
    before = assess_histogram(read(source, qis, sensitive)).to_dict() if qis else None
    ctx = StepContext(
        rng=rng,
        secrets=dict(secrets or {}),
        quasi_identifiers=tuple(qis),
        sensitive=tuple(plan.sensitive),
    )
    if attacks is None and plan.attacks:
        attacks = attack_options(plan.attacks)
    origin = source
    scratch = None
    passed: dict[int, dict[str, Any]] = {}
    if any(s.kind not in (SEARCH, DROP) for s in plan.steps):
        report_progress(0.07, f"running the row-wise steps ({engine.name})")
        scratch = Path(tempfile.mkdtemp(prefix=".rows-", dir=Path(out).resolve().parent))
        mapped = scratch / "rows.parquet"
        passed = _row_pass(engine, source, plan, ctx, mapped)
        read.seen.clear()  # the search reads the pass's output
        source, columns = str(mapped), engine.columns(str(mapped))
    try:
        return _engine_release(
            source, plan, engine=engine, out=out, rng=rng, ctx=ctx, tags=tags,
            thresholds=thresholds, keep_order=keep_order, progress=report_progress,
            read=read, before=before, columns=columns, passed=passed,
            model_sensitive=model_sensitive, origin=origin, attacks=attacks, earlier=earlier,
        )  # fmt: skip
    finally:
        read.seen.clear()
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)


def _engine_release(
    source: Source,
    plan: Plan,
    *,
    engine: Engine,
    out: str | Path,
    rng: np.random.Generator,
    ctx: StepContext,
    tags: Mapping[str, str | None],
    thresholds: PolicyThresholds,
    keep_order: bool,
    progress: Callable[[float, str], None],
    read: _HistogramReader,
    before: dict[str, Any] | None,
    columns: list[str],
    passed: Mapping[int, dict[str, Any]],
    model_sensitive: list[str],
    origin: Source,
    attacks: AttackOptions | None,
    earlier: Earlier,
) -> EngineRelease:
    """:func:`make_engine_release` past the row-wise pass: ``source`` is what the search reads
    (the pass's output when there was one), ``origin`` the table as given, and ``passed`` the
    pass's step reports."""
    report_progress = progress
    qis = list(plan.quasi_identifiers)
    sensitive = list(plan.sensitive)
    hist = read(source, qis, list(dict.fromkeys([*sensitive, *model_sensitive]))) if qis else None
    hierarchies = _engine_hierarchies(plan, hist)
    ctx.hierarchies = hierarchies
    frame = pd.DataFrame(columns=columns)  # no rows: the steps' reports and output columns
    node = NodeRelease(mappings=(), quasi_identifiers=tuple(qis))
    reports: list[dict[str, Any]] = []
    models: list[Any] = []
    for i, step in enumerate(plan.steps, 1):
        started = time.perf_counter()
        report_progress(0.1 + 0.5 * (i - 1) / len(plan.steps), f"step {i}: {step.kind}")
        if i in passed:  # run by the row-wise pass; its columns are the pass's output's
            reports.append(dict(passed[i]))
            continue
        if step.kind == SEARCH:
            assert hist is not None  # the plan's check asks a search for quasi-identifiers
            models = search_models(step.params, hierarchies, hist.rows)
            result = search_histogram(
                hist, hierarchies=hierarchies, models=models, **search_options(step.params)
            )
            node = node_release(result, hist, hierarchies)
            outcome: dict[str, Any] = result.to_dict()
            frame = frame.astype({q: object for q in qis})
        else:
            done = get_step(step.kind).func(frame, step.params, ctx)
            frame, outcome = done.frame, done.report
        entry = {"step": i, "kind": step.kind, **outcome}
        entry["seconds"] = round(time.perf_counter() - started, 4)
        reports.append(entry)
    kept = [str(c) for c in frame.columns]
    rows_in = hist.rows if hist is not None else engine.row_count(source)
    # the source's histograms (a cell per combination: as many as the rows, at worst) are not
    # needed past the search's decision: freed before the release is written and measured
    hist = None
    read.seen.clear()
    shuffle = None if keep_order else int(rng.integers(2**62))
    node = dataclasses.replace(
        node, drop=tuple(c for c in columns if c not in kept), shuffle_seed=shuffle
    )
    report_progress(0.6, f"writing the release ({engine.name})")
    written, lineage_path = _write_with_lineage(engine, source, node, Path(out))
    report_progress(0.8, "measuring the released table")
    after, checks = _engine_risk_after(read, str(out), plan, kept, models, model_sensitive)
    for entry in reports:
        if entry["kind"] == SEARCH:
            entry["model_checks"] = model_checks(
                checks, plan.steps[entry["step"] - 1].params, models
            )
    internal = scrub_report(
        PlanReport(tuple(reports), before, after, {}, rows_in, written.rows).to_dict()
    )
    internal["engine"] = engine.name
    published = published_report(internal, plan_to_dict(plan), keep_order=keep_order)
    published["engine"] = engine.name
    report_progress(
        STAGES["attacks"], "attacking the release: linkage, inference, singling out, membership"
    )
    known, attacked = attacked_columns(plan, tags, engine.columns(origin), attacks)
    with _duckdb(engine) as duckdb:
        intruder = engine_intruder(
            [c for c in perturbed_columns(plan) if c in kept], engine=engine, duckdb=duckdb,
            source=origin, released=str(out), lineage=lineage_path, rng=rng,
            min_rows=INTRUDER_MIN_ROWS,
        )  # fmt: skip
        if intruder is not None:
            internal["intruder"] = intruder
        internal["attacks"] = engine_attacks(
            engine, origin, str(out), known=known, sensitive=attacked, kept=kept,
            options=attacks, rng=rng, lineage=lineage_path, duckdb=duckdb,
        )  # fmt: skip
        others = list(earlier() if callable(earlier) else earlier)
        internal["reconstruction"] = engine_reconstruction(others)
        report_progress(STAGES["conflicts"], "checking for conflicts with earlier releases")
        source_columns = engine.columns(origin)
        internal["conflicts"], conflicts = engine_conflicts(
            others,
            new=None
            if lineage_path is None
            else TableRelease(NEW_LABEL, str(out), lineage_path, tuple(plan.quasi_identifiers)),
            connect=lambda: duckdb().con,
            source_rows=rows_in,
            source_columns=source_columns,
            quasi_identifiers=tagged(tags, source_columns, QUASI_IDENTIFIER),
            sensitive=[*tagged(tags, source_columns, SENSITIVE), *plan.sensitive],
            k=thresholds.k,
            l=thresholds.l,
        )
    internal["lineage"] = engine_lineage(
        source=origin,
        released=str(out),
        plan=plan_to_dict(plan),
        rows=written.rows,
        kept=lineage_path is not None,
    )
    report_progress(STAGES["gate"], "checking the release against the team's release policy")

    def classes_of(names: list[str], sens: list[str], star: list[str]) -> tuple[Any, int]:
        return histogram_class_data(read(str(out), names, sens), star)

    gate = evaluate_engine_release(
        kept,
        written.rows,
        classes_of,
        plan=plan,
        tags=tags,
        engine=engine.name,
        thresholds=thresholds,
        report=published,
        internal_report=internal,
        attacks=internal["attacks"],
        conflicts=[
            *conflicts_unchecked(internal["conflicts"], engine=engine.name),
            *(conflicts.gate_findings() if conflicts is not None else ()),
        ],
    )
    return EngineRelease(
        str(out), written.rows, internal, published, gate, engine.name, lineage_path, conflicts
    )


def _write_with_lineage(
    engine: Engine, source: Source, node: NodeRelease, out: Path
) -> tuple[WriteResult, str | None]:
    """The release written to ``out`` and, beside it, its lineage (the source row of each row
    written, :mod:`anonweb.core.engine.lineage`); without it when the engine cannot number the
    source's rows (a CSV file on DuckDB)."""
    numbered = out.with_name(f".{out.name}.rows")
    # named apart from the table's columns: one of the same name would be written over, then
    # split off the release as if it were the lineage
    column = fresh_name(LINEAGE_WRITTEN, engine.columns(source))
    try:
        written = engine.write_release(source, dataclasses.replace(node, lineage=column), numbered)
    except ValueError as why:
        if "numbers the rows" not in str(why):
            raise
        return engine.write_release(source, node, out), None
    lineage = out.with_name(f"{out.stem}.lineage.parquet")
    try:
        split_lineage(numbered, out, lineage, column)
    finally:
        if numbered.is_dir():
            shutil.rmtree(numbered, ignore_errors=True)
        else:
            numbered.unlink(missing_ok=True)
    return dataclasses.replace(written, path=str(out)), str(lineage)


@contextmanager
def _duckdb(engine: Engine) -> Iterator[Callable[[], DuckDBEngine]]:
    """A DuckDB engine for the attacks' reads through the lineage and the conflict check,
    opened when first asked for: the DuckDB engine itself (its memory limit and spill folder),
    else one of its own."""
    own: list[Any] = []

    def connect() -> DuckDBEngine:
        if isinstance(engine, DuckDBEngine):
            return engine
        if not own:  # DuckDB's memory limit and spill folder as set for its engine
            own.append(make_engine("duckdb", ""))
        return cast(DuckDBEngine, own[0])

    try:
        yield connect
    finally:
        for e in own:
            e.close()


def _row_pass(
    engine: Engine, source: Source, plan: Plan, ctx: StepContext, out: Path
) -> dict[int, dict[str, Any]]:
    """The plan's row-wise steps (all but the search), in order, run by ``engine`` on the table a
    part at a time and written to ``out``; their reports, each as the whole table's (the
    counts of the parts added up, see :class:`~anonweb.core.release.steps.StepSpec`).

    Each step has its own context whose ``row_seed`` is drawn from the plan's ``rng`` on the
    first part, in step order as :func:`~anonweb.core.release.run.apply_plan` draws them, and
    whose ``row_positions`` are the part's rows' positions: each row gets the draw it gets in
    memory. A column a step writes as text is text in every part (a part with only numbers
    left would otherwise be stored as numbers)."""
    map_rows = getattr(engine, "map_rows", None)
    if map_rows is None:
        raise ParameterError(f"the {engine.name} engine does not run row-wise steps")
    search = next((i for i, s in enumerate(plan.steps, 1) if s.kind == SEARCH), None)
    # a column dropped after the search may be one it reads: left out when the release is
    # written, as without a pass
    steps = [
        (i, s, get_step(s.kind))
        for i, s in enumerate(plan.steps, 1)
        if s.kind != SEARCH and not (s.kind == DROP and search is not None and i > search)
    ]
    contexts = {
        i: dataclasses.replace(ctx, row_positions=np.empty(0, np.int64), row_seed=None, state={})
        for i, _, _ in steps
    }
    parts: dict[int, list[dict[str, Any]]] = {i: [] for i, _, _ in steps}
    seconds = dict.fromkeys(parts, 0.0)
    written = {c for _, s, spec in steps for c in spec.columns_written(s.params, plan)}

    def apply(frame: pd.DataFrame, positions: NDArray[np.int64]) -> pd.DataFrame:
        for i, step, spec in steps:
            started = time.perf_counter()
            contexts[i].row_positions = positions
            try:
                done = spec.func(frame, step.params, contexts[i])
            except CoreError as exc:
                raise type(exc)(f"step {i} ({step.kind}): {exc}") from None
            frame = one_type_per_column(done.frame)
            parts[i].append(done.report)
            seconds[i] += time.perf_counter() - started
        for c in written & {str(c) for c in frame.columns}:
            if frame[c].dtype == object:
                frame[c] = (
                    frame[c]
                    .map(lambda v: v if isinstance(v, str) else as_text(v), na_action="ignore")
                    .astype(object)
                )
        return frame

    map_rows(source, apply, out)
    return {
        i: {
            "step": i,
            "kind": step.kind,
            **_merged(spec, parts[i]),
            "seconds": round(seconds[i], 4),
        }
        for i, step, spec in steps
    }


def _merged(spec: StepSpec, parts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A step's report on the whole table from its reports on the parts: the keys it declares
    as ``counts`` added up, every other key the same in every part."""
    out = dict(parts[0]) if parts else {}
    for part in parts[1:]:
        for key, value in part.items():
            if key in spec.counts:
                old = out.get(key)
                if isinstance(value, Mapping):
                    old = old or {}
                    out[key] = {k: old.get(k, 0) + value.get(k, 0) for k in {**old, **value}}
                else:
                    out[key] = (old or 0) + value
            elif out.get(key) != value:
                raise ValueError(
                    f"the {spec.kind} step reported {key!r} differently on two parts of the "
                    "table: a figure of the whole table must be declared among its counts"
                )
    return out


class _HistogramReader:
    """An engine's histograms, each read once (the risk after and the policy ask alike)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.seen: dict[tuple[str, tuple[str, ...], tuple[str, ...]], Histogram] = {}

    def __call__(self, source: Source, qis: Sequence[str], sensitive: Sequence[str]) -> Histogram:
        key = (
            str(source) if not isinstance(source, pd.DataFrame) else str(id(source)),
            tuple(qis),
            tuple(sensitive),
        )
        if key not in self.seen:
            self.seen[key] = self.engine.histogram(source, qis, sensitive)
        return self.seen[key]


def _engine_hierarchies(plan: Plan, hist: Histogram | None) -> dict[str, Any]:
    """The plan's hierarchies; one built from the data is built from the column's distinct
    values, which is the same hierarchy when it maps each value whatever the other rows hold
    (a fixed one). Others would need every row: refused with the reason."""
    out: dict[str, Any] = {}
    for column, spec in plan.hierarchies.items():
        if isinstance(spec, Mapping) and "builder" in spec:
            if not spec_is_fixed(spec):
                raise ParameterError(
                    f"the hierarchy for {column!r} is built from how often each value occurs, "
                    "which an engine does not read: give its bounds (a fixed hierarchy) or use "
                    "the pandas engine"
                )
            if hist is None or column not in hist.labels:
                raise ParameterError(f"hierarchy for {column!r}: the column is not counted")
            values = pd.DataFrame({column: pd.Series(hist.labels[column], name=column)})
            out |= resolve_hierarchies({column: spec}, values)
        else:
            out |= resolve_hierarchies({column: spec})
    return out


def _engine_risk_after(
    read: _HistogramReader,
    out: str,
    plan: Plan,
    kept: list[str],
    models: list[Any],
    model_sensitive: list[str],
) -> tuple[dict[str, Any] | None, Any]:
    """The risk after, from the histogram of the written release (as ``apply_plan`` measures
    it on the table), and the released classes the search's models are checked on again."""
    qis = [q for q in plan.quasi_identifiers if q in kept]
    if not qis:
        return None, None
    sensitive = [s for s in plan.sensitive if s in kept]
    released = read(out, qis, sensitive)
    star = suppressed_records(released.class_frame(), qis)
    suppressed = int(released.class_sizes[star].sum())
    population, size = population_after(models, released.rows - suppressed)
    risk = assess_histogram(released, population_size=size).to_dict()
    if population:
        data, _ = histogram_class_data(released)
        risk["population_models"] = [m.check(data).to_dict() for m in population]
    checks, _ = histogram_class_data(
        read(out, qis, [s for s in dict.fromkeys(model_sensitive) if s in kept])
    )
    return risk, checks
