"""Local suppression with importance weights (sdcMicro's ``localSuppression``): reach k by
blanking cells of the quasi-identifiers instead of removing whole records.

Step kind ``local_suppression`` — ``{"k": 5, "importance": {"age": 1, "zip": 3}}``.

How a blank counts. A blanked (or already missing) cell matches *every* value of its column
when classes are counted, as sdcMicro's frequency counts treat NA: a record's count is the
number of records that agree with it on every column where both are recorded. So a record with
all its quasi-identifiers blank matches the whole table. :func:`na_matching_counts` computes
these counts (one group-by per pair of blank patterns, never a loop over rows);
:func:`brute_force_counts` is the definition, pair by pair, for tests.

Importance. A higher number means more important: such a column is blanked last. Columns not
named have importance 0 (blanked first). sdcMicro's ``importance`` vector runs the other way
(1 = most important); the convention here matches the team policy's "weights" elsewhere.

The algorithm is greedy, in rounds: every record whose count is below k gets its least
important still-recorded quasi-identifier blanked (ties between equally important columns go
to the column with more distinct values, whose blank merges most records), then the counts are
computed again. A record with every quasi-identifier blank matches the whole table, so at most
one round per quasi-identifier is needed whenever the table has k records. Then, to blank as
few cells as possible, each blanked cell of the last round is restored in turn (cheapest
importance last) when the table stays k-anonymous without it. Neither sdcMicro's heuristic nor
this one is optimal (minimal cell suppression is NP-hard); the step reports what it blanked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray

from anonweb.core import schema as sch
from anonweb.core.errors import ParameterError
from anonweb.core.io.frame import require_columns
from anonweb.core.models.base import require_int, require_number
from anonweb.core.release.steps import (
    UNBOUNDED,
    PlanContext,
    StepContext,
    StepOutcome,
    register_step,
    size_problems,
)


def _codes(df: pd.DataFrame, columns: Sequence[str]) -> NDArray[Any]:
    """One integer code per cell (-1: missing), columns side by side."""
    out = np.empty((len(df), len(columns)), dtype=np.int64)
    for j, col in enumerate(columns):
        out[:, j] = pd.factorize(df[col], use_na_sentinel=True)[0]
    return out


def _counts_from_codes(codes: NDArray[Any]) -> NDArray[Any]:
    """Each row's count of rows agreeing with it wherever both are recorded (-1: blank)."""
    n, m = codes.shape
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    blank = codes < 0
    weights = 1 << np.arange(m, dtype=np.int64)
    pattern = (blank * weights).sum(axis=1)
    patterns = np.unique(pattern)
    counts = np.zeros(n, dtype=np.int64)
    for px in patterns:
        rows_x = np.flatnonzero(pattern == px)
        for py in patterns:
            rows_y = np.flatnonzero(pattern == py)
            both = [j for j in range(m) if not (px >> j) & 1 and not (py >> j) & 1]
            if not both:
                counts[rows_x] += len(rows_y)
                continue
            # the combinations of the columns both record, counted over rows of pattern py
            keys_y = _row_keys(codes[rows_y][:, both])
            keys_x = _row_keys(codes[rows_x][:, both])
            uniq, freq = np.unique(keys_y, return_counts=True)
            pos = np.searchsorted(uniq, keys_x)
            pos = np.minimum(pos, len(uniq) - 1)
            counts[rows_x] += np.where(uniq[pos] == keys_x, freq[pos], 0)
    return counts


def _row_keys(block: NDArray[Any]) -> NDArray[Any]:
    """One comparable key per row of an integer block (a view of the row's bytes)."""
    block = np.ascontiguousarray(block, dtype=np.int64)
    return block.view(np.dtype((np.void, block.dtype.itemsize * block.shape[1]))).reshape(-1)


def na_matching_counts(df: pd.DataFrame, *, quasi_identifiers: Sequence[str]) -> NDArray[Any]:
    """For each row, how many rows (itself included) it cannot be told apart from when a
    missing quasi-identifier matches every value (sdcMicro's treatment of NA)."""
    qis = list(quasi_identifiers)
    require_columns(df, qis, role="quasi-identifier")
    return _counts_from_codes(_codes(df, qis))


def brute_force_counts(df: pd.DataFrame, *, quasi_identifiers: Sequence[str]) -> NDArray[Any]:
    """:func:`na_matching_counts` by its definition, row pair by row pair (small tables)."""
    rows = df[list(quasi_identifiers)].to_numpy(dtype=object)
    missing = pd.isna(df[list(quasi_identifiers)]).to_numpy()
    out = np.zeros(len(rows), dtype=np.int64)
    for i in range(len(rows)):
        for j in range(len(rows)):
            if all(
                missing[i, c] or missing[j, c] or rows[i, c] == rows[j, c]
                for c in range(rows.shape[1])
            ):
                out[i] += 1
    return out


@dataclass(frozen=True)
class LocalSuppression:
    """What local suppression blanked: the blanked cells (rows x quasi-identifiers)."""

    quasi_identifiers: tuple[str, ...]
    blanked: NDArray[Any]  # bool, rows x quasi-identifiers
    k: int
    smallest_count: int | None  # the smallest NA-matching count after blanking

    @property
    def cells(self) -> int:
        return int(self.blanked.sum())

    def to_dict(self) -> dict[str, Any]:
        per_column = self.blanked.sum(axis=0)
        return {
            "k": self.k,
            "cells_blanked": self.cells,
            "records_touched": int(self.blanked.any(axis=1).sum()),
            "cells_blanked_per_column": {
                q: int(c) for q, c in zip(self.quasi_identifiers, per_column, strict=True)
            },
            "smallest_count": self.smallest_count,
        }


