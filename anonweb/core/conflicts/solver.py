"""Which unknowns a system of sum equations pins down exactly.

Every non-DP aggregate a release publishes about a numeric column (a group's mean on each of its
rows, a group total, a mean with its count) is one equation ``sum(x[i] for i in group) = total``
over the source's values ``x``. An unknown ``x[i]`` is *determined* when every solution gives it
the same value: when the unit vector ``e_i`` lies in the row space of the equations, i.e. when
no vector of the null space is non-zero at ``i``.

The test used for every unknown at once: draw random vectors of the null space; a determined
unknown is zero in all of them, any other is non-zero in each with probability 1 (to within a
tolerance of 1e-9 of the largest entry; two vectors). One particular solution gives the values of
the determined unknowns (they are the same in every solution). Random null-space vectors and a
particular solution come from whichever method suits each connected part of the system:

* **graph-like** parts, where each unknown is in at most two equations (two releases grouping the
  same records, or one grouping and some records left out): the equations are the nodes of a
  graph, the unknowns its edges (an unknown in one equation joins a common free node). Values on
  the edges off a spanning tree are free; the tree's are then fixed, leaf to root, by
  alternating subtree sums over a preorder (vectorised). Seed 000's BMI example is one such part;
  a determined unknown is a bridge of the graph;
* **small** parts (up to 256 unknowns): a batched dense SVD (null basis and pseudo-inverse);
* the rest: sparse Gaussian elimination, unknowns ordered by the caller's key (the column's
  value, which keeps interval-shaped groups interval-shaped and the fill-in small), then
  back-substitution for the particular solution and the null vectors. A work budget bounds it;
  parts past the budget are reported as *undecided*, never as safe.

Large equations (a table's totals over big groups) would merge everything into one part: up to
:data:`COARSE_MAX` of them are set aside, the rest is solved, and then they are imposed on the
null vectors (the null space of the whole system is the part of the smaller system's null space
that they also annihilate: a small dense problem).

The input is pure structure plus right-hand sides: no pandas, no data frame.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from scipy.sparse import csgraph

# Entries of eliminated rows smaller than this are rounding residue of an exact zero: the input
# coefficients are all 1, so genuine entries are ratios of small integers.
_DROP = 1e-10
# A null-space entry at most this fraction of the largest one is a zero.
_NULL_TOL = 1e-9
_SAMPLES = 2
DENSE_MAX = 256
COARSE_SIZE = 64  # an equation over more unknowns than this may be set aside
COARSE_MAX = 64
DEFAULT_BUDGET = 20_000_000  # row-entry updates of the elimination within one solve


@dataclass(frozen=True)
class Equations:
    """``rhs[e] = sum(x[v] for v in var[ptr[e]:ptr[e+1]])`` for each equation ``e``; the
    unknowns of an equation are distinct."""

    n_vars: int
    ptr: NDArray[Any]
    var: NDArray[Any]
    rhs: NDArray[Any]

    @property
    def count(self) -> int:
        return int(self.ptr.size - 1)

    def sizes(self) -> NDArray[Any]:
        return np.diff(self.ptr)

    def eq_of_entry(self) -> NDArray[Any]:
        return np.repeat(np.arange(self.count), self.sizes())

    def subset(self, keep: NDArray[Any]) -> Equations:
        sizes = self.sizes()[keep]
        mask = np.repeat(keep, self.sizes())
        return Equations(self.n_vars, np.r_[0, np.cumsum(sizes)], self.var[mask], self.rhs[keep])


@dataclass(frozen=True)
class Solution:
    determined: NDArray[Any]  # bool per unknown
    values: NDArray[Any]  # float per unknown: the value every solution gives it (where determined)
    undecided: NDArray[Any]  # bool per unknown: in a part past the work budget


def equations_from_lists(
    n_vars: int, groups: Sequence[Sequence[int]], rhs: Sequence[float] | NDArray[Any]
) -> Equations:
    """From a list of index lists (tests, small cases)."""
    sizes = [len(g) for g in groups]
    var = (
        np.concatenate([np.asarray(g, dtype=np.int64) for g in groups])
        if groups
        else np.zeros(0, dtype=np.int64)
    )
    return Equations(
        n_vars, np.r_[0, np.cumsum(sizes)].astype(np.int64), var, np.asarray(rhs, float)
    )


def solve(
    eqs: Equations,
    *,
    order: NDArray[Any] | None = None,
    budget: int = DEFAULT_BUDGET,
    seed: int = 0,
    dense_max: int = DENSE_MAX,
    coarse_size: int = COARSE_SIZE,
    coarse_max: int = COARSE_MAX,
) -> Solution:
    """Which unknowns the equations fix, and their values.

    ``order`` ranks the unknowns for elimination (lower first); ``seed`` draws the random
    null-space vectors (the answer does not depend on it, except with probability ~0). The
    last three choose between methods (tests set them to exercise every path).
    """
    n = eqs.n_vars
    rng = np.random.default_rng(seed)
    sizes = eqs.sizes()
    coarse = np.zeros(eqs.count, dtype=bool)
    big = np.flatnonzero(sizes > coarse_size)
    if big.size:
        coarse[big[np.argsort(-sizes[big], kind="stable")[:coarse_max]]] = True
    cols = _SAMPLES + int(coarse.sum())
    x = np.zeros(n)
    null = _random_free(rng, n, cols)  # unknowns in no fine equation are free
    undecided = np.zeros(n, dtype=bool)
    fine = eqs.subset(~coarse)
    if fine.count:
        _solve_fine(fine, order, budget, rng, x, null, undecided, dense_max)
    if coarse.any():
        x, null = _impose(eqs.subset(coarse), x, null, rng)
    else:
        null = null[:, :_SAMPLES]
    scale = max(1.0, float(np.abs(null).max(initial=0.0)))
    determined = (np.abs(null) <= _NULL_TOL * scale).all(axis=1) & ~undecided
    values = np.where(determined, x, np.nan)
    return Solution(determined, values, undecided)


def _random_free(rng: np.random.Generator, rows: int, cols: int) -> NDArray[Any]:
    # Gaussian draws: an exact zero has probability 0, one below the tolerance about 1e-9.
    return np.asarray(rng.standard_normal((rows, cols)))


def _impose(
    extra: Equations, x: NDArray[Any], null: NDArray[Any], rng: np.random.Generator
) -> tuple[NDArray[Any], NDArray[Any]]:
    """Restrict the null vectors (and the particular solution) to those that also satisfy
    ``extra``: ``null @ z`` for ``z`` in the null space of ``T @ null``."""
    t = sparse.csr_matrix(
        (np.ones(extra.var.size), extra.var, extra.ptr), shape=(extra.count, x.size)
    )
    tv = np.asarray(t @ null)
    u, s, vh = np.linalg.svd(tv, full_matrices=True)
    rank = int((s > 1e-9 * max(1.0, s.max(initial=0.0))).sum())
    z = vh[rank:].T  # null space of T @ null, at least _SAMPLES columns
    residual = extra.rhs - t @ x
    coef = vh[:rank].T @ ((u[:, :rank].T @ residual) / s[:rank])
    x = x + null @ coef
    mix = z @ rng.standard_normal((z.shape[1], _SAMPLES))
    return x, null @ mix


def _solve_fine(
    eqs: Equations,
    order: NDArray[Any] | None,
    budget: int,
    rng: np.random.Generator,
    x: NDArray[Any],
    null: NDArray[Any],
    undecided: NDArray[Any],
    dense_max: int,
) -> None:
    eq_of = eqs.eq_of_entry()
    n, m = eqs.n_vars, eqs.count
    degree = np.bincount(eqs.var, minlength=n)
    adj = sparse.coo_matrix(
        (np.ones(eqs.var.size, dtype=np.int8), (eq_of, m + eqs.var)), shape=(m + n, m + n)
    )
    n_comp, labels = csgraph.connected_components(adj, directed=False)
    labels = labels.astype(np.int64)  # scipy answers in int32: products would overflow
    comp_eq = labels[:m]
    comp_var = labels[m:]
    used = degree > 0
    max_deg = np.zeros(n_comp, dtype=np.int64)
    np.maximum.at(max_deg, comp_var[used], degree[used])
    touches_free = np.zeros(n_comp, dtype=bool)
    touches_free[comp_var[degree == 1]] = True
    graph_like = max_deg <= 2
    groundless = graph_like & ~touches_free
    if groundless.any():
        graph_like &= ~(groundless & _odd_cycle_components(eqs, eq_of, degree, comp_eq, n_comp))
    atoms_per_comp = np.bincount(comp_var[used], minlength=n_comp)
    rank = np.arange(n) if order is None else np.asarray(order)
    local = _local_rank(comp_var, used, rank, n_comp)
    interval = (
        ~graph_like
        & (atoms_per_comp > 0)
        & _interval_components(eqs, eq_of, local, comp_eq, n_comp)
    )
    dense = ~graph_like & ~interval & (atoms_per_comp <= dense_max) & (atoms_per_comp > 0)
    rest = ~graph_like & ~interval & ~dense & (atoms_per_comp > 0)
    if graph_like[comp_eq].any():
        _graph(eqs, eq_of, degree, graph_like[comp_eq], touches_free, comp_eq, x, null, rng)
    if interval.any():
        _intervals(eqs, eq_of, local, comp_eq, comp_var, used, interval, x, null, rng)
    if dense.any():
        _dense(eqs, eq_of, comp_eq, comp_var, dense, x, null, rng)
    if rest.any():
        eqs_per_comp = np.bincount(comp_eq, minlength=n_comp)
        eq_sorted = np.argsort(comp_eq, kind="stable")
        bounds = np.r_[0, np.cumsum(eqs_per_comp)]
        work = 0
        var_sorted = np.argsort(comp_var, kind="stable")
        var_bounds = np.r_[0, np.cumsum(np.bincount(comp_var, minlength=n_comp))]
        for c in sorted(np.flatnonzero(rest).tolist(), key=lambda c: eqs_per_comp[c]):
            members = eq_sorted[bounds[c] : bounds[c + 1]]
            cvars = var_sorted[var_bounds[c] : var_bounds[c + 1]]
            cvars = cvars[used[cvars]]
            try:
                work += _eliminate(eqs, members, cvars, rank, budget - work, rng, x, null)
            except _OverBudget:
                undecided[cvars] = True
                work = budget


def _local_rank(
    comp_var: NDArray[Any], used: NDArray[Any], order: NDArray[Any], n_comp: int
) -> NDArray[Any]:
    """Rank of each used unknown within its part, by ``order`` then index (-1 if unused)."""
    idx = np.flatnonzero(used)
    srt = idx[np.lexsort((idx, order[idx], comp_var[idx]))]
    starts = np.r_[0, np.cumsum(np.bincount(comp_var[srt], minlength=n_comp))]
    local = np.full(comp_var.size, -1, dtype=np.int64)
    local[srt] = np.arange(srt.size) - starts[comp_var[srt]]
    return local


def _interval_components(
    eqs: Equations, eq_of: NDArray[Any], local: NDArray[Any], comp_eq: NDArray[Any], n_comp: int
) -> NDArray[Any]:
    """Parts in which every equation covers a run of consecutive unknowns (in rank order)."""
    ranks = local[eqs.var]
    lo = np.full(eqs.count, np.iinfo(np.int64).max)
    hi = np.full(eqs.count, -1)
    np.minimum.at(lo, eq_of, ranks)
    np.maximum.at(hi, eq_of, ranks)
    broken = np.zeros(n_comp, dtype=bool)
    broken[comp_eq[hi - lo + 1 != eqs.sizes()]] = True
    return ~broken


def _intervals(
    eqs: Equations,
    eq_of: NDArray[Any],
    local: NDArray[Any],
    comp_eq: NDArray[Any],
    comp_var: NDArray[Any],
    used: NDArray[Any],
    which: NDArray[Any],
    x: NDArray[Any],
    null: NDArray[Any],
    rng: np.random.Generator,
) -> None:
    """Parts made of runs: the sum of unknowns ``a..b`` is ``P[b+1] - P[a]`` for the prefix
    sums ``P``, so each equation is an edge between two prefix nodes, and unknown ``j`` is
    determined iff prefix nodes ``j`` and ``j+1`` are connected. Values come from the
    prefix sums along a spanning forest."""
    n_comp = which.size
    width = np.bincount(comp_var[used], minlength=n_comp) + 1
    width[~which] = 0
    base = np.r_[0, np.cumsum(width)]
    n_nodes = int(base[-1])
    sel = which[comp_eq]
    ranks = local[eqs.var]
    lo = np.full(eqs.count, np.iinfo(np.int64).max)
    hi = np.full(eqs.count, -1)
    np.minimum.at(lo, eq_of, ranks)
    np.maximum.at(hi, eq_of, ranks)
    e = np.flatnonzero(sel)
    a = base[comp_eq[e]] + lo[e]
    b = base[comp_eq[e]] + hi[e] + 1
    graph = sparse.coo_matrix((np.ones(e.size), (a, b)), shape=(n_nodes, n_nodes)).tocsr()
    _, labels = csgraph.connected_components(graph, directed=False)
    labels = labels.astype(np.int64)
    # Potentials: one breadth-first pass per prefix component, from its first node.
    potential = _potentials(a, b, eqs.rhs[e], labels, n_nodes)
    vars_in = np.flatnonzero(used & which[np.maximum(comp_var, 0)])
    j = base[comp_var[vars_in]] + local[vars_in]
    x[vars_in] = potential[j + 1] - potential[j]
    draws = _random_free(rng, int(labels.max()) + 1, null.shape[1])
    null[vars_in] = draws[labels[j + 1]] - draws[labels[j]]


def _bfs(graph: sparse.csr_matrix, root: int) -> tuple[NDArray[Any], NDArray[Any]]:
    order, pred = csgraph.breadth_first_order(graph, root, directed=False)
    return order.astype(np.int64), pred.astype(np.int64)


def _potentials(
    a: NDArray[Any], b: NDArray[Any], w: NDArray[Any], labels: NDArray[Any], n_nodes: int
) -> NDArray[Any]:
    """``P[b] - P[a] = w`` along a breadth-first forest (each component's first node at 0)."""
    first = np.unique(labels, return_index=True)[1]
    root = n_nodes  # a super-root joined to each component's first node
    rows = np.r_[a, np.full(first.size, root)]
    cols = np.r_[b, first]
    graph = sparse.coo_matrix(
        (np.ones(rows.size), (rows, cols)), shape=(n_nodes + 1, n_nodes + 1)
    ).tocsr()
    order, pred = _bfs(graph, root)
    # Weight of the edge between a node and its predecessor, signed for the direction walked.
    key_fwd = a * (n_nodes + 1) + b
    srt = np.argsort(key_fwd, kind="stable")
    key_sorted = key_fwd[srt]
    nodes = order[1:]
    parents = pred[nodes]
    weight = np.zeros(nodes.size)
    found = parents == root  # the super-root's edges weigh nothing
    for sign, (u, v) in ((1.0, (parents, nodes)), (-1.0, (nodes, parents))):
        key = u * (n_nodes + 1) + v
        at = np.minimum(np.searchsorted(key_sorted, key), key_sorted.size - 1)
        hit = ~found & (key_sorted[at] == key)
        weight[hit] = sign * w[srt[at[hit]]]
        found |= hit
    step = np.zeros(n_nodes + 1)
    step[nodes] = weight
    potential = np.zeros(n_nodes + 1)
    pot = potential.tolist()
    stp = step.tolist()
    prd = pred.tolist()
    for v in nodes.tolist():
        pot[v] = pot[prd[v]] + stp[v]
    return np.asarray(pot[:n_nodes])


def _odd_cycle_components(
    eqs: Equations, eq_of: NDArray[Any], degree: NDArray[Any], comp_eq: NDArray[Any], n_comp: int
) -> NDArray[Any]:
    """Parts whose equations, joined by the unknowns they share, contain an odd cycle.

    A graph is bipartite iff its bipartite double cover has twice as many components: each node
    ``v`` becomes ``(v, 0)`` and ``(v, 1)``, each edge ``u-v`` joins ``(u, 0)-(v, 1)`` and
    ``(u, 1)-(v, 0)``.
    """
    m = eqs.count
    u, v = _edge_ends(eqs, eq_of, degree, degree == 2)
    rows = np.concatenate([u, u + m])
    cols = np.concatenate([v + m, v])
    cover = sparse.coo_matrix(
        (np.ones(rows.size, dtype=np.int8), (rows, cols)), shape=(2 * m, 2 * m)
    )
    _, lab = csgraph.connected_components(cover, directed=False)
    odd = np.zeros(n_comp, dtype=bool)
    odd[comp_eq[lab[:m] == lab[m:]]] = True
    return odd


def _edge_ends(
    eqs: Equations, eq_of: NDArray[Any], degree: NDArray[Any], which: NDArray[Any]
) -> tuple[NDArray[Any], NDArray[Any]]:
    """For the unknowns of degree 2 selected by ``which`` (per entry of the var array, sorted
    by unknown): their two equations."""
    sel = which[eqs.var]
    order = np.argsort(eqs.var[sel], kind="stable")
    ends = eq_of[sel][order].reshape(-1, 2)
    return ends[:, 0], ends[:, 1]


def _graph(
    eqs: Equations,
    eq_of: NDArray[Any],
    degree: NDArray[Any],
    eq_mask: NDArray[Any],
    touches_free: NDArray[Any],
    comp_eq: NDArray[Any],
    x: NDArray[Any],
    null: NDArray[Any],
    rng: np.random.Generator,
) -> None:
    """Graph-like parts: nodes are equations plus one free node, unknowns are edges."""
    m = eqs.count
    free = m
    in_scope = eq_mask[eq_of]
    var_e = eqs.var[in_scope]
    eq_e = eq_of[in_scope]
    srt = np.argsort(var_e, kind="stable")
    var_e, eq_e = var_e[srt], eq_e[srt]
    first = np.flatnonzero(np.r_[True, var_e[1:] != var_e[:-1]])
    edge_var = var_e[first]
    a = eq_e[first]
    two = degree[edge_var] == 2
    b = np.full(edge_var.size, free, dtype=np.int64)
    b[two] = eq_e[first[two] + 1]
    # A part that never reaches the free node is attached to it by a virtual edge at its first
    # equation, so that one spanning tree rooted at the free node covers everything. Its root
    # equation then holds by itself (the part is bipartite: sums over the two sides agree).
    scope_eqs = np.flatnonzero(eq_mask)
    comps = comp_eq[scope_eqs]
    closed = ~touches_free[comps]
    _, first = np.unique(comps[closed], return_index=True)
    virtual = scope_eqs[closed][first]
    ea = np.concatenate([a, virtual])
    eb = np.concatenate([b, np.full(virtual.size, free, dtype=np.int64)])
    n_nodes = m + 1
    n_real = edge_var.size
    lo, hi = np.minimum(ea, eb), np.maximum(ea, eb)
    graph = sparse.coo_matrix((np.ones(lo.size), (lo, hi)), shape=(n_nodes, n_nodes)).tocsr()
    order, pred = _bfs(graph, free)
    # Tree edge of each node: one edge between it and its predecessor.
    key = lo * n_nodes + hi
    ukey, first_edge = np.unique(key, return_index=True)
    nodes = order[1:]
    parents = pred[nodes]
    pkey = np.minimum(nodes, parents) * n_nodes + np.maximum(nodes, parents)
    tree_edge = first_edge[np.searchsorted(ukey, pkey)]
    parent_edge = np.full(n_nodes, -1, dtype=np.int64)
    parent_edge[nodes] = tree_edge
    is_tree = np.zeros(ea.size, dtype=bool)
    is_tree[tree_edge] = True
    pos, size, sign = _preorder(order, pred, n_nodes)
    cols = null.shape[1]
    # Right-hand sides: the particular solution (non-tree edges 0), then the null vectors
    # (non-tree edges random, right-hand sides 0).
    off_tree = np.flatnonzero(~is_tree[:n_real])
    y = np.zeros((n_nodes, cols + 1))
    y[:m, 0] = eqs.rhs
    values = _random_free(rng, off_tree.size, cols)
    idx = np.arange(off_tree.size)
    inc = sparse.csr_matrix(
        (np.ones(2 * idx.size), (np.r_[ea[off_tree], eb[off_tree]], np.r_[idx, idx])),
        shape=(n_nodes, idx.size),
    )
    y[:, 1:] -= inc @ values
    y[free] = 0.0  # the free node has no equation
    q = y * sign[:, None]
    prefix = np.zeros((n_nodes + 1, cols + 1))
    by_pos = np.zeros((n_nodes, cols + 1))
    by_pos[pos[order]] = q[order]
    np.cumsum(by_pos, axis=0, out=prefix[1:])
    sub = prefix[pos[nodes] + size[nodes]] - prefix[pos[nodes]]
    tree_vals = sub * sign[nodes][:, None]
    edge_vals = np.zeros((ea.size, cols + 1))
    edge_vals[tree_edge] = tree_vals
    edge_vals[off_tree, 1:] = values
    x[edge_var] = edge_vals[:n_real, 0]
    null[edge_var] = edge_vals[:n_real, 1:]


def _preorder(
    order: NDArray[Any], pred: NDArray[Any], n_nodes: int
) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any]]:
    """Preorder position, subtree size and (-1)^depth of the nodes of a BFS tree."""
    order_l = order.tolist()
    pred_l = pred.tolist()
    size = [1] * n_nodes
    for v in reversed(order_l[1:]):
        size[pred_l[v]] += size[v]
    depth = [0] * n_nodes
    pos = [0] * n_nodes
    next_child = [0] * n_nodes  # next free preorder slot under each node
    root = order_l[0]
    next_child[root] = 1
    for v in order_l[1:]:
        p = pred_l[v]
        depth[v] = depth[p] + 1
        pos[v] = pos[p] + next_child[p]
        next_child[p] += size[v]
        next_child[v] = 1
    sign = np.where(np.asarray(depth) % 2 == 0, 1.0, -1.0)
    return np.asarray(pos, dtype=np.int64), np.asarray(size, dtype=np.int64), sign


