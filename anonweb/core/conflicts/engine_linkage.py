"""Counting what :mod:`.linkage` decides on, out of core: two record-level releases joined by
their lineage in DuckDB (see :mod:`.engine_check` for the check of a release against the earlier
ones).

Each release becomes a DuckDB table of its rows with their source row, position, class (on the
quasi-identifiers it shows) and class size. A pair's shared records (the join on the source row)
are read as :func:`~.linkage.find_join` reads them (the same order, or shared columns whose cells
agree and single records out), and counted per joined class (a class in each release, and whether
its records are joined one to one): its size and its two classes' sizes alone, the distinct
sensitive values the join shows, and for releases that cannot be joined the values both classes
hold. :func:`~.linkage.below_k` and :func:`~.linkage.below_l` decide on those counts, the records
of the classes found are read back, and :func:`~.linkage.k_finding`,
:func:`~.linkage.linked_l_finding` and :func:`~.linkage.composition_finding` word the findings.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from itertools import count
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.conflicts.engine_cells import (
    Cells,
    file_cells,
    frame_cells,
    missing_sql,
    promoted,
    stamp_formats,
    text_sql,
    value_sql,
)
from anonweb.core.conflicts.findings import Finding
from anonweb.core.conflicts.linkage import (
    AGREEMENT,
    MIN_ORDERED,
    Join,
    below_k,
    below_l,
    composition_finding,
    k_finding,
    linked_l_finding,
)
from anonweb.core.engine.base import fresh_name
from anonweb.core.engine.duckdb_engine import as_pandas_reads, numbered_parquet
from anonweb.core.engine.lineage import LINEAGE_COLUMN

_ids = count()


@dataclass(frozen=True)
class TableRelease:
    """A record-level release as the check reads it out of core: ``table`` its published rows
    (a Parquet file, or a table in memory) and ``rows`` its lineage (a Parquet file of
    :data:`LINEAGE_COLUMN`, or an array: the source row of each row of ``table``)."""

    label: str
    table: str | Path | pd.DataFrame
    rows: str | Path | NDArray[Any]
    quasi_identifiers: tuple[str, ...] = ()


@dataclass(frozen=True)
class Own:
    """The names of the columns the check gives a release's table: each row's source row,
    its position in the release, its class and that class's size. Apart from the release's
    columns (:func:`own_names`): a released column of one of these names would be read in
    their place, and the counts would be of the wrong column."""

    row: str = "__row"
    pos: str = "__pos"
    c: str = "__c"
    n: str = "__n"


def own_names(columns: Sequence[str]) -> Own:
    taken = [str(c) for c in columns]
    names = []
    for name in ("__row", "__pos", "__c", "__n"):
        names.append(fresh_name(name, taken))
        taken.append(names[-1])
    return Own(*names)


@dataclass(frozen=True)
class _Loaded:
    """A release as a DuckDB table ``name``: the published ``columns`` and the check's own
    (``own``: source row, position in the release, class on ``qis``, its size)."""

    label: str
    name: str
    columns: tuple[str, ...]
    qis: tuple[str, ...]
    types: Mapping[str, str]
    own: Own
    cells: Mapping[str, Cells]  # how the in-memory check reads each column

    def text(self, column: str, alias: str = "", *, beside: Cells | None = None) -> str:
        """SQL of a cell of ``column`` as the in-memory check writes it (alias-qualified);
        ``beside``: the other release's column, when the check puts the two together."""
        p = f"{alias}." if alias else ""
        cells = self.cells[column]
        written = f"{p}{q(cells.written)}" if cells.written is not None else None
        return text_sql(cells, f"{p}{q(column)}", written, beside=beside)

    def value(self, column: str, alias: str = "", *, as_float: bool = False) -> str:
        """SQL of a cell of ``column`` as the in-memory check codes sensitive values."""
        p = f"{alias}." if alias else ""
        cells = self.cells[column]
        valued = f"{p}{q(cells.valued)}" if cells.valued is not None else None
        return value_sql(cells, f"{p}{q(column)}", valued, as_float=as_float)

    def missing(self, column: str, alias: str = "") -> str:
        return missing_sql(self.cells[column], f"{alias}.{q(column)}" if alias else q(column))


