"""The evidence beside a release an engine wrote out of core, under the keys
:func:`~anonweb.core.release.make.make_release` gives it in memory: ``attacks``,
``reconstruction``, ``conflicts`` and ``lineage``, each computed at scale or stating that it was
not run and why (never left out, so that no reader takes a missing check for a passed one).

* **Attacks**: the same attacks (:func:`~anonweb.core.attacks.run.run_attacks`) on a seeded
  random sample of the source's records (the targets and the singling-out group are drawn from
  it, as they are drawn from the whole table in memory), against the release's distinct
  combinations over the attacked columns counted by the engine, with each numeric column's
  tolerance a share of its range over every row. Where the engine kept the release's lineage,
  DuckDB reads each sampled record with its own released row (the lineage joined to the
  release), so a person counts as linked when the row picked is theirs, however far noise moved
  it, as in memory; without a lineage (a CSV source on DuckDB) only a row agreeing with them on
  every attacked column counts, which misses those links. No control is held out (the release
  holds every record).
* **Reconstruction**: from the aggregates the releases publish. An engine publishes none; an
  earlier release's aggregates would be solved against every record's values in memory, so
  with any of them the reconstruction is not run, and says so.
* **Conflicts**: the check against the earlier live releases, run out of core
  (:mod:`anonweb.core.conflicts.engine_check`): DuckDB joins this release's records with each
  earlier record-level release's (made by an engine or in memory) by their lineage and counts
  the joined classes; the findings are decided and worded by the in-memory check's own
  functions, and become the gate's findings as in memory. Not out of core, and blocking the
  release (:func:`conflicts_unchecked`, naming the kind) until it is made in memory or the
  earlier releases are withdrawn: exact inference and differencing, when an earlier live
  release publishes aggregates (they are solved against every record's values in memory); an
  earlier release whose lineage cannot be read; and a release whose lineage the engine did not
  keep (a CSV source on DuckDB). Differentially private releases are left out, as in memory.
* **Intruder**: the maximum-knowledge intruder check on perturbed numeric columns, each
  source record paired with its released row through the lineage by DuckDB and the pairs
  counted by the engine, so the figures are the in-memory check's for the same draws; not run,
  and said so, where the engine kept no lineage.
* **Lineage**: the records written, whether the source row of each was kept (privately, in a
  Parquet file beside the release: :mod:`anonweb.core.engine.lineage`), the plan's and the
  files' SHA-256, so the release can be traced to the exact plan and source it was made from.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Callable, Mapping, Sequence
from itertools import count
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.assessment.intruder_engine import intruder_check_of_release
from anonweb.core.attacks.matching import is_numeric
from anonweb.core.attacks.options import AttackOptions
from anonweb.core.attacks.records import Combos
from anonweb.core.attacks.run import DEFAULT_TARGETS, NO_CONTROL, SINGLING_OUT_GROUP, run_attacks
from anonweb.core.conflicts.engine_check import (
    NotOutOfCore,
    TableRelease,
    engine_release_conflicts,
)
from anonweb.core.conflicts.release import NEW_LABEL, ConflictCheck, EarlierRelease
from anonweb.core.engine.base import Engine, Source, fresh_name, sample_positions, source_format
from anonweb.core.engine.duckdb_engine import DuckDBEngine, quote
from anonweb.core.findings import BLOCK, Finding

_registered = count()

NO_LINEAGE = (
    "The engine kept no lineage for this release, so the attacks do not know which released "
    "row is a person's own: a person counts as linked only when the row picked agrees with "
    "them on every attacked column, which misses links to a row of their own that a "
    "perturbation moved (fewer successes than the lineage would count)."
)
WITH_LINEAGE = (
    "Each sampled person's own released row was read through the release's lineage: a person "
    "counts as linked when the row picked is theirs or agrees with them on every attacked "
    "column, as in memory."
)
NO_SOURCE_ROWS = (
    "Which source row each released row is was not kept (the engine numbers the rows of "
    "Parquet files and tables only): later releases cannot be checked against this one."
)
CONTROL_NOT_HELD = (
    "The plan asks for a control held out, which an engine does not do (it writes every record "
    "of the table): the attacks ran without one."
)
RECONSTRUCTION_NOT_RUN = (
    "Not run: earlier releases of this source publish aggregates, which are solved against "
    "every record's values in memory; an engine release does not read them. Make the release "
    "in memory (the pandas engine) for this check."
)
CONFLICTS_NOT_RUN = (
    "Not run out of core: {reason}. Make the release in memory (the pandas engine), or "
    "withdraw the earlier releases, for this check."
)
NO_LINEAGE_KEPT = (
    "the check joins the releases' records by which source row each one is, and this engine "
    "kept no lineage for the release"
)


INTRUDER_NOT_RUN = (
    "Not run: the maximum-knowledge intruder pairs each original record with its perturbed "
    "one, which the engine did not keep for this release (it numbers the rows of Parquet "
    "files only). Make the release in memory (the pandas engine), or from a Parquet copy of "
    "the table, for this check."
)


def engine_intruder(
    columns: Sequence[str],
    *,
    engine: Engine,
    duckdb: Callable[[], DuckDBEngine],
    source: Source,
    released: str,
    lineage: str | None,
    rng: np.random.Generator,
    min_rows: int,
) -> dict[str, Any] | None:
    """The intruder check on the numeric ``columns`` the plan perturbed (None when it
    perturbed none, or the table is too small, as in memory): each source record paired with
    its released row through the release's ``lineage`` and counted by ``engine``
    (:func:`~anonweb.core.assessment.intruder_engine.intruder_check_of_release`), or not run
    and why when the engine kept no lineage."""
    if not columns:
        return None
    if lineage is None or source_format(source) == "csv":
        return {"columns": list(columns), "skipped": INTRUDER_NOT_RUN}
    duck = duckdb()
    numeric = set(duck.numeric_columns(source, columns)) & set(
        duck.numeric_columns(released, columns)
    )
    columns = [c for c in columns if c in numeric]
    if not columns or duck.row_count(released) < min_rows:
        return None
    with tempfile.TemporaryDirectory(prefix=".intruder-", dir=Path(released).parent) as work:
        result = intruder_check_of_release(
            engine, duck, source, released, lineage, columns=columns, rng=rng, workdir=work
        )
    return result.to_dict()


def engine_attacks(
    engine: Engine,
    source: Source,
    released: str,
    *,
    known: Sequence[str],
    sensitive: Sequence[str],
    kept: Sequence[str],
    options: AttackOptions | None,
    rng: np.random.Generator,
    lineage: str | None = None,
    duckdb: Callable[[], DuckDBEngine] | None = None,
) -> dict[str, Any]:
    """The attack figures of a release an engine wrote to ``released`` from ``source``; with
    its ``lineage`` file, each sampled person's own released row is read by the DuckDB engine
    ``duckdb()`` gives (:func:`sample_with_own_rows`)."""
    shared = set(engine.columns(source)) & set(kept)
    known = [c for c in dict.fromkeys(known) if c in shared]
    sensitive = [c for c in dict.fromkeys(sensitive) if c in shared and c not in known]
    if not known:
        return {
            "skipped": "no column the attacker would know (the quasi-identifiers, or the plan's "
            "'attacks' known columns) is in the release"
        }
    cols = [*known, *sensitive]
    hist = engine.histogram(released, cols)
    if hist.rows == 0:
        return {"skipped": "the release has no rows"}
    combos = Combos(
        pd.DataFrame({c: hist.column(c) for c in cols}, columns=cols),
        np.asarray(hist.counts, dtype=np.int64),
        np.empty(0, dtype=np.int64),
    )
    targets = options.targets if options else DEFAULT_TARGETS
    size = max(targets, SINGLING_OUT_GROUP)
    rows = engine.row_count(source)
    seed = int(rng.integers(0, 2**63))
    own = None
    if lineage is not None and duckdb is not None and source_format(source) != "csv":
        # a CSV source's rows are not numbered (its lineage numbers the row-wise pass's output)
        sample, theirs = sample_with_own_rows(
            duckdb(), source, released, lineage, cols, sample_positions(rows, size, seed)
        )
        own = own_combinations(combos.frame, theirs)
    else:
        sample = engine.sample_rows(source, cols, size, seed)
    numeric = [c for c in cols if is_numeric(sample[c])]
    ranges = engine.ranges(source, numeric) if numeric else {}
    report = run_attacks(
        sample,
        combos,
        known=known,
        sensitive=sensitive,
        targets=targets,
        rng=rng,
        ranges=ranges,
        own=own,
    )
    out = report.to_dict()
    out["control_records"] = 0
    out["note"] = NO_CONTROL
    out["sample"] = {"records": len(sample), "of": rows}
    out["lineage"] = NO_LINEAGE if own is None else WITH_LINEAGE
    if options is not None and options.holdout > 0:
        out["control"] = CONTROL_NOT_HELD
    return out


def sample_with_own_rows(
    duck: DuckDBEngine,
    source: Source,
    released: str,
    lineage: str,
    columns: Sequence[str],
    positions: NDArray[np.int64],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The source's records at ``positions`` (sorted) over ``columns``, and each one's own row
    of the release (the row whose lineage names it; all missing for a record the release does
    not hold), row for row: DuckDB joins the source, numbered as the engines' lineage numbers
    it, with the release and its lineage file, out of core."""
    cols = list(columns)
    names = duck.columns(source)
    row = fresh_name("__row", names)
    picked = f"anonweb_attack_rows_{next(_registered)}"
    duck.con.register(picked, pd.DataFrame({"pos": np.asarray(positions, dtype=np.int64)}))
    mine = ", ".join(f"s.{quote(c)} AS s{i}" for i, c in enumerate(cols))
    theirs = ", ".join(f"o.r{i}" for i in range(len(cols)))
    inner = ", ".join(f"r.{quote(c)} AS r{i}" for i, c in enumerate(cols))
    rel, src = duck.released_with_sources(released, lineage)
    try:
        table = duck.con.sql(
            f"SELECT {mine}, {theirs} FROM {picked} AS p "
            f"JOIN {duck.numbered(source, row)} AS s ON s.{quote(row)} = p.pos "
            f"LEFT JOIN (SELECT r.{quote(src)} AS src, {inner} FROM {rel} AS r) AS o "
            "ON o.src = p.pos ORDER BY p.pos"
        ).to_arrow_table()
    finally:
        duck.con.unregister(picked)
    frame = table.to_pandas()
    sample = frame.iloc[:, : len(cols)].set_axis(cols, axis=1)
    own = frame.iloc[:, len(cols) :].set_axis(cols, axis=1)
    return sample, own


