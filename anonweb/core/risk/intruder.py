"""The maximum-knowledge intruder: reverse mapping, permutation distance and verified linkage.

Following Domingo-Ferrer, Muralidhar and Soria-Comas ("permutation paradigm"), the intruder knows
both the original table X and the anonymized table Y (same records, same row order is only used
to score the attack, never by the attack itself) and tries to link each original record to an
anonymized one:

* **Reverse mapping**: per column, each anonymized value is replaced by the original value of the
  same rank, giving Z, a column-wise permutation of X with the ranks of Y. Any masking is thus
  "permutation plus residual noise".
* **Permutation distance** of record i: ``max_j |Rank(x_ij) - Rank(y_ij)|``, how far each of its
  values moved in rank; small means the anonymization barely permuted the record.
* **Linkage**: each x is linked to the z that minimises the largest rank difference over the
  attributes (the seed's search: the smallest d such that some z has every attribute within d
  ranks of x), i.e. the Chebyshev nearest neighbour in rank space. ``metric="euclidean"`` links
  on standardised values instead.
* **Verification**: the same search from records drawn at random gives the distances at which
  matches happen by chance. A record whose match distance is below the 5th percentile of that
  baseline is *not plausibly deniable*.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy.spatial import cKDTree
from scipy.stats import rankdata

from anonweb.core.errors import DataError, ParameterError
from anonweb.core.io.frame import require_columns

METRICS = ("rank", "euclidean")
BASELINES = ("records", "attributes")
DENIABILITY_PERCENTILE = 5.0


def _numeric_matrix(df: pd.DataFrame, columns: list[str], label: str) -> NDArray[Any]:
    """Columns as floats; ordered categoricals use their category order."""
    require_columns(df, columns)
    return np.column_stack([numeric_column(df[col], col, label) for col in columns])


def numeric_column(
    s: pd.Series, col: str, label: str, counts: NDArray[Any] | None = None
) -> NDArray[Any]:
    """A column as floats (each value standing for ``counts`` records, one by default), refused
    when it is not numeric or ordinal or misses values."""
    if isinstance(s.dtype, pd.CategoricalDtype) and s.cat.ordered:
        values = s.cat.codes.to_numpy(dtype=float)
        values[values < 0] = np.nan
    else:
        values = pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)
        if np.isnan(values).sum() > s.isna().sum():
            raise DataError(f"{label} column {col!r} is not numeric or ordinal")
    missing = np.isnan(values)
    if missing.any():
        records = int(missing.sum() if counts is None else counts[missing].sum())
        raise DataError(
            f"{label} column {col!r} has {records} missing values; "
            "the intruder check needs complete records"
        )
    return np.asarray(values, dtype=float)


def _ranks(matrix: NDArray[Any]) -> NDArray[Any]:
    # Average ranks: tied values (ordinal codes, rounded data) are indistinguishable to the
    # intruder, so they must sit at the same rank rather than in an arbitrary order.
    return np.column_stack(
        [rankdata(matrix[:, j], method="average") for j in range(matrix.shape[1])]
    )


def reverse_map(
    original: pd.DataFrame, anonymized: pd.DataFrame, *, columns: list[str]
) -> pd.DataFrame:
    """Z: each anonymized value replaced by the original value of the same rank (per column)."""
    x = _numeric_matrix(original, columns, "original")
    y = _numeric_matrix(anonymized, columns, "anonymized")
    _same_length(x, y)
    z = np.empty_like(x)
    for j in range(x.shape[1]):
        order = rankdata(y[:, j], method="ordinal").astype(int) - 1
        z[:, j] = np.sort(x[:, j])[order]
    return pd.DataFrame(z, columns=columns, index=anonymized.index)


def permutation_distances(
    original: pd.DataFrame, anonymized: pd.DataFrame, *, columns: list[str]
) -> NDArray[Any]:
    """Per record: the largest rank difference between its original and anonymized values."""
    x = _numeric_matrix(original, columns, "original")
    y = _numeric_matrix(anonymized, columns, "anonymized")
    _same_length(x, y)
    return np.asarray(np.abs(_ranks(x) - _ranks(y)).max(axis=1))


def _same_length(x: NDArray[Any], y: NDArray[Any]) -> None:
    same_records(x.shape[0], y.shape[0])


def same_records(x_rows: int, y_rows: int) -> None:
    """The original and anonymized tables hold the same records, at least two."""
    if x_rows != y_rows:
        raise DataError(
            f"the original has {x_rows} rows and the anonymized table {y_rows}; "
            "the intruder check compares the same records"
        )
    if x_rows < 2:
        raise DataError("the intruder check needs at least two records")


@dataclass(frozen=True)
class IntruderResult:
    """The check's figures. The distances are held as distinct values with how many records
    (or baseline draws) have each (``*_counts``): the same figures as one per record, in the
    space of the distinct values."""

    columns: tuple[str, ...]
    metric: str
    baseline: str
    n_records: int
    n_baseline: int
    threshold: float
    not_deniable_share: float
    correct_link_share: float
    match_distances: NDArray[Any] = field(repr=False)
    baseline_distances: NDArray[Any] = field(repr=False)
    permutation_distances: NDArray[Any] = field(repr=False)
    match_counts: NDArray[Any] = field(repr=False)
    baseline_counts: NDArray[Any] = field(repr=False)
    permutation_counts: NDArray[Any] = field(repr=False)

    def to_dict(self, *, bins: int = 30) -> dict[str, Any]:
        both = np.concatenate([self.match_distances, self.baseline_distances])
        # the edges depend on the smallest and largest distance only
        edges = np.histogram_bin_edges(np.array([both.min(), both.max()]), bins=bins)
        return {
            "columns": list(self.columns),
            "metric": self.metric,
            "baseline": self.baseline,
            "n_records": self.n_records,
            "n_baseline": self.n_baseline,
            "deniability_percentile": DENIABILITY_PERCENTILE,
            "threshold": float(self.threshold),
            "not_deniable_share": float(self.not_deniable_share),
            "correct_link_share": float(self.correct_link_share),
            "match_distances": _distribution(self.match_distances, self.match_counts, edges),
            "baseline_distances": _distribution(
                self.baseline_distances, self.baseline_counts, edges
            ),
            "permutation_distance": _summary(self.permutation_distances, self.permutation_counts),
        }


PERCENTILES = (0, 5, 25, 50, 75, 95, 100)


def weighted_percentiles(
    values: NDArray[Any], counts: NDArray[Any], q: Sequence[float]
) -> NDArray[Any]:
    """``np.percentile`` (its default, linear method) of ``values`` each repeated ``counts``
    times, to the last bit, without repeating them: the two order statistics around each
    percentile's position are found by the cumulative counts and interpolated as NumPy does."""
    order = np.argsort(values, kind="stable")
    v = np.asarray(values, dtype=float)[order]
    cum = np.cumsum(np.asarray(counts, dtype=np.int64)[order])
    n = int(cum[-1])
    virtual = (n - 1) * np.true_divide(np.asarray(q, dtype=float), np.float64(100))
    previous = np.floor(virtual)
    above = virtual >= n - 1
    lo = np.where(above, n - 1, previous).astype(np.int64)
    hi = np.where(above, n - 1, previous + 1).astype(np.int64)
    a = v[np.searchsorted(cum, lo, side="right")]
    b = v[np.searchsorted(cum, hi, side="right")]
    gamma = virtual - np.where(above, -1, previous)
    diff = b - a
    out = a + diff * gamma
    return np.where(gamma >= 0.5, b - diff * (1 - gamma), out)


