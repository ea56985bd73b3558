"""t-closeness: the Earth Mover's Distance between each class's sensitive distribution and the
whole table's (Li, Li & Venkatasubramanian 2007, "t-Closeness: Privacy beyond k-anonymity and
l-diversity"). The table's t is the largest class distance.

* equal distance (categorical): EMD = 1/2 sum |p_i - q_i| over all values of the table.
* ordered distance (numeric): over the m sorted distinct values of the whole table,
  EMD = 1/(m-1) sum_i |sum_{j<=i} (p_j - q_j)|.
* hierarchical distance (a value hierarchy is given): EMD = sum over inner nodes N of
  height(N)/H * min(pos_extra(N), neg_extra(N)).

Every distance is computed from the sparse (class, value, count) triples: a class only pays for
the values it contains, plus closed forms for the values it lacks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from anonweb.core.errors import HierarchyError, ParameterError
from anonweb.core.io.hierarchy import Hierarchy
from anonweb.core.models.diversity import SensitiveCounts, counts_for
from anonweb.core.risk.classes import dense_codes

DISTANCES = ("equal", "ordered", "hierarchical")


def pick_distance(series: pd.Series, hierarchy: Hierarchy | None, distance: str | None) -> str:
    """Hierarchical if a hierarchy is given, ordered for a numeric column, equal otherwise."""
    if distance is None:
        if hierarchy is not None:
            return "hierarchical"
        numeric = pd.api.types.is_numeric_dtype(series) and not pd.api.types.is_bool_dtype(series)
        return "ordered" if numeric else "equal"
    if distance not in DISTANCES:
        raise ParameterError(
            f"unknown t-closeness distance {distance!r}: use {', '.join(DISTANCES)}"
        )
    if distance == "hierarchical" and hierarchy is None:
        raise ParameterError(
            f"hierarchical t-closeness for {series.name!r} needs a hierarchy for that column"
        )
    return distance


def _table_share(sc: SensitiveCounts) -> np.ndarray:
    return sc.value_counts / sc.classes.rows


def equal_distance(sc: SensitiveCounts) -> np.ndarray:
    """Per-class EMD with every pair of values at distance 1."""
    q = _table_share(sc)[sc.val]
    n = sc.classes.count
    present = np.bincount(sc.cls, weights=np.abs(sc.share - q), minlength=n)
    q_present = np.bincount(sc.cls, weights=q, minlength=n)
    # Values absent from a class contribute their table share q_i each.
    return np.clip(0.5 * (present + 1.0 - q_present), 0.0, 1.0)


def value_ranks(values: pd.Index) -> np.ndarray:
    """Rank (0-based) of each distinct value in ascending order; missing values last."""
    s = pd.Series(values, dtype=values.dtype if values.dtype != bool else object)
    try:
        ranks = s.rank(method="first", na_option="bottom")
    except TypeError:  # mixed types: order by text
        ranks = s.where(s.isna(), s.astype(str)).rank(method="first", na_option="bottom")
    return ranks.to_numpy().astype(np.int64) - 1


def ordered_distance(sc: SensitiveCounts) -> np.ndarray:
    """Per-class EMD over the sorted distinct values (ground distance |i-j| / (m-1))."""
    m = len(sc.values)
    n = sc.classes.count
    if m < 2:
        return np.zeros(n)
    rank = value_ranks(sc.values)
    q_sorted = np.zeros(m)
    q_sorted[rank] = _table_share(sc)
    big_q = np.cumsum(q_sorted)  # Q_i: the table's cumulative share up to sorted value i
    prefix = np.concatenate(([0.0], np.cumsum(big_q)))  # prefix[i] = Q_0 + ... + Q_{i-1}
    pos = rank[sc.val]
    order = np.lexsort((pos, sc.cls))
    cls, pos, p = sc.cls[order], pos[order], sc.share[order]
    # Running class cumulative P within each class.
    cum = np.cumsum(p)
    first = np.r_[True, cls[1:] != cls[:-1]]
    offset = np.maximum.accumulate(np.where(first, cum - p, 0.0))
    big_p = cum - offset
    # Segment of each triple: from its value to just before the class's next value.
    last = np.r_[cls[1:] != cls[:-1], True]
    end = np.where(last, m - 1, np.r_[pos[1:], 0] - 1)
    total = _abs_sum(big_p, pos, end, big_q, prefix)
    # Before a class's first value its cumulative P is 0, so the gap is Q itself.
    total += np.where(first, prefix[pos], 0.0)
    return np.clip(np.bincount(cls, weights=total, minlength=n) / (m - 1), 0.0, 1.0)


def _abs_sum(level, a, b, big_q, prefix) -> np.ndarray:
    """sum_{i=a..b} |level - Q_i| for sorted Q, vectorized over segments."""
    t = np.clip(np.searchsorted(big_q, level, side="right"), a, b + 1)
    below = (t - a) * level - (prefix[t] - prefix[a])
    above = (prefix[b + 1] - prefix[t]) - (b + 1 - t) * level
    return below + above


def hierarchy_nodes(hierarchy: Hierarchy, values: pd.Index) -> list[np.ndarray]:
    """Node code per value code at each level 0..H; a missing value is a leaf under the root."""
    height = hierarchy.height
    text = ["" if pd.isna(v) else str(v) for v in values]
    uncovered = hierarchy.uncovered(values)
    if uncovered:
        shown = ", ".join(repr(v) for v in uncovered[:20])
        raise HierarchyError(
            f"the hierarchy for {hierarchy.attribute or 'the sensitive attribute'!r} "
            f"does not cover {len(uncovered)} value(s): {shown}"
        )
    levels = []
    for level in range(height):
        mapping = hierarchy.mapping(level)
        top = level == height - 1
        labels = [
            (
                mapping[t]
                if not pd.isna(v)
                else ("\x00missing" if not top else hierarchy.rows[0][-1])
            )
            for v, t in zip(values, text, strict=True)
        ]
        levels.append(dense_codes(np.asarray(labels, dtype=object))[0])
    return levels


def hierarchical_distance(sc: SensitiveCounts, hierarchy: Hierarchy) -> np.ndarray:
    """Per-class hierarchical EMD (the t-closeness paper's formula)."""
    nodes = hierarchy_nodes(hierarchy, sc.values)
    top = len(nodes) - 1
    n = sc.classes.count
    if top < 1:
        return np.zeros(n)
    q_value = _table_share(sc)
    cost = np.zeros(n)
    for level in range(1, top + 1):  # one vectorized pass per hierarchy level, not per class
        cost += level / top * _level_cost(sc, nodes[level - 1], nodes[level], q_value, n)
    return np.clip(cost, 0.0, 1.0)


def _level_cost(sc, child_of, parent_of, q_value, n) -> np.ndarray:
    mc, mp = child_of.max() + 1, parent_of.max() + 1
    q_child = np.bincount(child_of, weights=q_value, minlength=mc)
    q_parent = np.bincount(parent_of, weights=q_value, minlength=mp)
    parent_of_child = np.zeros(mc, dtype=np.int64)
    parent_of_child[child_of] = parent_of
    # Class mass on each child node it touches, then the positive surplus per child.
    ck, cinv = np.unique(sc.cls * mc + child_of[sc.val], return_inverse=True)
    p_child = np.bincount(cinv, weights=sc.share)
    c_cls, c_node = np.divmod(ck, mc)
    surplus = np.maximum(p_child - q_child[c_node], 0.0)
    pk, pinv = np.unique(c_cls * mp + parent_of_child[c_node], return_inverse=True)
    pos = np.bincount(pinv, weights=surplus)
    p_parent = np.bincount(pinv, weights=p_child)
    p_cls, p_node = np.divmod(pk, mp)
    # Children's extras sum to the parent's extra, so neg_extra = pos_extra - extra(parent).
    neg = pos - (p_parent - q_parent[p_node])
    return np.bincount(p_cls, weights=np.maximum(np.minimum(pos, neg), 0.0), minlength=n)


@dataclass(frozen=True)
class TCloseness:
    """t (largest class distance) for one sensitive attribute and the distance used."""

    attribute: str
    t: float
    distance: str
    per_class_t: np.ndarray = field(repr=False, compare=False)

    def satisfies(self, t: float) -> bool:
        return self.t <= t

    def per_class(self) -> dict[str, list]:
        return {"t": self.per_class_t.tolist()}

    def to_dict(self) -> dict:
        return {"t_closeness": self.t, "t_distance": self.distance}


def t_closeness_of(
    sc: SensitiveCounts, series: pd.Series, *, distance: str | None, hierarchy: Hierarchy | None
) -> TCloseness:
    kind = pick_distance(series, hierarchy, distance)
    if kind == "equal":
        per = equal_distance(sc)
    elif kind == "ordered":
        per = ordered_distance(sc)
    else:
        if hierarchy is None:  # pick_distance has refused this already; keeps types honest
            raise ParameterError(f"hierarchical t-closeness for {sc.attribute!r} needs a hierarchy")
        per = hierarchical_distance(sc, hierarchy)
    return TCloseness(sc.attribute, float(per.max()), kind, per)


def t_closeness(
    df: pd.DataFrame,
    *,
    quasi_identifiers: Sequence[str],
    sensitive: str,
    distance: str | None = None,
    hierarchy: Hierarchy | None = None,
) -> TCloseness:
    """t-closeness of ``sensitive``; ``distance`` defaults as :func:`pick_distance` says."""
    sc = counts_for(df, quasi_identifiers=quasi_identifiers, sensitive=sensitive)
    return t_closeness_of(sc, df[sensitive], distance=distance, hierarchy=hierarchy)