def q(name: str) -> str:
    """A column name as a SQL identifier."""
    return '"' + str(name).replace('"', '""') + '"'


def literal(text: str) -> str:
    return "'" + str(text).replace("'", "''") + "'"


def scalar(con: Any, sql: str) -> Any:
    rows = con.execute(sql).fetchall()
    return rows[0][0] if rows else None


def relation(
    con: Any,
    source: str | Path | pd.DataFrame | NDArray[Any],
    column: str | None,
    own: Own = Own(),  # noqa: B008 (frozen)
) -> tuple[str, bool]:
    """A SQL relation of ``source`` with ``own.pos``, each row's position (and, for a
    lineage, only ``column`` as ``own.row``), and whether DuckDB must keep the order it reads
    rows in for those positions (see :func:`~anonweb.core.engine.duckdb_engine.numbered_parquet`).
    A table in memory is registered under the name returned (unregister it once read)."""
    if isinstance(source, pd.DataFrame | np.ndarray):
        frame = (
            pd.DataFrame({own.row: np.asarray(source, dtype=np.int64)})
            if isinstance(source, np.ndarray)
            else source.reset_index(drop=True)
        )
        name = f"anonweb_conflict_in_{next(_ids)}"
        con.register(name, frame.assign(**{own.pos: np.arange(len(frame), dtype=np.int64)}))
        return name, False
    read = f"read_parquet({literal(str(source))})"
    names = [str(r[0]) for r in con.execute(f"DESCRIBE SELECT * FROM {read}").fetchall()]
    numbered, ordered = numbered_parquet([str(source)], own.pos, names)
    numbered = as_pandas_reads(con, numbered)  # a NaN is the missing value, as pandas reads it
    if column is not None:
        return f"(SELECT {q(column)} AS {q(own.row)}, {q(own.pos)} FROM {numbered})", ordered
    return numbered, ordered


@contextmanager
def in_order(con: Any, ordered: bool) -> Iterator[None]:
    """DuckDB keeping the order it reads rows in while ``ordered`` (rows numbered so)."""
    if not ordered:
        yield
        return
    before = scalar(con, "SELECT current_setting('preserve_insertion_order')")
    con.execute("SET preserve_insertion_order = true")
    try:
        yield
    finally:
        con.execute(f"SET preserve_insertion_order = {'true' if before else 'false'}")


class NotOutOfCore(Exception):
    """A part of the check that cannot run out of core: the message names it and why."""


