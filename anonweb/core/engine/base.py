"""What an engine does: read a table's rows once into a :class:`Histogram`, and the row-wise
parts of a release (generalize to a lattice node, suppress the classes the models reject, write
the result as Parquet).

Three engines share this interface (see :mod:`anonweb.core.engine.select`): ``pandas`` holds the
table in memory (today's path), ``duckdb`` streams it from disk with a fixed memory limit and a
spill folder, ``spark`` runs the same queries on a Spark cluster. Everything above the engine
(risk profile, models, search) works on the histogram, so its figures do not depend on which
engine read the rows.
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeAlias

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.engine.columns import ColumnCounts
from anonweb.core.engine.histogram import Histogram

# What an engine reads: a table in memory, or the path of a Parquet or CSV file (or a folder of
# Parquet files).
Source: TypeAlias = pd.DataFrame | str | Path
# A row-wise map an engine streams a table through: a part of the table (a frame) and the
# positions of its rows in the whole table -> the part as the map leaves it, row for row.
RowMap: TypeAlias = Callable[[pd.DataFrame, NDArray[np.int64]], pd.DataFrame]


@dataclass(frozen=True)
class ColumnMapping:
    """How one quasi-identifier is written at a node: each level-0 value and its label there.

    ``values`` are the column's distinct values as the histogram holds them; ``labels[i]`` is
    the text written for ``values[i]`` (None keeps a missing value missing).
    """

    column: str
    values: pd.Index
    labels: tuple[str | None, ...]

    def frame(self, key: str = "v", label: str = "g") -> pd.DataFrame:
        return pd.DataFrame(
            {key: pd.Series(self.values), label: pd.Series(self.labels, dtype=object)}
        )


@dataclass(frozen=True)
class NodeRelease:
    """A generalization node to write: a mapping per generalized QI, and which generalized
    classes are suppressed (``*`` in every QI): those listed in ``suppressed`` (one row per class,
    a column per QI, the generalized labels) and, with ``suppress_below``, every class smaller
    than that. ``drop`` names columns left out of the release. With ``shuffle_seed`` the rows are
    written in a random order drawn from it (so two releases cannot be joined by row position);
    without it, in whatever order the engine reads them. With ``lineage``, the written file has
    one more column of that name: the source row (the row's position in the table as read) of
    each row written, for the release's private lineage (see
    :func:`anonweb.core.engine.lineage.split_lineage`)."""

    mappings: Sequence[ColumnMapping]
    quasi_identifiers: Sequence[str]
    suppressed: pd.DataFrame | None = None
    suppress_below: int = 0
    extra: Mapping[str, Any] = field(default_factory=dict)
    drop: Sequence[str] = ()
    shuffle_seed: int | None = None
    lineage: str | None = None

    def kept(self, names: Sequence[str]) -> list[str]:
        """The columns of a source with ``names`` that the release writes, in source order."""
        gone = set(self.drop)
        return [c for c in names if c not in gone]


@dataclass(frozen=True)
class WriteResult:
    path: str
    rows: int
    suppressed: int


class Engine(Protocol):
    """One way of reading rows. ``name`` appears in every report made with it."""

    name: str

    def row_count(self, source: Source) -> int: ...

    def columns(self, source: Source) -> list[str]: ...

    def histogram(
        self,
        source: Source,
        qi: Sequence[str],
        sensitive: Sequence[str] = (),
        weights: str | None = None,
    ) -> Histogram: ...

    def write_release(self, source: Source, node: NodeRelease, out: str | Path) -> WriteResult: ...

    def sample_rows(
        self, source: Source, columns: Sequence[str], n: int, seed: int
    ) -> pd.DataFrame: ...

    def ranges(self, source: Source, columns: Sequence[str]) -> dict[str, float]: ...

    # Single columns counted, for a release's utility (:mod:`anonweb.core.engine.columns`):
    # which of ``columns`` hold numbers (from the schema), the distinct values and counts of
    # the columns in ``values`` and the number summaries of the numeric ones in ``numbers``
    # (one pass), and the finite numbers of each column counted in its bins (``edges``).
    def numeric_columns(self, source: Source, columns: Sequence[str]) -> list[str]: ...

    def column_counts(
        self, source: Source, *, values: Sequence[str], numbers: Sequence[str]
    ) -> dict[str, ColumnCounts]: ...

    def bin_counts(
        self, source: Source, edges: Mapping[str, NDArray[np.float64]]
    ) -> dict[str, NDArray[np.int64]]: ...

    def close(self) -> None: ...


def fresh_name(name: str, taken: Sequence[str]) -> str:
    """``name``, with underscores before it until no column of ``taken`` has it: the name of a
    column an engine adds for itself, never read in place of a column of the table's."""
    while name in taken:
        name = "_" + name
    return name