def _dense(
    eqs: Equations,
    eq_of: NDArray[Any],
    comp_eq: NDArray[Any],
    comp_var: NDArray[Any],
    which: NDArray[Any],
    x: NDArray[Any],
    null: NDArray[Any],
    rng: np.random.Generator,
) -> None:
    """Small parts, batched by padded size: SVD gives the null basis and the pseudo-inverse."""
    n_comp = which.size
    sel_comp = np.flatnonzero(which)
    eq_sel = np.flatnonzero(which[comp_eq])
    var_sel = np.flatnonzero(
        which[np.maximum(comp_var, 0)] & (np.bincount(eqs.var, minlength=eqs.n_vars) > 0)
    )
    eq_local = _local_index(comp_eq[eq_sel], n_comp)
    var_local = _local_index(comp_var[var_sel], n_comp)
    eq_pos = np.full(eqs.count, -1, dtype=np.int64)
    eq_pos[eq_sel] = eq_local
    var_pos = np.full(eqs.n_vars, -1, dtype=np.int64)
    var_pos[var_sel] = var_local
    n_eqs = np.bincount(comp_eq[eq_sel], minlength=n_comp)
    n_vars = np.bincount(comp_var[var_sel], minlength=n_comp)
    width = np.maximum(_pow2(n_vars), _pow2(n_eqs))
    cols = null.shape[1]
    entry_sel = which[comp_eq[eq_of]]
    e_eq = eq_of[entry_sel]
    e_var = eqs.var[entry_sel]
    for w in np.unique(width[sel_comp]).tolist():
        batch = sel_comp[width[sel_comp] == w]
        slot = np.full(n_comp, -1, dtype=np.int64)
        slot[batch] = np.arange(batch.size)
        a = np.zeros((batch.size, w, w))
        pick = slot[comp_eq[e_eq]] >= 0
        a[slot[comp_eq[e_eq[pick]]], eq_pos[e_eq[pick]], var_pos[e_var[pick]]] = 1.0
        rhs = np.zeros((batch.size, w))
        eqb = eq_sel[slot[comp_eq[eq_sel]] >= 0]
        rhs[slot[comp_eq[eqb]], eq_pos[eqb]] = eqs.rhs[eqb]
        u, s, vh = np.linalg.svd(a)
        keep = s > 1e-9 * np.maximum(s[:, :1], 1.0)
        inv = np.where(keep, 1.0 / np.where(keep, s, 1.0), 0.0)
        part = np.einsum("bji,bj->bi", vh, inv * np.einsum("bji,bj->bi", u, rhs))
        draws = rng.standard_normal((batch.size, w, cols)) * (~keep)[:, :, None]
        nul = np.einsum("bji,bjc->bic", vh, draws)
        vb = var_sel[slot[comp_var[var_sel]] >= 0]
        x[vb] = part[slot[comp_var[vb]], var_pos[vb]]
        null[vb] = nul[slot[comp_var[vb]], var_pos[vb]]