def load(con: Any, release: TableRelease, qis: Sequence[str]) -> _Loaded:
    name = f"anonweb_conflict_{next(_ids)}"
    columns_of = (
        list(release.table.columns)
        if isinstance(release.table, pd.DataFrame)
        else [str(r[0]) for r in con.execute(
            f"DESCRIBE SELECT * FROM read_parquet({literal(str(release.table))})"
        ).fetchall()]
    )  # fmt: skip
    own = own_names([str(c) for c in columns_of])
    row, pos, c, n = q(own.row), q(own.pos), q(own.c), q(own.n)
    table = release.table
    cells: dict[str, Cells] = {}
    if isinstance(table, pd.DataFrame):
        table, cells = frame_cells(table, [own.row, own.pos, own.c, own.n])
    published, ordered = relation(con, table, None, own)
    lineage, lineage_ordered = relation(con, release.rows, LINEAGE_COLUMN, own)
    described = con.execute(f"DESCRIBE SELECT * FROM {published}").fetchall()
    added = {own.pos, *(x.written for x in cells.values()), *(x.valued for x in cells.values())}
    types = {str(r[0]): str(r[1]) for r in described if str(r[0]) not in added}
    if not isinstance(table, pd.DataFrame):
        cells = file_cells(con, str(table), types)
    else:  # a table in memory's timestamps, formatted as a file's
        stamps = stamp_formats(
            con, published, [c for c, x in cells.items() if x.kind == "stamp" and x.zone is None]
        )
        cells |= {c: replace(cells[c], stamp=f) for c, f in stamps.items()}
    columns = tuple(types)
    shown = tuple(col for col in qis if col in types)
    joined = f"SELECT l.{row}, p.* FROM {published} AS p JOIN {lineage} AS l ON p.{pos} = l.{pos}"
    with in_order(con, ordered or lineage_ordered):
        if shown:
            # each class numbered once (a table of the classes, not a sort of the rows), with
            # its size; each row finds its class by its values, a missing value matching one
            keys = ", ".join(q(col) for col in shown)
            on = " AND ".join(f"r.{q(col)} IS NOT DISTINCT FROM k.{q(col)}" for col in shown)
            con.execute(
                f"CREATE OR REPLACE TEMP TABLE {name}_classes AS SELECT {keys}, "
                f"row_number() OVER () AS {c}, {n} FROM (SELECT {keys}, count(*) AS {n} "
                f"FROM {published} GROUP BY ALL)"
            )
            con.execute(
                f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT r.*, k.{c}, k.{n} "
                f"FROM ({joined}) AS r JOIN {name}_classes AS k ON {on}"
            )
            con.execute(f"DROP TABLE {name}_classes")
        else:
            con.execute(
                f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT *, 1 AS {c}, "
                f"count(*) OVER () AS {n} FROM ({joined})"
            )
    for view in (published, lineage):
        if view.startswith("anonweb_conflict_in_"):
            con.unregister(view)
    return _Loaded(release.label, name, columns, shown, types, own, cells)


def drop_tables(con: Any, *names: str) -> None:
    for name in names:
        con.execute(f"DROP TABLE IF EXISTS {name}")


def _distinct(c: str) -> str:
    """Distinct values of the SQL expression ``c`` (a quoted column) in a group, a missing
    value counted as one (as the privacy models count them)."""
    return f"(count(DISTINCT {c}) + max(CASE WHEN {c} IS NULL THEN 1 ELSE 0 END))"


def _values(t: _Loaded, other: _Loaded, s: str, alias: str = "") -> str:
    """SQL of ``t``'s values of ``s`` as the in-memory check codes them beside ``other``'s
    (:func:`~.linkage._released_codes`: the two columns put together; alone if ``other``
    has no such column)."""
    both = s in other.columns
    return t.value(s, alias, as_float=both and promoted(t.cells[s], other.cells[s]))


def _same(a: _Loaded, b: _Loaded, c: str) -> str:
    """Whether a shared record's cells of ``c`` agree as :func:`~.linkage._agreement` decides:
    equal texts, or both missing (integers never missing compared as they are)."""
    if a.cells[c].kind == b.cells[c].kind == "int":
        return f"(x.{q(c)} = y.{q(c)})"
    texts = f"{a.text(c, 'x')} = {b.text(c, 'y')}"
    return f"(({texts}) OR ({a.missing(c, 'x')} AND {b.missing(c, 'y')}))"


def _on_shared(con: Any, a: _Loaded, b: _Loaded) -> tuple[_Loaded, _Loaded]:
    """``a`` and ``b`` as the check writes their shared records' cells to compare them: it
    writes the shared records of each column alone, so a column of timestamps takes the format
    those records' values need (:func:`~.engine_cells.stamp_formats`), not the whole column's."""
    out = []
    for t, alias in ((a, "x"), (b, "y")):
        stamps = [
            c for c in _common(a, b) if t.cells[c].kind == "stamp" and t.cells[c].zone is None
        ]
        if not stamps:
            out.append(t)
            continue
        picked = ", ".join(f"{alias}.{q(c)} AS {q(c)}" for c in stamps)
        rel = (
            f"(SELECT {picked} FROM {a.name} AS x JOIN {b.name} AS y "
            f"ON x.{q(a.own.row)} = y.{q(b.own.row)})"
        )
        formats = stamp_formats(con, rel, stamps)
        cells = {**t.cells, **{c: replace(t.cells[c], stamp=f) for c, f in formats.items()}}
        out.append(replace(t, cells=cells))
    return out[0], out[1]