def own_combinations(combos: pd.DataFrame, own: pd.DataFrame) -> NDArray[np.int64]:
    """The position in ``combos`` (the release's distinct rows, as the engine counted them) of
    each row of ``own`` (-1 for none): values compared as numbers where both sides hold
    numbers, else as text, a missing value matching a missing one."""
    cols = list(combos.columns)

    def keys(frame: pd.DataFrame, other: pd.DataFrame) -> pd.DataFrame:
        out = {}
        for c in cols:
            numeric = is_numeric(frame[c]) and is_numeric(other[c])
            v = frame[c].astype(float) if numeric else frame[c].astype(object)
            out[c] = v.where(v.notna(), None).astype(str) if not numeric else v
        return pd.DataFrame(out)

    table = keys(combos, own).assign(__combo=np.arange(len(combos), dtype=np.int64))
    found = keys(own, combos).reset_index(drop=True).merge(table, on=cols, how="left")
    combo: NDArray[np.int64] = found["__combo"].fillna(-1).to_numpy(dtype=np.int64)
    return combo


def engine_reconstruction(earlier: Sequence[EarlierRelease]) -> dict[str, Any]:
    """The reconstruction from the aggregates of every live release of the source, when none
    of them publishes any (an engine release publishes none); otherwise not run, and why."""
    published = [e.label for e in earlier if e.aggregates or e.error is not None]
    if published:
        return {
            "determined": None,
            "releases": published,
            "columns": [],
            "skipped": RECONSTRUCTION_NOT_RUN,
            "sentence": RECONSTRUCTION_NOT_RUN,
        }
    return {
        "determined": 0,
        "releases": [],
        "columns": [],
        "sentence": "No release of this source publishes aggregates: nothing to reconstruct.",
    }


