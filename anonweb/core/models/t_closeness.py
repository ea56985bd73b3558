"""t-closeness (Li, Li & Venkatasubramanian 2007): in every class, the Earth Mover's Distance
between the class's sensitive distribution and the whole table's is at most t.

Three ground distances, each computed from the sparse (class, value, count) triples: a class
only pays for the values it contains, plus closed forms for the values it lacks.

* equal (categorical): EMD = 1/2 sum |p_i - q_i| over all values of the table.
* ordered (numeric): over the m sorted distinct values of the whole table,
  EMD = 1/(m-1) sum_i |sum_{j<=i} (p_j - q_j)|; a missing value sorts last.
* hierarchical (a value hierarchy is given): EMD = sum over inner nodes N of
  height(N)/H * min(pos_extra(N), neg_extra(N)), which telescopes to (S_0 + ... + S_{H-1}) / H
  with S_l the positive part of the class's surplus summed over the nodes of level l; a missing
  value is a leaf of its own directly under the root, so a class of missing values is as far
  from the others as the tree allows.
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
from anonweb.core.io.hierarchy import MISSING, UNCOVERED, Hierarchy
from anonweb.core.models.base import (
    LOWER,
    CliFlag,
    Figure,
    ModelCheck,
    PrivacyModel,
    cli_number,
    require_column,
    require_number,
)
from anonweb.core.models.counts import ClassData, SensitiveCounts, SensitiveDomain
from anonweb.core.risk.classes import dense_codes

DISTANCES = ("equal", "ordered", "hierarchical")
# a class exactly at t passes though the EMD's float sums land a hair above it
TOLERANCE = 1e-12


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


def equal_distance(sc: SensitiveCounts) -> NDArray[Any]:
    """Per-class EMD with every pair of values at distance 1."""
    n = sc.n_classes
    present, q_present = np.zeros(n), np.zeros(n)
    for s, e, j0, j1 in sc.slices():  # whole classes at a time: the same sums, less memory
        q = sc.domain.share[sc.val[s:e]]
        local = sc.cls[s:e] - j0
        q_present[j0:j1] = np.bincount(local, weights=q, minlength=j1 - j0)
        gap = np.subtract(sc.slice_share(s, e), q, out=q)
        np.abs(gap, out=gap)
        present[j0:j1] = np.bincount(local, weights=gap, minlength=j1 - j0)
    # Values absent from a class contribute their table share q_i each: 0.5 (present + 1 -
    # q_present), in place (the same operations in the same order)
    present += 1.0
    present -= q_present
    del q_present
    present *= 0.5
    return np.clip(present, 0.0, 1.0, out=present)


def equal_distance_dense(domain: SensitiveDomain, hist: NDArray[Any]) -> NDArray[Any]:
    """:func:`equal_distance` from a dense (classes x values) matrix of counts."""
    sizes = hist.sum(axis=1, keepdims=True)
    p = hist / np.maximum(sizes, 1)
    return np.asarray(np.clip(0.5 * np.abs(p - domain.share).sum(axis=1), 0.0, 1.0))


def ordered_distance(sc: SensitiveCounts) -> NDArray[Any]:
    """Per-class EMD over the sorted distinct values (ground distance |i-j| / (m-1))."""
    m = len(sc.values)
    n = sc.n_classes
    if m < 2:
        return np.zeros(n)
    rank = sc.domain.ranks
    q_sorted = np.zeros(m)
    q_sorted[rank] = sc.domain.share
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


def _abs_sum(
    level: NDArray[Any], a: NDArray[Any], b: NDArray[Any], big_q: NDArray[Any], prefix: NDArray[Any]
) -> NDArray[Any]:
    """sum_{i=a..b} |level - Q_i| for sorted Q, vectorized over segments."""
    t = np.clip(np.searchsorted(big_q, level, side="right"), a, b + 1)
    below = (t - a) * level - (prefix[t] - prefix[a])
    above = (prefix[b + 1] - prefix[t]) - (b + 1 - t) * level
    return np.asarray(below + above)


def hierarchy_nodes(hierarchy: Hierarchy, values: pd.Index) -> list[NDArray[Any]]:
    """Node code per value code at each level 0..H-1; a missing value is a leaf under the root.

    Values are matched as :meth:`Hierarchy.rows_of` does (by value, so 39.0 finds ``39``).
    """
    rows = hierarchy.rows_of(values)
    if (rows == UNCOVERED).any():
        hierarchy.validate_covers(pd.Series(values[rows == UNCOVERED], name=hierarchy.attribute))
    height = hierarchy.height
    levels = []
    for level in range(height):
        top = level == height - 1
        labels = [
            hierarchy.rows[r][level]
            if r != MISSING
            else (hierarchy.rows[0][-1] if top else "\x00missing")
            for r in rows
        ]
        levels.append(dense_codes(np.asarray(labels, dtype=object))[0])
    return levels


def _domain_nodes(domain: SensitiveDomain, hierarchy: Hierarchy) -> list[NDArray[Any]]:
    # keyed by the hierarchy object, held in the value so that its id cannot be reused
    got = domain.cached(
        ("hierarchy", id(hierarchy)), lambda: (hierarchy, hierarchy_nodes(hierarchy, domain.values))
    )
    return got[1]


def hierarchical_distance(sc: SensitiveCounts, hierarchy: Hierarchy) -> NDArray[Any]:
    """Per-class hierarchical EMD (the t-closeness paper's formula)."""
    nodes = _domain_nodes(sc.domain, hierarchy)
    top = len(nodes) - 1
    n = sc.n_classes
    if top < 1:
        return np.zeros(n)
    q_value = sc.domain.share
    cost = np.zeros(n)
    for level in range(1, top + 1):  # one vectorized pass per hierarchy level, not per class
        cost += level / top * _level_cost(sc, nodes[level - 1], nodes[level], q_value, n)
    return np.clip(cost, 0.0, 1.0)


def _level_cost(
    sc: SensitiveCounts,
    child_of: NDArray[Any],
    parent_of: NDArray[Any],
    q_value: NDArray[Any],
    n: int,
) -> NDArray[Any]:
    mc, mp = int(child_of.max()) + 1, int(parent_of.max()) + 1
    q_child = np.bincount(child_of, weights=q_value, minlength=mc)
    q_parent = np.bincount(parent_of, weights=q_value, minlength=mp)
    parent_of_child = np.zeros(mc, dtype=np.int64)
    parent_of_child[child_of] = parent_of
    # Class mass on each child node it touches, then the positive surplus per child.
    # int64: the class numbers may be stored in int32, the product not
    ck, cinv = np.unique(sc.cls.astype(np.int64) * mc + child_of[sc.val], return_inverse=True)
    cinv = cinv.reshape(-1)
    p_child = np.bincount(cinv, weights=sc.share)
    c_cls, c_node = np.divmod(ck, mc)
    surplus = np.maximum(p_child - q_child[c_node], 0.0)
    pk, pinv = np.unique(c_cls * mp + parent_of_child[c_node], return_inverse=True)
    pinv = pinv.reshape(-1)
    pos = np.bincount(pinv, weights=surplus)
    p_parent = np.bincount(pinv, weights=p_child)
    p_cls, p_node = np.divmod(pk, mp)
    # Children's extras sum to the parent's extra, so neg_extra = pos_extra - extra(parent).
    neg = pos - (p_parent - q_parent[p_node])
    return np.bincount(p_cls, weights=np.maximum(np.minimum(pos, neg), 0.0), minlength=n)


def hierarchical_distance_dense(
    domain: SensitiveDomain, hist: NDArray[Any], hierarchy: Hierarchy
) -> NDArray[Any]:
    """:func:`hierarchical_distance` from a dense (classes x values) matrix of counts.

    The same EMD in closed form: an inner node N costs height(N)/H * min(pos_extra(N),
    neg_extra(N)) = height(N)/H * (pos_extra(N) - max(extra(N), 0)), and ``pos_extra(N)`` sums
    ``max(extra(c), 0)`` over the children c of N. Summed over the tree the terms telescope, so
    with S_l the sum of ``max(extra(N), 0)`` over the nodes N of level l (S_H = 0 at the root),
    EMD = (S_0 + ... + S_{H-1}) / H: one positive-part sum per level. Each level's counts are
    sums of whole counts over contiguous columns (the values in tree order), so exact.
    """
    nodes = _domain_nodes(domain, hierarchy)
    n = hist.shape[0]
    top = len(nodes) - 1
    if top < 1:
        return np.zeros(n)
    order, starts, shares = _domain_tree_order(domain, hierarchy)
    sizes = np.maximum(hist.sum(axis=1, keepdims=True), 1)
    cost = np.maximum(hist / sizes - domain.share, 0.0).sum(axis=1)
    counts = hist[:, order] if starts else hist
    for first, share in zip(starts, shares):
        level = np.add.reduceat(counts, first, axis=1)
        cost += np.maximum(level / sizes - share, 0.0).sum(axis=1)
    return np.asarray(np.clip(cost / top, 0.0, 1.0))


def _domain_tree_order(
    domain: SensitiveDomain, hierarchy: Hierarchy
) -> tuple[NDArray[Any], list[NDArray[Any]], list[NDArray[Any]]]:
    """The values in tree order (the values under any inner node side by side), and for each
    level 1..H-1 below the root: the first position of each node in that order and the node's
    share of the table; derived once per domain."""

    def build() -> tuple[Hierarchy, tuple[NDArray[Any], list[NDArray[Any]], list[NDArray[Any]]]]:
        nodes = _domain_nodes(domain, hierarchy)
        inner = nodes[1:-1]  # levels strictly between the values and the root
        order = np.lexsort(tuple(nodes[: len(nodes) - 1]))
        starts, shares = [], []
        for codes in inner:
            ordered = codes[order]
            first = np.flatnonzero(np.r_[True, ordered[1:] != ordered[:-1]])
            starts.append(first)
            shares.append(np.add.reduceat(domain.share[order], first))
        return hierarchy, (order, starts, shares)

    got = domain.cached(("hierarchy tree order", id(hierarchy)), build)
    return got[1]


def _dense_distance(
    dense: tuple[SensitiveDomain, NDArray[Any]], distance: str, hierarchy: Hierarchy | None
) -> NDArray[Any]:
    """Each class's EMD from a dense count matrix (equal or hierarchical distance)."""
    if distance == "hierarchical":
        assert hierarchy is not None  # checked by the model
        return hierarchical_distance_dense(*dense, hierarchy)
    return equal_distance_dense(*dense)


def distance_per_class(
    sc: SensitiveCounts, distance: str, hierarchy: Hierarchy | None = None
) -> NDArray[Any]:
    """Each class's EMD to the table under the named ground distance."""
    if distance == "equal":
        return equal_distance(sc)
    if distance == "ordered":
        return ordered_distance(sc)
    if distance == "hierarchical":
        if hierarchy is None:
            raise ParameterError(f"hierarchical t-closeness for {sc.attribute!r} needs a hierarchy")
        return hierarchical_distance(sc, hierarchy)
    raise ParameterError(f"unknown t-closeness distance {distance!r}: use {', '.join(DISTANCES)}")


def _t_spec(column: str | None, value: str, distance: str) -> dict[str, Any]:
    """``--t-equal SA=T`` and ``--t-ordered SA=T``."""
    return {
        "model": "t_closeness",
        "sensitive": column,
        "t": cli_number(value, f"t_{distance}"),
        "distance": distance,
    }


@dataclass(frozen=True)
class TCloseness(PrivacyModel):
    sensitive: str
    t: float
    distance: str = "equal"  # equal | ordered | hierarchical
    hierarchy: Hierarchy | None = None
    kind = "t_closeness"
    monotonic = False
    worst = "max"
    schema = sch.obj(
        {
            "sensitive": sch.column("The sensitive column the model protects"),
            "t": sch.number(
                "Largest distance between a class's and the table's distribution",
                minimum=0,
                maximum=1,
            ),
            "distance": sch.string("Earth mover's distance over", enum=DISTANCES, default="equal"),
        },
        required=["sensitive", "t"],
        labels={
            "sensitive": "Sensitive column",
            "t": "Largest distance (t)",
            "distance": "Distance",
        },
        title="t-closeness",
    )
    # measured by the profile with the distance the column's type or hierarchy picks
    figures = (Figure("t_closeness", "t (closeness)", LOWER, own_cell=True),)
    cli_flags = (
        CliFlag("--t-equal", "SA=T", lambda col, v: _t_spec(col, v, "equal")),
        CliFlag("--t-ordered", "SA=T", lambda col, v: _t_spec(col, v, "ordered")),
    )
    policy_code = "risk_t"

    @classmethod
    def from_spec(cls, params: Mapping[str, Any], hierarchies: Mapping[str, Any]) -> PrivacyModel:
        kwargs = dict(params)
        if kwargs.get("distance") == "hierarchical":
            kwargs["hierarchy"] = hierarchies.get(kwargs["sensitive"])
        return cls(**kwargs)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sensitive", require_column(self.sensitive))
        if not 0 <= require_number(self.t, "t") <= 1:
            raise ParameterError(f"t must be between 0 and 1, got {self.t}")
        if self.distance not in DISTANCES:
            raise ParameterError(
                f"unknown t-closeness distance {self.distance!r} (equal, ordered, hierarchical)"
            )
        if self.distance == "hierarchical" and self.hierarchy is None:
            raise ParameterError(
                f"hierarchical t-closeness on {self.sensitive!r} needs a hierarchy"
            )

    def describe(self) -> str:
        return f"{self.distance}-distance {self.t}-closeness on {self.sensitive}"

    def measure(self, data: ClassData) -> NDArray[Any]:
        dense = data.histogram(self.sensitive) if self.distance != "ordered" else None
        if dense is not None:
            # read by the coverage condition's bound too: computed once per set of classes
            key = ("t_closeness", self.sensitive, self.distance, id(self.hierarchy))
            return data.figure(key, lambda: _dense_distance(dense, self.distance, self.hierarchy))
        return distance_per_class(data.sensitive(self.sensitive), self.distance, self.hierarchy)

    def passes(self, data: ClassData) -> NDArray[Any]:
        return self.measure(data) <= self.t + TOLERANCE

    def policy_message(self, check: ModelCheck, *, quasi_identifiers: Sequence[str]) -> str:
        return (
            f"After the plan, {check.failing_records} record(s) in "
            f"{check.failing_classes} class(es) have a {self.sensitive} distribution further "
            f"than t = {self.t:g} from the table's (largest: {check.value:.3g})."
        )

    def policy_facts(self, check: ModelCheck) -> dict[str, Any]:
        return {"t": check.value, "policy_t": self.t}

    def implied(self) -> tuple[PrivacyModel, ...]:
        if self.distance == "ordered":
            return ()
        return (TClosenessCoverage(self.sensitive, self.t, self.distance, self.hierarchy),)


# the coverage bound is checked this far above t: a class it rejects is farther from t than
# the float error of any distance computed, so t-closeness rejects it too
COVERAGE_MARGIN = 1e-9
# up to this many distinct values, the bound of every set of values is tabulated once
COVERAGE_TABLE_VALUES = 16


def _all_subsets(m: int) -> NDArray[Any]:
    """Row ``mask`` marks the values whose bits are set in ``mask`` (2**m x m)."""
    return np.asarray((np.arange(1 << m)[:, None] >> np.arange(m)) & 1, dtype=bool)


@dataclass(frozen=True)
class TClosenessCoverage(PrivacyModel):
    """A necessary condition of :class:`TCloseness` (equal or hierarchical distance) that only
    grows easier to meet as classes merge, so the search can treat it as monotonic.

    A class holds mass only on the values it contains: with Q the table's share of those
    values, sum_v min(p_v, q_v) <= Q, so its equal-distance EMD, 1 - sum_v min(p_v, q_v), is at
    least 1 - Q. Likewise, for the hierarchical distance, the level-l term S_l is at least
    1 - Q_l, with Q_l the table's share of the level-l nodes the class touches, so the EMD is
    at least the mean of 1 - Q_l over the levels below the root. Merging classes only adds
    values (and nodes), so a merge of classes of which one meets the bound meets it too.

    Beyond which classes fail, the distance itself bounds the records a node's
    specializations must suppress (:meth:`least_suppressed`).
    """

    sensitive: str
    t: float
    distance: str = "equal"
    hierarchy: Hierarchy | None = None
    kind = "t_closeness_coverage"
    monotonic = True
    worst = "max"
    fields = ("sensitive", "t", "distance")

    def describe(self) -> str:
        return f"values that can make a {self.distance}-distance {self.t}-close class"

    def measure(self, data: ClassData) -> NDArray[Any]:
        """The lower bound on each class's EMD that the values it contains set."""
        domain, present = data.present(self.sensitive)
        m = len(domain.values)
        if m > COVERAGE_TABLE_VALUES:
            return self._bound(domain, present)
        # few values: the bound of every set of values, looked up by the set's bit mask
        table = domain.cached(
            ("coverage", self.distance, id(self.hierarchy)),
            lambda: (self.hierarchy, self._bound(domain, _all_subsets(m))),
        )[1]
        masks = present @ (2.0 ** np.arange(m))  # exact: sums of distinct powers of two
        return np.asarray(table[masks.astype(np.intp)])

    def _bound(self, domain: SensitiveDomain, present: NDArray[Any]) -> NDArray[Any]:
        """The bound for classes containing the values ``present`` marks (classes x values)."""
        bound = 1.0 - (present * domain.share).sum(axis=1)
        if self.distance == "hierarchical":
            assert self.hierarchy is not None
            nodes = _domain_nodes(domain, self.hierarchy)
            top = len(nodes) - 1
            if top < 1:
                return np.zeros(len(present))
            order, starts, shares = _domain_tree_order(domain, self.hierarchy)
            ordered = present[:, order] if starts else present
            for first, share in zip(starts, shares):
                touched = np.logical_or.reduceat(ordered, first, axis=1)
                bound += 1.0 - (touched * share).sum(axis=1)
            bound /= top
        return np.asarray(np.clip(bound, 0.0, 1.0))

    def passes(self, data: ClassData) -> NDArray[Any]:
        return self.measure(data) <= self.t + COVERAGE_MARGIN

    def least_suppressed(
        self, data: ClassData, settled: NDArray[Any], k: int = 1
    ) -> NDArray[Any] | None:
        """Records each class's specializations must suppress, from its distance E.

        Proof. Both distances are convex in the class's distribution q (the equal one is a
        sum of |q_v - p_v|, the hierarchical one a sum of positive parts of sums of q), and
        at most D, the largest distance of a class holding one value (a convex function on
        the simplex peaks at a corner). Split a class of n records into parts that pass (f
        records kept out: the others, n - f, each part within t) and parts that fail: q is
        the size-weighted mean of the parts, so n E <= (n - f) t + f D, and
        f >= n (E - t) / (D - t). Summed over a merge, n E is at most the parts' sum
        (convexity), so the bound of a merge is at most the sum of its parts' bounds.
        """
        dense = data.histogram(self.sensitive)
        if dense is None:
            return None
        model = TCloseness(self.sensitive, self.t, self.distance, self.hierarchy)
        domain, hist = dense
        # the model's own figures (computed once for the classes), read in its favour: the
        # threshold raised by its tolerance and more, the largest distance raised too
        t = self.t + TOLERANCE + COVERAGE_MARGIN
        largest = _largest_distance(domain, self.distance, self.hierarchy) + COVERAGE_MARGIN
        if largest <= t:
            return np.zeros(len(hist), dtype=np.int64)
        sizes = hist.sum(axis=1)
        over = np.maximum(model.measure(data) - t, 0.0) / (largest - t)
        least = np.ceil(sizes * over - COVERAGE_MARGIN * (sizes + 1.0))
        return np.asarray(np.where(settled, 0, least.clip(0, None)), dtype=np.int64)


def _largest_distance(domain: SensitiveDomain, distance: str, hierarchy: Hierarchy | None) -> float:
    """The largest distance a class can have from the table: that of a class of one value."""
    return domain.cached(
        ("largest distance", distance, id(hierarchy)),
        lambda: (
            hierarchy,
            float(_dense_distance((domain, np.eye(len(domain.values))), distance, hierarchy).max()),
        ),
    )[1]