def _frame(con: Any, sql: str) -> pd.DataFrame:
    return pd.DataFrame(con.execute(sql).fetchdf())


def _records(con: Any, shared: str, cells: pd.DataFrame, keys: Sequence[str]) -> tuple[int, ...]:
    """The source rows, ascending, of the shared records in ``cells`` (matched on ``keys``)."""
    name = f"anonweb_conflict_hits_{next(_ids)}"
    con.register(name, cells[list(keys)].reset_index(drop=True))
    try:
        on = " AND ".join(f"s.{k} = h.{k}" for k in keys)
        rows = con.execute(
            f"SELECT s.row FROM {shared} AS s JOIN {name} AS h ON {on} ORDER BY s.row"
        ).fetchnumpy()["row"]
    finally:
        con.unregister(name)
    return tuple(int(r) for r in rows)


def _common(a: _Loaded, b: _Loaded) -> list[str]:
    """The published columns both releases have, in ``a``'s order."""
    return [c for c in a.columns if c in b.columns]


def _find_join(con: Any, a: _Loaded, b: _Loaded, shared: str, n: int) -> Join | None:
    """How ``a`` and ``b`` join (:func:`~.linkage.find_join`, counted in the engine); the
    shared table gets ``lk``, whether each shared record is joined one to one."""
    if n >= MIN_ORDERED:
        down = scalar(
            con,
            f"SELECT count(*) FROM (SELECT pb < lag(pb) OVER (ORDER BY pa) AS down "
            f"FROM {shared}) WHERE down",
        )
        if int(down) == 0:
            con.execute(f"ALTER TABLE {shared} ADD COLUMN lk BOOLEAN DEFAULT true")
            return Join("row order", (), np.ones(0, dtype=bool))
    common = _common(a, b)
    agreeing: list[str] = []
    if common:
        same = ", ".join(
            f"avg(CASE WHEN __same{i} THEN 1.0 ELSE 0.0 END)" for i in range(len(common))
        )
        (row,) = con.execute(f"SELECT {same} FROM {shared}").fetchall()
        agreeing = [c for c, share in zip(common, row, strict=True) if share >= AGREEMENT]
    linked = _linked(con, a, b, agreeing) if agreeing else 0
    if not linked:
        con.execute(f"ALTER TABLE {shared} ADD COLUMN lk BOOLEAN DEFAULT false")
        return None
    alone = [c for c in agreeing if len(agreeing) > 1 and _linked(con, a, b, [c])]
    _linked(con, a, b, agreeing, into=shared)
    return Join("columns", tuple(alone or agreeing), np.ones(0, dtype=bool))


def _linked(
    con: Any, a: _Loaded, b: _Loaded, columns: Sequence[str], *, into: str | None = None
) -> int:
    """Shared records whose values in ``columns`` (as text: the text of the two releases'
    columns put together, as :func:`~.linkage._linked` writes them) occur once in each release
    and agree; with ``into``, that table's ``lk`` marks them."""

    def counted(t: _Loaded) -> str:
        other = b if t is a else a
        keys = [t.text(c, beside=other.cells[c]) for c in columns]
        part = ", ".join(keys)
        named = ", ".join(f"{k} AS __k{i}" for i, k in enumerate(keys))
        return (
            f"(SELECT {q(t.own.row)} AS __row, {named}, count(*) OVER (PARTITION BY {part}) "
            f"AS __m FROM {t.name})"
        )

    same = " AND ".join(f"x.__k{i} = y.__k{i}" for i in range(len(columns)))
    linked = (
        f"SELECT x.__row FROM {counted(a)} AS x JOIN {counted(b)} AS y ON x.__row = y.__row "
        f"WHERE x.__m = 1 AND y.__m = 1 AND {same}"
    )
    if into is None:
        return int(scalar(con, f"SELECT count(*) FROM ({linked})"))
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {into} AS SELECT s.*, (l.__row IS NOT NULL) AS lk "
        f"FROM {into} AS s LEFT JOIN ({linked}) AS l ON s.row = l.__row"
    )
    return 1