def _local_index(labels: NDArray[Any], n_groups: int) -> NDArray[Any]:
    """Position of each item within its group (in input order)."""
    order = np.argsort(labels, kind="stable")
    starts = np.r_[0, np.cumsum(np.bincount(labels, minlength=n_groups))]
    local = np.empty(labels.size, dtype=np.int64)
    local[order] = np.arange(labels.size) - starts[labels[order]]
    return local


def _pow2(n: NDArray[Any]) -> NDArray[Any]:
    return np.asarray(np.maximum(8, 2 ** np.ceil(np.log2(np.maximum(n, 1))).astype(np.int64)))


class _OverBudget(Exception):
    pass


def _eliminate(
    eqs: Equations,
    members: NDArray[Any],
    cvars: NDArray[Any],
    order: NDArray[Any],
    budget: int,
    rng: np.random.Generator,
    x: NDArray[Any],
    null: NDArray[Any],
) -> int:
    """Row-echelon form of one part by a sweep over its unknowns in ``order``; then
    back-substitution, last pivot first."""
    rank_of = np.empty(eqs.n_vars, dtype=np.int64)
    local = cvars[np.lexsort((cvars, order[cvars]))]
    rank_of[local] = np.arange(local.size)
    rows: list[dict[int, float]] = []
    row_heaps: list[list[int]] = []
    rhs: list[float] = []
    heap: list[tuple[int, int, int]] = []
    for e in members.tolist():
        ranks: list[int] = sorted(rank_of[eqs.var[eqs.ptr[e] : eqs.ptr[e + 1]]].tolist())
        rows.append(dict.fromkeys(ranks, 1.0))
        row_heaps.append(ranks)  # a sorted list is a heap
        rhs.append(float(eqs.rhs[e]))
        heap.append((ranks[0], len(ranks), len(rows) - 1))
    heapq.heapify(heap)
    pivot_of: dict[int, int] = {}
    work = 0
    while heap:
        lead, _, r = heapq.heappop(heap)
        p = pivot_of.get(lead)
        if p is None:
            pivot_of[lead] = r
            continue
        row, prow, h = rows[r], rows[p], row_heaps[r]
        f = row[lead] / prow[lead]
        for c, v in prow.items():
            nv = row.get(c, 0.0) - f * v
            if -_DROP < nv < _DROP:
                row.pop(c, None)
            else:
                if c not in row:
                    heapq.heappush(h, c)
                row[c] = nv
        row.pop(lead, None)
        rhs[r] -= f * rhs[p]
        work += len(prow)
        if work > budget:
            raise _OverBudget
        while h and h[0] not in row:
            heapq.heappop(h)
        if h:
            heapq.heappush(heap, (h[0], len(row), r))
    cols = null.shape[1]
    size = local.size
    xs = np.zeros(size)
    ns = _random_free(rng, size, cols)
    piv = sorted(pivot_of, reverse=True)
    ns[piv] = 0.0
    for c in piv:
        row = rows[pivot_of[c]]
        coef = row.pop(c)
        if row:
            ks = np.fromiter(row.keys(), dtype=np.int64, count=len(row))
            vs = np.fromiter(row.values(), dtype=float, count=len(row))
            xs[c] = (rhs[pivot_of[c]] - vs @ xs[ks]) / coef
            ns[c] = -(vs @ ns[ks]) / coef
        else:
            xs[c] = rhs[pivot_of[c]] / coef
        work += len(row)
    x[local] = xs
    null[local] = ns
    return work