def _summary(values: NDArray[Any], counts: NDArray[Any]) -> dict[str, float]:
    q = weighted_percentiles(values, counts, PERCENTILES)
    keys = ("min", "p05", "p25", "median", "p75", "p95", "max")
    mean = float(np.dot(values, counts) / counts.sum())
    return {k: float(v) for k, v in zip(keys, q, strict=True)} | {"mean": mean}


def _distribution(
    values: NDArray[Any], counts: NDArray[Any], edges: NDArray[Any]
) -> dict[str, Any]:
    binned, _ = np.histogram(values, bins=edges, weights=counts)
    return {
        "bin_edges": edges.tolist(),
        "counts": [int(c) for c in binned],
        "summary": _summary(values, counts),
    }


def _space(
    x: NDArray[Any], y: NDArray[Any], metric: str
) -> tuple[NDArray[Any], NDArray[Any], float]:
    """Coordinates of X and of Z (reverse-mapped Y) in which to search, and the Minkowski p."""
    rx, ry = _ranks(x), _ranks(y)
    if metric == "rank":
        # Z has Y's ranks and X's values, so Rank(z) is Y's rank: linkage works on ranks only.
        return rx, ry, np.inf
    z = np.empty_like(x)
    for j in range(x.shape[1]):
        z[:, j] = np.sort(x[:, j])[rankdata(y[:, j], method="ordinal").astype(int) - 1]
    mean, sd = x.mean(axis=0), x.std(axis=0)
    sd[sd == 0] = 1.0
    return (x - mean) / sd, (z - mean) / sd, 2.0