def pair_findings_out_of_core(
    con: Any,
    a: _Loaded,
    b: _Loaded,
    *,
    sensitive: Sequence[str],
    k: int | None,
    l: int | None,  # noqa: E741 (the literature's letter)
    unlinked_k: bool,
) -> list[Finding]:
    """:func:`~.linkage.pair_findings` of two loaded releases, counted by DuckDB."""
    if not a.qis or not b.qis:
        return []
    shared = f"anonweb_conflict_shared_{next(_ids)}"
    # each shared column's cells compared in the same pass, as the in-memory check compares
    # them (each release's text of its cell, or both missing), for whether it joins them
    sa, sb = _on_shared(con, a, b)
    values = ", ".join(
        [f"{_values(a, b, s, 'x')} AS __va{i}" for i, s in enumerate(sensitive) if s in a.columns]
        + [f"{_values(b, a, s, 'y')} AS __vb{i}" for i, s in enumerate(sensitive) if s in b.columns]
        + [f"{_same(sa, sb, c)} AS __same{i}" for i, c in enumerate(_common(a, b))]
    )
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {shared} AS SELECT x.{q(a.own.row)} AS row, "
        f"x.{q(a.own.pos)} AS pa, y.{q(b.own.pos)} AS pb, x.{q(a.own.c)} AS ca, "
        f"y.{q(b.own.c)} AS cb, x.{q(a.own.n)} AS na, y.{q(b.own.n)} AS nb"
        f"{', ' + values if values else ''} FROM {a.name} AS x JOIN {b.name} AS y "
        f"ON x.{q(a.own.row)} = y.{q(b.own.row)}"
    )
    try:
        n = int(scalar(con, f"SELECT count(*) FROM {shared}"))
        if not n:
            return []
        join = _find_join(con, a, b, shared, n)
        labels = (a.label, b.label)
        out: list[Finding] = []
        if k is not None:
            cells = _frame(
                con,
                f"SELECT ca, cb, lk, sum(count(*)) OVER (PARTITION BY ca, cb) AS joint, "
                f"any_value(na) AS na, any_value(nb) AS nb FROM {shared} GROUP BY ca, cb, lk",
            )
            small = below_k(cells["joint"].to_numpy(), cells["na"], cells["nb"], k)
            hit = small & cells["lk"].to_numpy(dtype=bool)
            if join is not None and hit.any():
                found = cells[hit]
                records = _records(con, shared, found, ("ca", "cb", "lk"))
                out.append(
                    k_finding("linkage", records, int(found["joint"].min()), k, labels, join)
                )
            elif unlinked_k and join is None and small.any():
                found = cells[small]
                records = _records(con, shared, found, ("ca", "cb", "lk"))
                smallest = int(found["joint"].min())
                out.append(k_finding("intersection", records, smallest, k, labels, None))
        l_min = 2 if l is None else l
        for i, s in enumerate(sensitive):
            if join is not None:
                f = _linked_l(con, a, b, s, i, shared, join, l_min)
            else:
                f = _composition(con, a, b, s, shared, l_min)
            if f is not None:
                out.append(f)
        return out
    finally:
        drop_tables(con, shared)


def _alone(con: Any, t: _Loaded, s: str, other: _Loaded | None = None) -> str:
    """Distinct values of ``s`` in each class of ``t`` alone (over all its rows), coded beside
    ``other``'s (:func:`_values`) or alone."""
    c = q(t.own.c)
    v = _values(t, other, s) if other is not None else t.value(s)
    return f"(SELECT {c} AS __c, {_distinct(v)} AS d FROM {t.name} GROUP BY {c})"


