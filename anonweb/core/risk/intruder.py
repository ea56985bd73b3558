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
    out = []
    for col in columns:
        s = df[col]
        if isinstance(s.dtype, pd.CategoricalDtype) and s.cat.ordered:
            values = s.cat.codes.to_numpy(dtype=float)
            values[values < 0] = np.nan
        else:
            values = pd.to_numeric(s, errors="coerce").to_numpy(dtype=float)
            if np.isnan(values).sum() > s.isna().sum():
                raise DataError(f"{label} column {col!r} is not numeric or ordinal")
        if np.isnan(values).any():
            raise DataError(
                f"{label} column {col!r} has {int(np.isnan(values).sum())} missing values; "
                "the intruder check needs complete records"
            )
        out.append(values)
    return np.column_stack(out)


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
    if x.shape[0] != y.shape[0]:
        raise DataError(
            f"the original has {x.shape[0]} rows and the anonymized table {y.shape[0]}; "
            "the intruder check compares the same records"
        )
    if x.shape[0] < 2:
        raise DataError("the intruder check needs at least two records")


@dataclass(frozen=True)
class IntruderResult:
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

    def to_dict(self, *, bins: int = 30) -> dict[str, Any]:
        both = np.concatenate([self.match_distances, self.baseline_distances])
        edges = np.histogram_bin_edges(both, bins=bins)
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
            "match_distances": _distribution(self.match_distances, edges),
            "baseline_distances": _distribution(self.baseline_distances, edges),
            "permutation_distance": _summary(self.permutation_distances),
        }


def _summary(values: NDArray[Any]) -> dict[str, float]:
    q = np.percentile(values, [0, 5, 25, 50, 75, 95, 100])
    keys = ("min", "p05", "p25", "median", "p75", "p95", "max")
    return {k: float(v) for k, v in zip(keys, q)} | {"mean": float(values.mean())}


def _distribution(values: NDArray[Any], edges: NDArray[Any]) -> dict[str, Any]:
    counts, _ = np.histogram(values, bins=edges)
    return {"bin_edges": edges.tolist(), "counts": counts.tolist(), "summary": _summary(values)}


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


def _baseline_distances(
    tree: cKDTree, px: NDArray[Any], p: float, *, kind: str, size: int, rng: np.random.Generator
) -> NDArray[Any]:
    n, m = px.shape
    if kind == "attributes":
        # The seed's T: each attribute drawn independently from X's values. Note that it breaks
        # the correlations, so it flags correlation-preserving releases on correlated data.
        picks = rng.integers(0, n, size=(size, m))
        dist, _ = tree.query(px[picks, np.arange(m)], p=p)
        return np.asarray(dist)
    # Whole records drawn from X, each matched while its own anonymized counterpart is left out:
    # the joint distribution is kept and only the true link is removed, so what remains is the
    # distance at which a record like this one is matched by chance.
    picks = rng.integers(0, n, size=size)
    dist, idx = tree.query(px[picks], k=2, p=p)
    own = idx[:, 0] == picks
    return np.where(own, dist[:, 1], dist[:, 0])


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
    if not columns:
        raise ParameterError("name at least one column for the intruder check")
    if metric not in METRICS:
        raise ParameterError(f"metric must be one of {', '.join(METRICS)}, not {metric!r}")
    if baseline not in BASELINES:
        raise ParameterError(f"baseline must be one of {', '.join(BASELINES)}, not {baseline!r}")
    x = _numeric_matrix(original, columns, "original")
    y = _numeric_matrix(anonymized, columns, "anonymized")
    _same_length(x, y)
    n = x.shape[0]
    size = int(n_baseline) if n_baseline is not None else max(n, 2000)
    if size < 20:
        raise ParameterError("the random baseline needs at least 20 records")
    px, pz, p = _space(x, y, metric)
    tree = cKDTree(pz)
    match, linked = tree.query(px, p=p)
    chance = _baseline_distances(tree, px, p, kind=baseline, size=size, rng=rng)
    threshold = float(np.percentile(chance, DENIABILITY_PERCENTILE))
    return IntruderResult(
        columns=tuple(columns),
        metric=metric,
        baseline=baseline,
        n_records=n,
        n_baseline=size,
        threshold=threshold,
        # Strict: a match exactly at the threshold happens by chance at least 5% of the time.
        not_deniable_share=float(np.mean(match < threshold)),
        correct_link_share=float(np.mean(linked == np.arange(n))),
        match_distances=match,
        baseline_distances=chance,
        permutation_distances=np.abs(_ranks(x) - _ranks(y)).max(axis=1),
    )
