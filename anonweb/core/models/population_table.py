"""A population table: the people the released table was drawn from, as ARX's population with a
research subset.

ARX's population-based criteria (k-map with a population, δ-presence) are defined on the
population's class sizes: at every generalization node, the population is grouped by the same
generalized quasi-identifiers as the sample, and each class of the sample is compared with the
class of the population holding the same generalized values (ARX's ``pcount``). The sample is
a subset of the population (ARX's research subset): a sample class larger than its population
class means the table is not part of the population, and is refused.

:class:`PopulationTable` is the table as given (a file of the command line, another dataset of
the team); :meth:`PopulationTable.bind` encodes it once against the search's hierarchies into
:class:`PopulationCounts`, whose :meth:`~PopulationCounts.at` gives the population's class
sizes of any node. The population is reduced to its distinct quasi-identifier rows with a count,
and a node's classes are found from those rows by the same roll-up the sample's histogram uses
(a mixed-radix key of the node's level codes and a count): its size is the number of distinct
combinations, not of people.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core.errors import DataError, ParameterError
from anonweb.core.io.frame import require_columns
from anonweb.core.io.hierarchy import MISSING, Hierarchy
from anonweb.core.risk.classes import combine_codes

# Marks a model check counted in a population table: its figure is one of that table's class
# counts, which a published report leaves out.
POPULATION_COUNTED = "counted_in_population_table"
# nodes whose population classes are kept (a search revisits few nodes; each entry is small)
_CACHED_NODES = 4096


def population_mention(name: str, rows: int) -> str:
    """The words a model's description names a population table with; a published report
    puts "a population table" in their place (``release.report.public_check``)."""
    return f"population table {name!r}, {rows:,} people"


@dataclass(frozen=True, eq=False)
class PopulationTable:
    """The population's quasi-identifier columns, with the name reports state (a file's name,
    a dataset's)."""

    frame: pd.DataFrame = field(repr=False)
    name: str = "population table"
    _bound: dict[Any, PopulationCounts] = field(default_factory=dict, repr=False)

    @classmethod
    def from_frame(cls, df: pd.DataFrame, *, name: str = "population table") -> PopulationTable:
        if len(df) == 0:
            raise DataError(f"the population table {name!r} has no rows")
        return cls(df, str(name))

    @property
    def rows(self) -> int:
        return len(self.frame)

    def mention(self) -> str:
        """How a model's description names it (:func:`population_mention`)."""
        return population_mention(self.name, self.rows)

    def describe(self) -> dict[str, Any]:
        """What a report states about the population used (never a cell value)."""
        return {"name": self.name, "rows": self.rows}

    def bind(
        self, quasi_identifiers: Sequence[str], hierarchies: Mapping[str, Hierarchy]
    ) -> PopulationCounts:
        """The population encoded against ``hierarchies`` (once per set of them)."""
        qis = tuple(quasi_identifiers)
        key = (qis, tuple(id(hierarchies[q]) for q in qis))
        got = self._bound.get(key)
        if got is None:
            got = PopulationCounts.encode(self, qis, [hierarchies[q] for q in qis])
            self._bound[key] = got
        return got


def _level_codes(hierarchy: Hierarchy) -> list[NDArray[Any]]:
    """Per level, a label code per hierarchy row, plus one for a missing value (its own code
    below the root; the root at the top level, which stands for any value)."""
    out = []
    top = hierarchy.height - 1
    for level in range(hierarchy.height):
        seen: dict[str, int] = {}
        col = [seen.setdefault(row[level], len(seen)) for row in hierarchy.rows]
        col.append(col[0] if level == top else len(seen))
        out.append(np.asarray(col, dtype=np.int64))
    return out


def hierarchy_rows(series: pd.Series, hierarchy: Hierarchy) -> NDArray[Any]:
    """The hierarchy row of each value (``len(hierarchy.rows)`` for a missing value); a value
    the hierarchy does not cover is refused, naming it."""
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    found = hierarchy.rows_of(uniques)
    if (found < 0).any():
        hierarchy.validate_covers(series)  # raises, naming the values
    found[found == MISSING] = len(hierarchy.rows)
    return np.asarray(np.append(found, len(hierarchy.rows))[codes])