def engine_conflicts(
    earlier: Sequence[EarlierRelease],
    *,
    new: TableRelease | None,
    connect: Callable[[], Any],
    source_rows: int,
    source_columns: Sequence[str],
    quasi_identifiers: Sequence[str],
    sensitive: Sequence[str],
    k: int | None,
    l: int | None,  # noqa: E741 (the literature's letter)
) -> tuple[dict[str, Any], ConflictCheck | None]:
    """The check of the release ``new`` (its file and lineage file, or None when the engine
    kept no lineage) against the ``earlier`` live releases, counted out of core
    (:func:`~anonweb.core.conflicts.engine_check.engine_release_conflicts` on the DuckDB
    connection ``connect()`` gives): the report's entry (counts only) and the check, or why it
    was not run (:data:`CONFLICTS_NOT_RUN`, the check None)."""
    if not earlier:
        nothing = ConflictCheck(ids={NEW_LABEL: None}, statuses={NEW_LABEL: "new"})
        return {"run": True, "checked": [], "findings": {}, "note": "no earlier live release"}, (
            nothing
        )
    reason = NO_LINEAGE_KEPT
    if new is not None:
        try:
            check = engine_release_conflicts(
                connect(),
                new,
                earlier=earlier,
                source_rows=source_rows,
                source_columns=source_columns,
                quasi_identifiers=quasi_identifiers,
                sensitive=sensitive,
                k=k,
                l=l,
            )
        except NotOutOfCore as why:
            reason = str(why)
        else:
            return {
                "run": True,
                **check.summary(),
                "out_of_core": True,
                "notes": check.notes,
            }, check
    return {
        "run": False,
        "checked": [],
        "earlier": [e.label for e in earlier],
        "findings": {},
        "reason": CONFLICTS_NOT_RUN.format(reason=reason),
    }, None