@dataclass(frozen=True)
class IntruderCells:
    """The records as the check reads them: each distinct record of the original with its
    anonymized counterpart, as ranks (``rx``, ``ry``: a row per cell, a column per attribute)
    and as coordinates of the search space (``px`` the original's, ``pz`` the reverse-mapped
    anonymized one's), with the records in each cell (``counts``). Cells are in the order of
    their coordinates, so a record drawn by its position among them is the same record
    whichever way the cells were counted."""

    rx: NDArray[Any]
    ry: NDArray[Any]
    px: NDArray[Any]
    pz: NDArray[Any]
    counts: NDArray[Any]

    @property
    def records(self) -> int:
        return int(self.counts.sum())


def distinct_rows(
    matrix: NDArray[Any], counts: NDArray[Any] | None = None
) -> tuple[NDArray[Any], NDArray[np.int64], NDArray[np.int64]]:
    """The distinct rows of ``matrix`` in lexicographic order (first column first), the counts
    each gathers (``counts`` per row, one by default) and the distinct row of each row: what
    ``np.unique(axis=0)`` gives, by one sort of the columns."""
    n = matrix.shape[0]
    weights = np.ones(n, dtype=np.int64) if counts is None else np.asarray(counts, np.int64)
    order = np.lexsort(matrix.T[::-1]) if n else np.zeros(0, dtype=np.int64)
    ordered = matrix[order]
    new = np.ones(n, dtype=bool)
    if n > 1:
        new[1:] = np.any(ordered[1:] != ordered[:-1], axis=1)
    starts = np.flatnonzero(new)
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = np.cumsum(new) - 1
    summed = np.add.reduceat(weights[order], starts) if n else np.zeros(0, dtype=np.int64)
    return ordered[starts], summed.astype(np.int64), inverse


def cells_of(
    rx: NDArray[Any],
    ry: NDArray[Any],
    px: NDArray[Any] | None,
    pz: NDArray[Any] | None,
    counts: NDArray[Any],
) -> IntruderCells:
    """Rows that agree on every coordinate merged (their counts added), in coordinate order;
    ``px`` and ``pz`` None when the search space is the ranks themselves."""
    m = rx.shape[1]
    if px is None or pz is None:
        distinct, summed, _ = distinct_rows(np.hstack([rx, ry]), counts)
        r_x, r_y = distinct[:, :m], distinct[:, m:]
        return IntruderCells(r_x, r_y, r_x, r_y, summed)
    distinct, summed, _ = distinct_rows(np.hstack([px, pz, rx, ry]), counts)
    parts = [distinct[:, i * m : (i + 1) * m] for i in range(4)]
    return IntruderCells(parts[2], parts[3], parts[0], parts[1], summed)


