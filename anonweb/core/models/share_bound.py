"""How many records a node's specializations must suppress under a cap on value shares.

δ-disclosure (its upper half) and enhanced β-likeness both require, in a class of n records
holding c_s records of value s, that c_s <= a_s n for every value s it contains, with a cap a_s
fixed by the whole table (2**δ p(s); p(s) (1 + min(β, -ln p(s)))). A cap is linear in the class,
so the records a search must suppress can be bounded from the classes of one node for every
specialization of it, and that bound only shrinks as classes merge. The search uses it as a
monotonic condition: a node whose bound passes the suppression limit fails with all its
specializations, a node within the limit has all its generalizations within it too.

Proof. Split a class C (counts c_s, size n) into parts, as a specialization does, and let f
be the records of the parts that fail. The parts that pass hold at most a_s (n - f) records of
value s between them, so the failing parts hold at least max(0, c_s - a_s (n - f)) of them:

    g(f) = f - sum_s max(0, c_s - a_s (n - f)) >= 0.

The least such f, L(C), is a lower bound on
the records suppressed inside C by any specialization (C itself included). g is concave (each
term's slope -a_s starts when its term turns positive) and g(n) = 0, so {f : g(f) >= 0} is an
interval [L(C), n]. Merging C = A + B: if g_A(f_A) >= 0 and g_B(f_B) >= 0 then
g_C(f_A + f_B) >= g_A(f_A) + g_B(f_B) >= 0 (max(0, x + y) <= max(0, x) + max(0, y)), so
L(A + B) <= L(A) + L(B): the sum over a node's classes never grows as the node is generalized.
A class whose values' caps add up to less than 1 has L(C) = n (g < 0 below n): the coverage
bound of the two models is a special case.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

# float slack: a cap is widened and g read this much in the classes' favour, so that float
# error can only lower the bound (a lower bound stays one)
RELATIVE_SLACK = 1e-9


def least_failing(
    hist: NDArray[Any],
    caps: NDArray[Any],
    wanted: NDArray[Any] | None = None,
    floor: NDArray[Any] | None = None,
) -> NDArray[Any]:
    """L(C) for each class (row of the classes x values count matrix ``hist``), as whole
    records, with ``caps`` the largest share a passing class may hold of each value (one cap
    per value, or a matrix of them, a row per class); only for the ``wanted`` classes when given
    (0 for the others). With ``floor`` (one count per value), a class holding fewer records
    of a value than its floor has a cap of 0 on it: what ``caps`` set to 0 there gives, the
    same to the last bit, with the matrix of caps made for the wanted classes alone.

    For any set S of values whose caps add up to A_S < 1, L(C) >= D_S / (1 - A_S) with D_S the
    sum of c_s - a_s n over S (each term of g's sum is at least c_s - a_s (n - f)). Newton's
    method from f = 0 takes S as the values whose terms are positive at f: g is concave and
    piecewise linear, so each step stays at or below L(C) and the steps end on it, after at most
    one step per value (after the first, only the classes whose S grows take another; on
    Adult the first step reaches all but about 1% of the bound). Every step is such a bound,
    so float error in choosing S cannot make the result exceed L(C).
    """
    out = np.zeros(len(hist), dtype=np.int64)
    hist = np.asarray(hist, dtype=float)
    counts = hist if wanted is None else np.compress(wanted, hist, axis=0)
    if not counts.size:
        return out  # no classes, or no values: nothing to suppress
    caps = np.asarray(caps, dtype=float) * (1.0 + RELATIVE_SLACK) + RELATIVE_SLACK
    if caps.ndim == 2 and wanted is not None:
        caps = np.compress(wanted, caps, axis=0)
    if floor is not None:
        # a cap of 0, widened as every cap is: 0 (1 + slack) + slack is the slack itself.
        # Only where a class holds the value: a value it lacks has c_s = 0, d_s = -a_s n
        # and, at any f <= n, d_s + a_s f <= 0 whatever its cap (the products rounded alike
        # on both sides), and it enters every sum as 0 (its term times "not in S"): the
        # same figures to the last bit. So the matrix of caps is made only when some class
        # holds a value below its floor (on Adult x 33 at k = 165, none does)
        low = counts < floor
        if (low & (counts > 0)).any():
            caps = np.where(low, RELATIVE_SLACK, caps)
    # (the matrices here run to a few hundred kilobytes per batch of nodes: each is written in
    # place where it can, as a fresh one costs more to map than to compute)
    ones = np.ones(counts.shape[1])
    n = counts @ ones  # row sums as a product (several times faster on a few values)
    over = np.multiply.outer(n, caps) if caps.ndim == 1 else caps * n[:, None]
    np.subtract(counts, over, out=over)  # d_s = c_s - a_s n: > 0 where the class fails
    # a value the class lacks has d_s + a_s f = -a_s (n - f) <= 0 below n: never in S. The
    # first step, from f = 0, takes the values over their caps: a class with none has g(0) = 0
    # and a bound of 0, and takes no step (half the classes on Adult); the next steps only for
    # the classes whose new f brings more values in
    # (which rows hold a positive entry: a product of the boolean matrix with ones, exact on
    # whole counts of entries, costs half the elementwise maxima of row_max)
    positive = over > 0
    first = _any_per_row(positive, ones)
    f = np.zeros(len(counts))
    if first.any():
        hit = np.flatnonzero(first)
        over, n_hit = np.compress(first, over, axis=0), n[hit]
        if caps.ndim == 2:
            caps = caps[hit]
        on = np.compress(first, positive, axis=0)
        scratch = np.empty_like(over)
        g = _newton_step(over, caps, on, n_hit, scratch)
        # the classes whose last step moved: a class whose set S did not grow keeps its f, so
        # its S would not grow at the next step either
        moved = np.arange(len(hit))
        for _ in range(counts.shape[1]):
            if len(moved) == len(hit):
                grown = np.multiply(caps, g[:, None], out=scratch)
                grown = np.add(grown, over, out=scratch) > 0
                grown &= ~on
                grew = np.flatnonzero(_any_per_row(grown, ones))
                grown |= on
            else:
                grown = over[moved] + _rows(caps, moved) * g[moved, None] > 0
                grew = np.flatnonzero(_any_per_row(grown & ~on[moved], ones))
            if not len(grew):
                break
            if len(moved) == len(hit):
                moved = grew
                on[moved] = grown[moved]
            else:
                moved = moved[grew]
                on[moved] = grown[grew]
            step = _newton_step(over[moved], _rows(caps, moved), on[moved], n_hit[moved])
            g[moved] = np.maximum(g[moved], step)
        f[hit] = g
    least: NDArray[Any] = np.ceil(f - RELATIVE_SLACK * (n + 1.0)).clip(0, None).astype(np.int64)
    if wanted is None:
        return least
    out[wanted] = least
    return out


def _any_per_row(matrix: NDArray[Any], ones: NDArray[Any]) -> NDArray[Any]:
    """Whether each row of a boolean matrix holds a true entry: the count of them in each row,
    a product with ``ones`` (exact: whole numbers far below 2**53), in half the time of
    :func:`row_max`'s maxima column by column."""
    return np.asarray(matrix @ ones > 0)


def _rows(caps: NDArray[Any], rows: NDArray[Any]) -> NDArray[Any]:
    """The caps of the classes ``rows``: one row of caps serves every class."""
    return caps if caps.ndim == 1 else caps[rows]


def row_max(matrix: NDArray[Any]) -> NDArray[Any]:
    """The largest entry of each row (of a numeric or boolean matrix). With few columns (a
    sensitive column's values), one elementwise maximum per column: numpy's reduction along
    rows of a dozen entries costs about five times as much."""
    return _by_column(matrix, np.maximum)


def row_min(matrix: NDArray[Any]) -> NDArray[Any]:
    """The smallest entry of each row, as :func:`row_max`."""
    return _by_column(matrix, np.minimum)


# below this many rows numpy's reduction along rows costs less than a call per column (the
# calls' own cost then outweighs the work: 14 columns of 64 rows, 13 us against 4)
_FEW_ROWS = 256


def _by_column(matrix: NDArray[Any], ufunc: Any) -> NDArray[Any]:
    if matrix.ndim != 2 or not 0 < matrix.shape[1] <= 64 or matrix.shape[0] < _FEW_ROWS:
        return np.asarray(ufunc.reduce(matrix, axis=1))
    out = matrix[:, 0].copy()
    for c in range(1, matrix.shape[1]):
        ufunc(out, matrix[:, c], out=out)
    return out


def _newton_step(
    over: NDArray[Any],
    caps: NDArray[Any],
    on: NDArray[Any],
    n: NDArray[Any],
    scratch: NDArray[Any] | None = None,
) -> NDArray[Any]:
    """D_S / (1 - A_S) for the sets S of values ``on`` (0 where A_S reaches 1), at most n
    (``scratch``, shaped as ``over``, takes the products instead of a new matrix)."""
    # sums along rows as products with ones (BLAS; float error, in any order, is far inside
    # RELATIVE_SLACK)
    ones = np.ones(over.shape[1])
    rest = 1.0 - np.multiply(caps, on, out=scratch) @ ones
    step = (np.multiply(over, on, out=scratch) @ ones) / np.maximum(rest, RELATIVE_SLACK)
    return np.where(rest > RELATIVE_SLACK, np.minimum(step, n), 0.0)