def conflicts_unchecked(conflicts: Mapping[str, Any], *, engine: str) -> list[Finding]:
    """The gate's ``block`` when the conflict check was not run against earlier releases."""
    if conflicts.get("run", True):
        return []
    earlier = list(conflicts.get("earlier") or [])
    return [
        Finding(
            "conflicts_unchecked",
            BLOCK,
            f"This release, written by the {engine} engine, was not checked for conflicts with "
            f"{len(earlier)} earlier live release(s) of its source ({', '.join(earlier)}). "
            + str(conflicts.get("reason") or CONFLICTS_NOT_RUN.format(reason=NO_LINEAGE_KEPT)),
            facts={"engine": engine, "releases": earlier},
        )
    ]


def engine_lineage(
    *, source: Source, released: str, plan: Mapping[str, Any], rows: int, kept: bool
) -> dict[str, Any]:
    """The lineage of an engine release in counts and digests: the records written (each the
    source's), whether which source row each one is was ``kept`` (privately, beside the
    release), the SHA-256 of the plan, of the source's file(s) and of the written release."""
    plan_text = json.dumps(plan, sort_keys=True, separators=(",", ":"), default=str)
    return {
        "records": rows,
        "dp": False,
        "aggregates": [],
        "source_rows": "kept privately" if kept else None,
        **({} if kept else {"source_rows_note": NO_SOURCE_ROWS}),
        "plan_sha256": hashlib.sha256(plan_text.encode()).hexdigest(),
        "source_sha256": files_sha256(source),
        "release_sha256": files_sha256(released),
    }


def files_sha256(source: Source) -> str:
    """SHA-256 of a file, of a folder of files (each name and content, in name order), or of a
    table in memory (its values, by pandas' row hashes)."""
    digest = hashlib.sha256()
    if isinstance(source, pd.DataFrame):
        digest.update(pd.util.hash_pandas_object(source, index=False).to_numpy().tobytes())
        return digest.hexdigest()
    path = Path(source)
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for f in files:
        if path.is_dir():
            digest.update(str(f.relative_to(path)).encode() + b"\0")
        with f.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
    return digest.hexdigest()