def average_ranks(values: NDArray[Any], counts: NDArray[Any]) -> NDArray[Any]:
    """Each value's average rank among ``values`` repeated ``counts`` times: ``rankdata``'s
    ``average`` ranks of the records, counted from the distinct values."""
    distinct, inverse = np.unique(values, return_inverse=True)
    cum = np.cumsum(np.bincount(inverse.reshape(-1), weights=counts, minlength=distinct.size))
    before = np.concatenate([[0.0], cum[:-1]])
    ranks: NDArray[Any] = np.asarray(0.5 * (cum + before + 1))[inverse.reshape(-1)]
    return ranks


def rank_cells(x: NDArray[Any], y: NDArray[Any], counts: NDArray[Any]) -> IntruderCells:
    """The cells of the ``rank`` metric from the distinct pairs of an original record's values
    (``x``) and its anonymized counterpart's (``y``) and the records of each pair: a record's
    ranks depend only on its values, so the distinct pairs are all the check reads."""
    rx = np.column_stack([average_ranks(x[:, j], counts) for j in range(x.shape[1])])
    ry = np.column_stack([average_ranks(y[:, j], counts) for j in range(y.shape[1])])
    return cells_of(rx, ry, None, None, counts)


def intruder_check(
    original: pd.DataFrame,
    anonymized: pd.DataFrame,
    *,
    columns: list[str],
    rng: np.random.Generator,
    metric: str = "rank",
    baseline: str = "records",
    n_baseline: int | None = None,
) -> IntruderResult:
    """Link every original record to its closest anonymized record and verify against chance."""
    check_options(columns, metric, baseline)
    x = _numeric_matrix(original, columns, "original")
    y = _numeric_matrix(anonymized, columns, "anonymized")
    _same_length(x, y)
    ones = np.ones(x.shape[0], dtype=np.int64)
    if metric == "rank":
        pairs, counts, _ = distinct_rows(np.hstack([x, y]))
        m = x.shape[1]
        cells = rank_cells(pairs[:, :m], pairs[:, m:], counts)
    else:
        px, pz, _ = _space(x, y, metric)
        cells = cells_of(_ranks(x), _ranks(y), px, pz, ones)
    return intruder_from_cells(
        cells, columns=columns, rng=rng, metric=metric, baseline=baseline, n_baseline=n_baseline
    )


def check_options(columns: Sequence[str], metric: str, baseline: str) -> None:
    if not columns:
        raise ParameterError("name at least one column for the intruder check")
    if metric not in METRICS:
        raise ParameterError(f"metric must be one of {', '.join(METRICS)}, not {metric!r}")
    if baseline not in BASELINES:
        raise ParameterError(f"baseline must be one of {', '.join(BASELINES)}, not {baseline!r}")


BASELINE_CHUNK = 1 << 20  # baseline draws searched at a time (memory: a chunk, not all draws)


def intruder_from_cells(
    cells: IntruderCells,
    *,
    columns: Sequence[str],
    rng: np.random.Generator,
    metric: str = "rank",
    baseline: str = "records",
    n_baseline: int | None = None,
) -> IntruderResult:
    """The check on the records as ``cells``: each record linked to the closest anonymized
    one (the intruder picks uniformly among equally close ones, so a record is linked to its
    own with probability one over the records as close as the closest), and the links'
    distances against those of records drawn at random."""
    check_options(columns, metric, baseline)
    n = cells.records
    size = int(n_baseline) if n_baseline is not None else max(n, 2000)
    if size < 20:
        raise ParameterError("the random baseline needs at least 20 records")
    p = np.inf if metric == "rank" else 2.0
    # the distinct anonymized points and the records at each
    points, weight, own = distinct_rows(cells.pz, cells.counts)
    tree = cKDTree(points)
    # the two closest distinct points: a second as close as the first is a tie to resolve
    two, closest = tree.query(cells.px, k=2, p=p)
    match = np.asarray(two[:, 0], dtype=float)
    # every anonymized record as close as the closest (a hair further for rounding), with the
    # record's own among them or not
    linked = _own_links(cells, tree, own, weight, two, np.asarray(closest), p)
    chance, chance_counts = _chance(cells, tree, own, weight, p, kind=baseline, size=size, rng=rng)
    threshold = float(weighted_percentiles(chance, chance_counts, [DENIABILITY_PERCENTILE])[0])
    permutation = np.abs(cells.rx - cells.ry).max(axis=1)
    return IntruderResult(
        columns=tuple(columns),
        metric=metric,
        baseline=baseline,
        n_records=n,
        n_baseline=size,
        threshold=threshold,
        # Strict: a match exactly at the threshold happens by chance at least 5% of the time.
        not_deniable_share=float(cells.counts[match < threshold].sum() / n),
        correct_link_share=float(linked.sum() / n),
        match_distances=match,
        baseline_distances=chance,
        permutation_distances=permutation,
        match_counts=cells.counts,
        baseline_counts=chance_counts,
        permutation_counts=cells.counts,
    )