def _order(codes: NDArray[Any], qis: Sequence[str], importance: Mapping[str, float]) -> list[int]:
    """Columns, first blanked first: least important, then most distinct values."""
    distinct = [len(np.unique(codes[:, j][codes[:, j] >= 0])) for j in range(len(qis))]
    return sorted(range(len(qis)), key=lambda j: (importance.get(qis[j], 0.0), -distinct[j], j))


def local_suppression(
    df: pd.DataFrame,
    *,
    quasi_identifiers: Sequence[str],
    k: int,
    importance: Mapping[str, float] | None = None,
) -> LocalSuppression:
    """Which quasi-identifier cells to blank so that every row's NA-matching count is at
    least ``k`` (see the module's docstring); ``df`` is not changed."""
    qis = tuple(quasi_identifiers)
    require_columns(df, list(qis), role="quasi-identifier")
    k = require_int(k, "k", minimum=1)
    weights = dict(importance or {})
    unknown = sorted(set(weights) - set(qis))
    if unknown:
        raise ParameterError(
            f"importance names columns that are not quasi-identifiers: {', '.join(unknown)}"
        )
    for col, w in weights.items():
        weights[col] = require_number(w, f"the importance of {col!r}")
    if len(df) and len(df) < k:
        raise ParameterError(f"a table of {len(df)} rows cannot reach k = {k}")
    codes = _codes(df, qis)
    blanked = np.zeros(codes.shape, dtype=bool)
    order = _order(codes, qis, weights)
    counts = _counts_from_codes(codes)
    last: list[tuple[int, int]] = []
    while len(counts) and (unsafe := np.flatnonzero(counts < k)).size:
        last = []
        for i in unsafe:
            j = next((j for j in order if codes[i, j] >= 0), None)
            if j is not None:
                codes[i, j] = -1
                blanked[i, j] = True
                last.append((int(i), j))
        if not last:  # every unsafe row is blank already: cannot happen with k <= rows
            break
        counts = _counts_from_codes(codes)
    _restore(codes, blanked, last, df, qis, k, order)
    counts = _counts_from_codes(codes)
    return LocalSuppression(qis, blanked, k, int(counts.min()) if len(counts) else None)


def _restore(
    codes: NDArray[Any],
    blanked: NDArray[Any],
    last: list[tuple[int, int]],
    df: pd.DataFrame,
    qis: Sequence[str],
    k: int,
    order: Sequence[int],
) -> None:
    """Give back blanks of the last round that the table does not need (most important first).

    Each trial recounts the table, so only a bounded number of cells is tried."""
    original = _codes(df, qis)
    rank = {j: r for r, j in enumerate(order)}
    for i, j in sorted(last, key=lambda c: -rank[c[1]])[:_RESTORE_TRIALS]:
        codes[i, j] = original[i, j]
        if int(_counts_from_codes(codes).min()) >= k:
            blanked[i, j] = False
        else:
            codes[i, j] = -1


# a restore trial recounts the whole table: enough for small tables' last rounds, bounded for
# large ones (where the greedy rounds already blank few cells too many)
_RESTORE_TRIALS = 200


def apply_blanks(df: pd.DataFrame, result: LocalSuppression) -> pd.DataFrame:
    """``df`` with the blanked cells missing (a new frame)."""
    out = df.copy()
    for j, col in enumerate(result.quasi_identifiers):
        mask = result.blanked[:, j]
        if mask.any():
            out[col] = out[col].astype(object).where(~mask, None)
    return out


def _importance(params: Mapping[str, Any]) -> dict[str, float]:
    return {str(c): float(w) for c, w in (params.get("importance") or {}).items()}


def _check(params: Mapping[str, Any]) -> None:
    require_int(params.get("k"), "k", minimum=1)
    for col, w in (params.get("importance") or {}).items():
        require_number(w, f"the importance of {col!r}")


def _plan_check(params: Mapping[str, Any], ctx: PlanContext) -> list[str]:
    problems = size_problems(params.get("k"), ctx)
    qis = set(ctx.plan.quasi_identifiers)
    extra = sorted(set(params.get("importance") or {}) - qis)
    if extra:
        problems.append(
            "local_suppression: importance names columns that are not quasi-identifiers: "
            + ", ".join(extra)
        )
    if not qis:
        problems.append("local_suppression needs the plan's quasi-identifiers")
    return problems


@register_step(
    "local_suppression",
    validate=_check,
    stability=UNBOUNDED,
    schema=sch.obj(
        {
            "k": sch.integer("Smallest class size to reach", minimum=1, maximum=sch.MAX_K),
            "importance": sch.mapping(
                sch.number(minimum=0, maximum=1e6),
                "Column -> importance (higher: more important, blanked last; unnamed: 0)",
                keys="reads",
            ),
        },
        required=["k"],
        labels={"k": "k", "importance": "Importance per quasi-identifier"},
        title="Local suppression (blank cells to reach k)",
    ),
    plan_check=_plan_check,
    keeps_values=True,
    public_report=("k", "cells_blanked"),
)
def local_suppression_step(
    df: pd.DataFrame, params: Mapping[str, Any], ctx: StepContext
) -> StepOutcome:
    result = local_suppression(
        df,
        quasi_identifiers=ctx.quasi_identifiers,
        k=params["k"],
        importance=_importance(params),
    )
    ctx.state["cells_blanked"] = ctx.state.get("cells_blanked", 0) + result.cells
    return StepOutcome(apply_blanks(df, result), result.to_dict())