def _linked_l(
    con: Any, a: _Loaded, b: _Loaded, s: str, i: int, shared: str, join: Join, l_min: int
) -> Finding | None:
    has_a, has_b = s in a.columns, s in b.columns
    if not (has_a or has_b):
        return None
    # Joined, the attacker sees the released values of both rows; take A's where it has them.
    value = f"__va{i}" if has_a else f"__vb{i}"
    cells = _frame(
        con,
        f"WITH j AS (SELECT ca, cb, {_distinct(value)} AS dj FROM {shared} GROUP BY ca, cb), "
        f"c AS (SELECT DISTINCT ca, cb, lk FROM {shared}) "
        f"SELECT c.ca, c.cb, c.lk, j.dj"
        + (", da.d AS da" if has_a else "")
        + (", db.d AS db" if has_b else "")
        + " FROM c JOIN j ON c.ca = j.ca AND c.cb = j.cb"
        + (f" JOIN {_alone(con, a, s, b)} AS da ON da.__c = c.ca" if has_a else "")
        + (f" JOIN {_alone(con, b, s, a)} AS db ON db.__c = c.cb" if has_b else ""),
    )
    alone_ok = np.ones(len(cells), dtype=bool)
    if has_a:
        alone_ok &= cells["da"].to_numpy() >= l_min
    if has_b:
        alone_ok &= cells["db"].to_numpy() >= l_min
    hit = below_l(cells["dj"].to_numpy(), alone_ok, l_min) & cells["lk"].to_numpy(dtype=bool)
    if not hit.any():
        return None
    found = cells[hit]
    records = _records(con, shared, found, ("ca", "cb", "lk"))
    return linked_l_finding((a.label, b.label), s, records, l_min, int(found["dj"].min()), join)


def _composition(
    con: Any, a: _Loaded, b: _Loaded, s: str, shared: str, l_min: int
) -> Finding | None:
    if s not in a.columns or s not in b.columns:
        return None
    va, vb = _values(a, b, s), _values(b, a, s)
    cells = _frame(
        con,
        f"WITH p AS (SELECT DISTINCT ca, cb FROM {shared}), "
        f"va AS (SELECT DISTINCT {q(a.own.c)} AS ca, {va} AS v FROM {a.name}), "
        f"vb AS (SELECT DISTINCT {q(b.own.c)} AS cb, {vb} AS v FROM {b.name}), "
        "common AS (SELECT p.ca, p.cb, count(*) AS n FROM p JOIN va ON va.ca = p.ca "
        "JOIN vb ON vb.cb = p.cb AND vb.v IS NOT DISTINCT FROM va.v GROUP BY p.ca, p.cb) "
        "SELECT p.ca, p.cb, coalesce(common.n, 0) AS common, da.d AS da, db.d AS db FROM p "
        "LEFT JOIN common ON common.ca = p.ca AND common.cb = p.cb "
        f"JOIN {_alone(con, a, s, b)} AS da ON da.__c = p.ca "
        f"JOIN {_alone(con, b, s, a)} AS db ON db.__c = p.cb",
    )
    alone_ok = (cells["da"].to_numpy() >= l_min) & (cells["db"].to_numpy() >= l_min)
    hit = below_l(cells["common"].to_numpy(), alone_ok, l_min)
    if not hit.any():
        return None
    found = cells[hit]
    records = _records(con, shared, found, ("ca", "cb"))
    return composition_finding((a.label, b.label), s, records, l_min, int(found["common"].min()))


def l_alone(con: Any, t: _Loaded, sensitive: Sequence[str]) -> dict[tuple[str, str], int]:
    """Distinct l of a release alone per sensitive column it shows (its fewest values in a
    class), as the in-memory check gives it."""
    out: dict[tuple[str, str], int] = {}
    if not t.qis:
        return out
    for s in sensitive:
        if s in t.columns and s not in t.qis:
            least = scalar(con, f"SELECT min(d) FROM {_alone(con, t, s)}")
            if least is not None:
                out[(t.label, s)] = int(least)
    return out