def _own_links(
    cells: IntruderCells,
    tree: cKDTree,
    own: NDArray[Any],
    weight: NDArray[Any],
    two: NDArray[Any],
    closest: NDArray[Any],
    p: float,
) -> NDArray[Any]:
    """Per cell, its records linked to their own anonymized record, in expectation: each
    record's own is among the closest ones (as close as the closest, a hair further for
    rounding) or not, and the intruder picks one of the records there at random. ``two`` and
    ``closest`` are the distances and indices of each cell's two closest distinct points."""
    radius = two[:, 0] * (1 + 1e-12)
    many = two[:, 1] <= radius  # a second point as close: the ball around the cell is read
    nearest = closest[:, 0]
    mine = (nearest == own).astype(float)
    tied = weight[nearest].astype(float)
    for i in np.flatnonzero(many):  # several anonymized points equally close
        near = tree.query_ball_point(cells.px[i], r=radius[i], p=p)
        tied[i] = float(weight[near].sum())
        mine[i] = float(own[i] in near)
    return np.asarray(mine * cells.counts / tied, dtype=float)


def _chance(
    cells: IntruderCells,
    tree: cKDTree,
    own: NDArray[Any],
    weight: NDArray[Any],
    p: float,
    *,
    kind: str,
    size: int,
    rng: np.random.Generator,
) -> tuple[NDArray[Any], NDArray[Any]]:
    """The distances at which records drawn at random are matched (distinct, with counts)."""
    cum = np.cumsum(cells.counts)
    n, m = int(cum[-1]), cells.px.shape[1]
    found: list[tuple[NDArray[Any], NDArray[Any]]] = []
    for start in range(0, size, BASELINE_CHUNK):
        draws = min(BASELINE_CHUNK, size - start)
        if kind == "attributes":
            # The seed's T: each attribute drawn independently from X's values. Note that it
            # breaks the correlations, so it flags correlation-preserving releases on correlated
            # data.
            picks = np.searchsorted(cum, rng.integers(0, n, size=(draws, m)), side="right")
            dist, _ = tree.query(cells.px[picks, np.arange(m)], p=p)
        else:
            # Whole records drawn from X, each matched while its own anonymized counterpart is
            # left out: the joint distribution is kept and only the true link is removed, so
            # what remains is the distance at which a record like this one is matched by chance.
            picks = np.searchsorted(cum, rng.integers(0, n, size=draws), side="right")
            both, idx = tree.query(cells.px[picks], k=2, p=p)
            alone = (idx[:, 0] == own[picks]) & (weight[own[picks]] == 1)
            dist = np.where(alone, both[:, 1], both[:, 0])
        found.append(np.unique(np.asarray(dist, dtype=float), return_counts=True))
    values, inverse = np.unique(np.concatenate([v for v, _ in found]), return_inverse=True)
    counts = np.bincount(
        inverse.reshape(-1), weights=np.concatenate([c for _, c in found]), minlength=values.size
    )
    return values, counts.astype(np.int64)