@dataclass(eq=False)
class PopulationCounts:
    """The population's distinct quasi-identifier rows (as hierarchy rows) with their counts."""

    name: str
    quasi_identifiers: tuple[str, ...]
    rows: NDArray[Any] = field(repr=False)  # distinct rows x QIs: hierarchy row of each value
    counts: NDArray[Any] = field(repr=False)
    level_codes: list[list[NDArray[Any]]] = field(repr=False)  # per QI, per level
    _nodes: OrderedDict[tuple[int, ...], tuple[NDArray[Any], NDArray[Any]]] = field(
        default_factory=OrderedDict, repr=False
    )

    @classmethod
    def encode(
        cls, table: PopulationTable, qis: tuple[str, ...], hierarchies: Sequence[Hierarchy]
    ) -> PopulationCounts:
        require_columns(table.frame, list(qis), role=f"quasi-identifier in {table.name!r}")
        cols = [hierarchy_rows(table.frame[q], h) for q, h in zip(qis, hierarchies)]
        key = combine_codes(((c, len(h.rows) + 1) for c, h in zip(cols, hierarchies)), len(cols[0]))
        counts = np.bincount(key)
        first = np.empty(len(counts), dtype=np.int64)
        first[key[::-1]] = np.arange(len(key) - 1, -1, -1)
        present = counts > 0
        rows = np.column_stack([c[first[present]] for c in cols])
        return cls(
            table.name,
            qis,
            rows,
            counts[present].astype(np.int64),
            [_level_codes(h) for h in hierarchies],
        )

    def _keys(self, levels: Sequence[int], rows: NDArray[Any]) -> NDArray[Any]:
        """A key per row (hierarchy rows per QI) of its generalized values at ``levels``."""
        key = np.zeros(len(rows), dtype=np.int64)
        for i, level in enumerate(levels):
            codes = self.level_codes[i][int(level)]
            key = key * (int(codes.max()) + 1) + codes[rows[:, i]]
        return key

    def _node(self, levels: tuple[int, ...]) -> tuple[NDArray[Any], NDArray[Any]]:
        got = self._nodes.get(levels)
        if got is None:
            keys, inverse = np.unique(self._keys(levels, self.rows), return_inverse=True)
            got = (keys, np.bincount(inverse.reshape(-1), weights=self.counts).astype(np.int64))
            self._nodes[levels] = got
            if len(self._nodes) > _CACHED_NODES:
                self._nodes.popitem(last=False)
        else:
            self._nodes.move_to_end(levels)
        return got

    def at(self, levels: Sequence[int], sample_rows: NDArray[Any]) -> NDArray[Any]:
        """The population's size of the class of each sample row (hierarchy rows per QI, one
        row per sample class) at the node ``levels``; 0 where the population has none."""
        if len(levels) != len(self.quasi_identifiers):
            raise ParameterError("a node has one level per quasi-identifier")
        keys, counts = self._node(tuple(int(v) for v in levels))
        wanted = self._keys(
            levels, np.asarray(sample_rows, dtype=np.int64).reshape(-1, len(levels))
        )
        pos = np.minimum(np.searchsorted(keys, wanted), max(len(keys) - 1, 0))
        found = (keys[pos] == wanted) if len(keys) else np.zeros(len(wanted), dtype=bool)
        return np.where(found, counts[pos] if len(keys) else 0, 0).astype(np.int64)

    def check_subset(self, sample_rows: NDArray[Any], sample_counts: NDArray[Any]) -> None:
        """Refuse a sample that is not part of the population: some combination of values
        occurs more often in the sample than in the population (ARX's research subset)."""
        pop = self.at([0] * len(self.quasi_identifiers), sample_rows)
        over = np.asarray(sample_counts) > pop
        if over.any():
            raise DataError(
                f"the table is not part of the population {self.name!r}: "
                f"{int(over.sum())} combination(s) of {', '.join(self.quasi_identifiers)} "
                f"occur more often in the table than in the population"
            )


def sample_rows(
    df: pd.DataFrame, quasi_identifiers: Sequence[str], hierarchies: Mapping[str, Hierarchy]
) -> NDArray[Any]:
    """The hierarchy row of each value of the table's quasi-identifiers (rows x QIs)."""
    return np.column_stack([hierarchy_rows(df[q], hierarchies[q]) for q in quasi_identifiers])