def require_lineage_apart(node: NodeRelease, names: Sequence[str]) -> None:
    """Refuse a lineage column named as a column of the table: the engine would write the
    row numbers over the table's own column (or beside it under the same name)."""
    if node.lineage is not None and node.lineage in names:
        raise ValueError(
            f"the lineage column {node.lineage!r} is a column of the table: give the lineage a "
            "name of its own (fresh_name)"
        )


def sample_positions(rows: int, n: int, seed: int) -> NDArray[np.int64]:
    """The positions of ``n`` rows of ``rows`` drawn without replacement for ``seed`` (every
    row when there are fewer), sorted: the same rows whichever engine reads them in order."""
    if n >= rows:
        return np.arange(rows, dtype=np.int64)
    picked = np.random.default_rng(seed).choice(rows, size=n, replace=False)
    return np.sort(picked).astype(np.int64)


def source_format(source: Source) -> str:
    """``frame``, ``parquet`` or ``csv`` (by the file's suffix; a folder is Parquet)."""
    if isinstance(source, pd.DataFrame):
        return "frame"
    path = Path(source)
    if path.is_dir() or path.suffix.lower() in (".parquet", ".pq"):
        return "parquet"
    if path.suffix.lower() in (".csv", ".tsv", ".txt", ".gz"):
        return "csv"
    raise ValueError(f"an engine reads Parquet or CSV files, not {path.suffix or path.name!r}")


def csv_as_parquet(source: str | Path, folder: str | Path) -> Path:
    """The CSV file ``source`` as Parquet in ``folder``, converted once (while the file is
    unchanged) by the upload's reader (:func:`~anonweb.core.io.ingest.convert_to_parquet`,
    in bounded memory): the separator sniffed, ``?`` and the usual spellings missing, integer
    codes with a leading zero kept as text, ``true`` kept as text. Every engine reads a CSV
    through it, so a CSV has one table's types whichever engine reads it (each engine's own
    CSV reader guesses other types: DuckDB's and Spark's read ``true`` as a boolean and
    ``02138`` as the number 2138)."""
    import hashlib

    from anonweb.core.io.ingest import READ_LIMITS, convert_to_parquet

    path = Path(source)
    stat = path.stat()
    key = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()
    dest = Path(folder) / f"csv-{hashlib.sha256(key).hexdigest()[:20]}.parquet"
    if not dest.exists():
        convert_to_parquet(path, dest, name=path.name, limits=READ_LIMITS, count_distinct=False)
    return dest


def peak_memory_bytes(children: bool = False) -> int:
    """The process's peak resident memory as the OS measures it (``getrusage``), in bytes;
    with ``children``, plus the largest peak among waited-for child processes (a local Spark
    JVM)."""
    scale = 1 if sys.platform == "darwin" else 1024  # Linux reports kilobytes
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
    if children:
        # children still running (Spark's JVM) are not in RUSAGE_CHILDREN until waited for:
        # their own peaks (VmHWM) are read from /proc where there is one
        waited = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * scale
        peak += max(waited, _live_descendants_peak())
    return int(peak)


def _live_descendants_peak() -> int:
    """Sum of the peak resident memory of this process's live descendants (Linux /proc)."""
    proc = Path("/proc")
    if not proc.is_dir():
        return 0
    parents: dict[int, int] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # the command name may hold spaces and parentheses: fields follow the last ')'
        fields = stat.rsplit(")", 1)[-1].split()
        parents[int(entry.name)] = int(fields[1])
    mine, total = {os.getpid()}, 0
    changed = True
    while changed:
        changed = False
        for pid, ppid in parents.items():
            if ppid in mine and pid not in mine:
                mine.add(pid)
                changed = True
    for pid in mine - {os.getpid()}:
        try:
            for line in (proc / str(pid) / "status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


def env_engine() -> str:
    return os.environ.get("ANONWEB_ENGINE", "auto").strip().lower() or "auto"
