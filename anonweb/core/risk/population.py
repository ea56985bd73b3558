"""Population uniqueness estimated from the sample's class-size histogram.

When the released table is a sample of a larger population of known size N, a sample unique is
not necessarily unique in the population. These superpopulation models estimate how many
records are unique in the population, as ARX does (Prasser, Kohlmayer et al., "Lightning: utility-
driven anonymization of high-dimensional data" / ARX's RiskModelPopulationUniqueness):

* Pitman: Hoshino, N. (2001) "Applying Pitman's sampling formula to microdata disclosure risk
  assessment", J. Official Statistics 17(4). Maximum-likelihood (theta, alpha) of the Pitman
  partition; uniques = Gamma(theta+1)/Gamma(theta+alpha) * N**alpha. When the likelihood is
  largest at alpha -> 0 (Ewens's partition, Hoshino's section 3) the fit is taken there and the
  uniques are theta, instead of failing over to Zayatz as ARX does.
* Zayatz: Zayatz, L. (1991) "Estimation of the number of unique population elements using a
  sample", Proc. Survey Research Methods Section, ASA. Conditional probability that a sample
  unique is a population unique, from hypergeometric draws.
* SNB: Chen, G. & Keller-McNulty, S. (1998) "Estimation of identification disclosure risk in
  microdata", J. Official Statistics 14(1). Shifted negative binomial class sizes; the number of
  non-empty population classes K from Haas et al.'s (1995) Shlosser estimator D_Sh3.
* Dankar et al. (2012) "Estimating the re-identification risk of clinical data sets", BMC Med.
  Inform. Decis. Mak. 12:66: Pitman when the sampling fraction is at most 0.1, else the smaller of
  Zayatz and SNB.

Two places where ARX's code departs from the papers are followed here as the papers state them:
the SNB moment equation for c2 divides by (1-q)**(alpha+2) (ARX multiplies, while its own
Jacobian divides), and D_Sh3's second denominator is sum (1-f)**i ((1+f)**i - 1) f_i.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from anonweb.core.errors import ParameterError
from anonweb.core.risk.classes import size_counts

MODELS = ("pitman", "zayatz", "snb")
REFERENCES = {
    "pitman": "Hoshino 2001 (Pitman sampling formula)",
    "zayatz": "Zayatz 1991",
    "snb": "Chen & Keller-McNulty 1998 (shifted negative binomial)",
    "dankar": "Dankar et al. 2012 decision rule, as in ARX (Prasser et al.)",
}


def _histogram(sizes: NDArray[Any]) -> tuple[NDArray[Any], NDArray[Any]]:
    present, counts = size_counts(sizes)
    return present.astype(float), counts.astype(float)


def _valid(value: float, population: float) -> bool:
    return math.isfinite(value) and 0.0 < value <= population


def pitman_loglik(sizes: NDArray[Any], theta: float, alpha: float) -> float:
    """Log-likelihood of Pitman's partition with parameters (theta, alpha) for the class sizes
    (up to terms free of both): sum_{i<u} log(theta + i alpha) - log (theta + 1)_{n-1}
    + sum_j f_j log (1 - alpha)_{j-1}. alpha = 0 is Ewens's partition."""
    return _loglik(_Partition.of(sizes), theta, alpha)


@dataclass(frozen=True)
class _Partition:
    """What Pitman's likelihood reads of the class sizes, read once per fit: the sizes present
    ``j``, how many classes have each ``fj``, records ``n``, classes ``u``, and 1 .. u - 1
    (as floats)."""

    j: NDArray[Any]
    fj: NDArray[Any]
    n: float
    u: int
    i: NDArray[Any]

    @classmethod
    def of(cls, sizes: NDArray[Any]) -> _Partition:
        j, fj = _histogram(sizes)
        u = int(fj.sum())
        return cls(j, fj, float((j * fj).sum()), u, np.arange(1, u, dtype=float))


def _loglik(p: _Partition, theta: float, alpha: float) -> float:
    if not (0 <= alpha < 1 and theta > -alpha) or (alpha == 0 and theta <= 0):
        return -math.inf
    return _loglik_at(p, theta, alpha, theta + p.i * alpha)


def _loglik_at(
    p: _Partition,
    theta: float,
    alpha: float,
    steps: NDArray[Any],
    scratch: NDArray[Any] | None = None,
) -> float:
    """:func:`_loglik` inside the parameter space, ``steps`` being theta + i alpha, i < u
    (``scratch``, as long as ``steps``, takes their logarithms instead of a new array)."""
    from scipy import special

    j, fj, n = p.j, p.fj, p.n
    first = float(np.log(steps, out=scratch).sum())
    rising = _log_rising(theta, n)
    sizes_part = float((fj * (special.gammaln(j - alpha) - special.gammaln(1 - alpha))).sum())
    return first - rising + sizes_part


# from this theta on, lgamma(theta + n) - lgamma(theta + 1) and psi(theta + n) - psi(theta + 1)
# are differences of numbers near theta log theta and log theta whose rounding (eps theta log
# theta: 1e-9 at 1e6, hundreds near 1e17) swamps the likelihood and its slope; the fit's first
# step often tries the edge of its box (theta near 1e17), and noise there could lead it off.
# Stirling's series gives both differences to rounding there (the terms left out are below 1e-20)
_STIRLING_FROM = 1e6


def _log_rising(theta: float, n: float) -> float:
    """log (theta + 1)(theta + 2)...(theta + n - 1) = lgamma(theta + n) - lgamma(theta + 1)."""
    from scipy import special

    if theta < _STIRLING_FROM:
        return float(special.gammaln(theta + n) - special.gammaln(theta + 1))
    a, m = theta + 1.0, n - 1.0
    step = math.log1p(m / a)  # log(b / a), b = theta + n
    # (b - 1/2) log b - (a - 1/2) log a - (b - a) + 1 / (12 b) - 1 / (12 a)
    return (a - 0.5) * step + m * (math.log(a) + step) - m - m / (12.0 * a * (a + m))


def _digamma_rising(theta: float, n: float) -> float:
    """psi(theta + n) - psi(theta + 1) = sum of 1 / (theta + k), k = 1 .. n - 1."""
    from scipy import special

    if theta < _STIRLING_FROM:
        return float(special.digamma(theta + n) - special.digamma(theta + 1))
    a, m = theta + 1.0, n - 1.0
    b = a + m
    # log(b / a) - (1 / (2 b) - 1 / (2 a)) - (1 / (12 b^2) - 1 / (12 a^2))
    return math.log1p(m / a) + m / (2.0 * a * b) + m * (a + b) / (12.0 * a * a * b * b)


def ewens_theta(sizes: NDArray[Any]) -> float | None:
    """Maximum-likelihood theta of Ewens's partition (Pitman's with alpha = 0): the root of
    (u - 1) / theta = psi(theta + n) - psi(theta + 1). None when every record is unique (theta
    grows without bound) or there is a single class."""
    from scipy import optimize, special

    j, fj = _histogram(sizes)
    n, u = float((j * fj).sum()), float(fj.sum())
    if u <= 1 or u >= n:
        return None

    def score(t: float) -> float:
        return (u - 1) / t - float(special.digamma(t + n) - special.digamma(t + 1))

    lo, hi = 1e-12, max(1.0, u)
    while score(hi) > 0:  # positive near 0, negative for large theta: widen until it turns
        hi *= 4
        if hi > 1e15:
            return None
    return float(optimize.brentq(score, lo, hi, xtol=1e-12, rtol=1e-14, maxiter=500))


def _pitman_gradient(
    p: _Partition,
    theta: float,
    alpha: float,
    steps: NDArray[Any],
    scratch: NDArray[Any] | None = None,
) -> tuple[float, float]:
    """d logL / d theta and d logL / d alpha of ``pitman_loglik``, summed term by term (valid at
    alpha = 0 too, where the digamma shortcut of the score equations divides by alpha);
    ``steps`` is theta + i alpha, i < u, which the log-likelihood at the same point reads too
    (``scratch``, as long as ``steps``, holds the terms instead of new arrays)."""
    from scipy import special

    j, fj, n, i = p.j, p.fj, p.n, p.i
    inv = np.divide(1.0, steps, out=scratch)
    d_theta = float(inv.sum()) - _digamma_rising(theta, n)
    tail = float((fj * (special.digamma(j - alpha) - special.digamma(1 - alpha))).sum())
    return d_theta, float(np.multiply(i, inv, out=inv).sum()) - tail


def _pitman_maximise(
    sizes: NDArray[Any], starts: list[tuple[float, float]]
) -> list[tuple[float, float]]:
    """Maximise the log-likelihood over both parameters from each start, over 0 <= alpha < 1
    and theta > -alpha: every start climbs at once (:func:`_climb`), in (log(theta + alpha),
    alpha), which keeps theta > -alpha a box bound and scales theta, which spans orders of
    magnitude, like alpha. The local maxima reached, one per start."""
    p = _Partition.of(sizes)
    points = []
    for t0, a0 in starts:
        a0 = min(max(a0, 0.0), 0.999)
        if math.isfinite(t0) and t0 + a0 > 0:
            points.append((math.log(t0 + a0), a0))
    if not points:
        return []
    with np.errstate(all="ignore"):
        x, value = _climb(_Objective(p), np.array(points))
    found: list[tuple[float, float]] = []
    for phi, a, reached in zip(np.exp(x[:, 0]).tolist(), x[:, 1].tolist(), value.tolist()):
        if math.isfinite(reached):
            found.append((phi - a, a))
    return found


# x = theta / alpha up to this many times the classes: the sums over i < u in closed form;
# beyond it, towards alpha = 0, term by term. The closed forms' differences of digamma functions
# lose about eps (x / u)^2 of the terms summed: 1e-14 here, 1e-11 at 64 u (measured). On Adult's
# fits 93% of the evaluations fall within 8 u
_CLOSED_FORM_SPAN = 8.0


class _Objective:
    """Pitman's log-likelihood with its gradient and Hessian in (theta, alpha), as
    :func:`_loglik_at` and :func:`_pitman_gradient` give the first two, at many points at once
    (one numpy call per special function for all of them) and at the cost of a few special
    functions per point instead of passes over the u classes: with x = theta / alpha,

        sum_{i<u} log(theta + i alpha) = (u - 1) log alpha + lgamma(x + u) - lgamma(x + 1),
        sum_{i<u} 1 / (theta + i alpha) = (psi(x + u) - psi(x + 1)) / alpha,
        sum_{i<u} 1 / (theta + i alpha)^2 = (psi'(x + 1) - psi'(x + u)) / alpha^2,

    the sums weighted by i and i^2 following from these (i alpha = (theta + i alpha) - theta),
    the rest being sums over the class sizes present (the frequencies of frequencies). Near
    alpha = 0 (x far above u) the sums are taken term by term, as there the closed forms
    cancel. The fit polishes each interior optimum to a root of the score equations and keeps
    the candidate of highest exact likelihood, so these rounding differences on the way do not
    reach the fit (tests compare it with the term-by-term objective's on many tables)."""

    def __init__(self, p: _Partition) -> None:
        self.p = p
        self.span = _CLOSED_FORM_SPAN * max(p.u, 1)

    def __call__(
        self, theta: NDArray[Any], alpha: NDArray[Any], phi: NDArray[Any] | None = None
    ) -> tuple[NDArray[Any], ...]:
        """(log-likelihood, d/d theta, d/d alpha, d2/d theta2, d2/d theta d alpha,
        d2/d alpha2) at each (theta, alpha); the log-likelihood -inf where it is not finite.
        ``phi``, theta + alpha, when known apart from theta (near theta = -alpha their sum
        would cancel)."""
        from scipy import special

        p, t, a = self.p, theta, alpha
        u1, n = p.u - 1, p.n
        closed = (a > 0) & (t <= self.span * a)
        far = t >= _STIRLING_FROM
        # every argument of gamma and its derivatives in one array, a row per point:
        # x + u, x + 1 (x = theta / alpha), theta + n, theta + 1, 1 - alpha, j - alpha
        args = np.empty((len(a), 5 + len(p.j)))
        x1 = np.divide(t + a if phi is None else phi, a, out=np.ones_like(a), where=closed)
        args[:, 1] = x1
        args[:, 0] = x1 + u1
        near = np.where(far, 1.0, t)
        args[:, 2] = near + n
        args[:, 3] = near + 1.0
        args[:, 4] = 1.0 - a
        np.subtract(p.j, a[:, None], out=args[:, 5:])
        lg, ps, tri = special.gammaln(args), special.digamma(args), _trigamma(args)
        # the sums over i < u of log(t + i a), 1 / (t + i a), i / (t + i a), 1 / (t + i a)^2,
        # i / (t + i a)^2 and i^2 / (t + i a)^2
        with np.errstate(divide="ignore", invalid="ignore"):
            s0 = u1 * np.log(a) + lg[:, 0] - lg[:, 1]
            s1 = (ps[:, 0] - ps[:, 1]) / a
            s2 = (tri[:, 1] - tri[:, 0]) / (a * a)
            si = (u1 - t * s1) / a
            si2 = (s1 - t * s2) / a
            sii2 = (u1 - 2 * t * s1 + t * t * s2) / (a * a)
        if not closed.all():
            apart = ~closed
            steps = t[apart, None] + p.i * a[apart, None]
            inv = 1.0 / steps
            inv2 = inv * inv
            s0[apart] = np.log(steps).sum(axis=1)
            s1[apart] = inv.sum(axis=1)
            si[apart] = (p.i * inv).sum(axis=1)
            s2[apart] = inv2.sum(axis=1)
            si2[apart] = (p.i * inv2).sum(axis=1)
            sii2[apart] = (p.i * p.i * inv2).sum(axis=1)
        # log (theta + 1)_(n - 1) and its two derivatives, by Stirling's series far out
        rising, d_rising, dd_rising = (
            lg[:, 2] - lg[:, 3],
            ps[:, 2] - ps[:, 3],
            tri[:, 2] - tri[:, 3],
        )
        if far.any():
            lo, m = t[far] + 1.0, n - 1.0
            hi = lo + m
            step = np.log1p(m / lo)
            rising[far] = (lo - 0.5) * step + m * (np.log(lo) + step) - m - m / (12.0 * lo * hi)
            d_rising[far] = step + m / (2 * lo * hi) + m * (lo + hi) / (12 * lo * lo * hi * hi)
            dd_rising[far] = -m / (lo * hi) - m * (lo + hi) / (2 * lo * lo * hi * hi)
        # the sizes present: sum_j f_j (lgamma(j - a) - lgamma(1 - a)) and its derivatives
        value = s0 - rising + (lg[:, 5:] * p.fj).sum(axis=1) - lg[:, 4] * p.u
        value[~np.isfinite(value)] = -np.inf
        tail = (ps[:, 5:] * p.fj).sum(axis=1) - ps[:, 4] * p.u
        curve = (tri[:, 5:] * p.fj).sum(axis=1) - tri[:, 4] * p.u
        return value, s1 - d_rising, si - tail, -s2 - dd_rising, -si2, curve - sii2

    def climbing(self, x: NDArray[Any]) -> tuple[NDArray[Any], NDArray[Any], NDArray[Any]]:
        """The log-likelihood, gradient and Hessian in (s, alpha), s = log(theta + alpha),
        at each row of ``x``."""
        phi, a = np.exp(x[:, 0]), x[:, 1]
        value, lt, la, ltt, lta, laa = self(phi - a, a, phi)
        # theta = phi - alpha: d/ds = phi d/dtheta; d/dalpha at fixed s = d/dalpha - d/dtheta
        gradient = np.stack([phi * lt, la - lt], axis=1)
        hessian = np.empty((len(a), 2, 2))
        hessian[:, 0, 0] = phi * lt + phi * phi * ltt
        hessian[:, 0, 1] = hessian[:, 1, 0] = phi * (lta - ltt)
        hessian[:, 1, 1] = laa - 2 * lta + ltt
        return value, gradient, hessian


# psi'(x) from x = 10 on by its asymptotic series (the terms left out below 1e-16 of it), below
# from psi'(x + 10) (scipy's Hurwitz zeta(2, x) costs twenty times as much per value)
_TRIGAMMA_SERIES_FROM = 10.0
_SHIFTS = np.arange(10.0)


def _trigamma(x: NDArray[Any]) -> NDArray[Any]:
    """psi'(x) = sum over k >= 0 of 1 / (x + k)^2, for x > 0, element by element."""

    small = x < _TRIGAMMA_SERIES_FROM
    y = x + _TRIGAMMA_SERIES_FROM * small  # psi'(x) = psi'(x + m) + sum_{k<m} 1 / (x + k)^2
    z = 1.0 / y
    w = z * z
    series = np.full_like(y, 7 / 6)  # Bernoulli numbers B_14 .. B_2
    for b in (-691 / 2730, 5 / 66, -1 / 30, 1 / 42, -1 / 30, 1 / 6):
        series = b + w * series
    out: NDArray[Any] = z + w * 0.5 + z * w * series
    if small.any():
        out[small] += (1.0 / (x[small, None] + _SHIFTS) ** 2).sum(axis=1)
    return out


# the box the fit searches in (log(theta + alpha), alpha), and its stopping rules
_LOW, _HIGH = np.array([-30.0, 0.0]), np.array([40.0, 1.0 - 1e-9])
_GTOL, _MAXITER, _HALVINGS, _ROUNDING = 1e-12, 200, 60, 1e-14
_REACH = np.array([4.0, 0.3])


def _climb(objective: _Objective, x: NDArray[Any]) -> tuple[NDArray[Any], NDArray[Any]]:
    """From each row of ``x`` (s, alpha), ascent to a local maximum of the log-likelihood in
    the box [_LOW, _HIGH], all rows in the same numpy calls: projected Newton steps (the
    Hessian shifted to be negative definite where it is not; a coordinate at a bound that the
    gradient pushes out of is held), each step halved until it gains a share of its slope
    (Armijo), so the likelihood rises at every step of every row. A row stops when its
    projected gradient is below _GTOL times its log-likelihood, or a step no longer moves it
    or gains anything. The points reached and their log-likelihoods (-inf outside the
    parameter space)."""
    x = np.clip(x, _LOW, _HIGH)
    f, g, h = objective.climbing(x)
    live = np.isfinite(f)
    for _ in range(_MAXITER):
        held = ((x <= _LOW) & (g < 0)) | ((x >= _HIGH) & (g > 0))
        slope = np.where(held, 0.0, g)
        live &= np.abs(slope).max(axis=1) > _GTOL * np.maximum(1.0, np.abs(f))
        rows = np.flatnonzero(live)
        if not len(rows):
            break
        free, gr = ~held[rows], slope[rows]
        # -H on the free coordinates (identity on the held ones), made positive definite
        m00 = np.where(free[:, 0], -h[rows, 0, 0], 1.0)
        m11 = np.where(free[:, 1], -h[rows, 1, 1], 1.0)
        m01 = np.where(free[:, 0] & free[:, 1], -h[rows, 0, 1], 0.0)
        mid, det = (m00 + m11) / 2, m00 * m11 - m01 * m01
        spread = np.sqrt(np.maximum(mid * mid - det, 0.0))
        low, high = mid - spread, mid + spread
        shift = np.where(
            low <= 1e-8 * np.abs(high), np.abs(low) + 1e-6 * np.maximum(np.abs(high), 1.0), 0.0
        )
        m00, m11 = m00 + shift, m11 + shift
        det = m00 * m11 - m01 * m01
        d = np.stack([m11 * gr[:, 0] - m01 * gr[:, 1], m00 * gr[:, 1] - m01 * gr[:, 0]], 1)
        d = np.where(held[rows], 0.0, d / det[:, None])
        # at most _REACH along each coordinate at a time: far from the maximum the likelihood
        # is not a quadratic, and a longer step only lands at the box's edge, to be halved
        d /= np.maximum(1.0, np.abs(d) / _REACH).max(axis=1)[:, None]
        # the gain the step promises: once below the likelihood's rounding, no step can show
        # one (the polish takes the point on to the root)
        promised = (d * gr).sum(axis=1)
        enough = promised > _ROUNDING * np.maximum(1.0, np.abs(f[rows]))
        live[rows[~enough]] = False
        rows, gr, d = rows[enough], gr[enough], d[enough]
        if not len(rows):
            break
        x0, f0 = x[rows], f[rows]
        length = np.ones(len(rows))
        waiting = np.ones(len(rows), dtype=bool)
        for _ in range(_HALVINGS):
            w = np.flatnonzero(waiting)
            xn = np.clip(x0[w] + length[w, None] * d[w], _LOW, _HIGH)
            fn, gn, hn = objective.climbing(xn)
            ok = np.isfinite(fn) & (fn >= f0[w] + 1e-4 * ((xn - x0[w]) * gr[w]).sum(axis=1))
            taken = w[ok]
            x[rows[taken]], f[rows[taken]] = xn[ok], fn[ok]
            g[rows[taken]], h[rows[taken]] = gn[ok], hn[ok]
            # a step that no longer moves the point: it is where rounding lets it be
            live[rows[taken[np.all(xn[ok] == x0[taken], axis=1)]]] = False
            waiting[taken] = False
            length[w[~ok]] *= 0.5
            if not waiting.any():
                break
        live[rows[waiting]] = False  # no step gains anything: a maximum to rounding
    return x, f


_POLISH_STEPS = 40  # Newton's steps at most from each point


def _polish(p: _Partition, points: list[tuple[float, float]]) -> list[tuple[float, float] | None]:
    """Newton's steps on the score equations from each point with alpha > 0, all points at
    once: the root each reaches (its score within 1e-9 max(u, n), the terms being sums over u
    classes), or None."""
    found: list[tuple[float, float] | None] = [None] * len(points)
    t = np.array([q[0] for q in points], dtype=float)
    a = np.array([q[1] for q in points], dtype=float)
    live = (a > 0) & (a < 1) & (t > -a)
    tolerance = 1e-9 * max(p.u, p.n)
    objective = _Objective(p)
    for _ in range(_POLISH_STEPS):
        rows = np.flatnonzero(live)
        if not len(rows):
            break
        tr, ar = t[rows], a[rows]
        _, lt, la, ltt, lta, laa = objective(tr, ar)
        reached = np.isfinite(lt) & np.isfinite(la) & (np.maximum(abs(lt), abs(la)) <= tolerance)
        for r in np.flatnonzero(reached).tolist():
            found[rows[r]] = (float(tr[r]), float(ar[r]))
        det = ltt * laa - lta * lta
        nt = tr - (laa * lt - lta * la) / det
        na = ar - (ltt * la - lta * lt) / det
        out = ~(np.isfinite(nt) & np.isfinite(na) & (na > 0) & (na < 1) & (nt > -na))
        # a root reached whose step is this short: the step leaves it at the root to rounding
        # (Newton's steps square the error), and no further step can do better
        last = (
            reached & ~out & (np.abs(nt - tr) <= 1e-9 * np.abs(tr)) & (np.abs(na - ar) <= 1e-9 * ar)
        )
        for r in np.flatnonzero(last).tolist():
            found[rows[r]] = (float(nt[r]), float(na[r]))
        t[rows], a[rows] = np.where(out, tr, nt), np.where(out, ar, na)
        live[rows[out | last]] = False
    return found


def pitman_fit(sizes: NDArray[Any]) -> tuple[float, float] | None:
    """Maximum-likelihood (theta, alpha) of Pitman's partition for the class sizes, or None
    (see :func:`_pitman_fit`)."""
    return _pitman_fit(sizes)


def _pitman_fit(sizes: NDArray[Any]) -> tuple[float, float] | None:
    """Maximum-likelihood (theta, alpha) of Pitman's partition for the class sizes, or None.

    The likelihood is maximised over both parameters at once, from several starts (Hoshino's
    moment-based point, as ARX uses it; the Ewens fit; a spread of alphas), and each interior
    optimum is polished to a root of the score equations. A root search from Hoshino's point
    alone, as ARX does, can miss an interior maximum and, falling back to the boundary
    alpha = 0 (Ewens's partition), under-report uniques by 16% on a 2% sample; the maximum may
    also truly lie on that boundary (pycanon's stroke data, 4 QIs; its drug data), where there
    is no stationary point in alpha: the Ewens fit is then returned, exactly alpha = 0. Of all
    candidates the one with the highest likelihood is kept."""
    from scipy import optimize, special  # scipy costs ~0.8 s to import: only when needed

    j, fj = _histogram(sizes)
    n, u = float((j * fj).sum()), float(fj.sum())
    if u <= 1 or u >= n:
        return None  # one class, or every record unique: the likelihood has no maximum
    c1 = float(fj[j == 1].sum())
    c2 = float(fj[j == 2].sum()) or 1.0  # as ARX: overestimate when there is no class of two
    # Hoshino's moment-based starting point, as ARX uses it.
    c = c1 * (c1 - 1) / c2
    # Hoshino's point is undefined where its denominator vanishes (91 uniques, 15 pairs and 2
    # triples: 2 * 91 * 108 + 91 * 546 = 127 * 546); the other starts then stand alone.
    denominator = 2 * c1 * u + c1 * c - n * c
    theta0 = (n * u * c - c1 * (n - 1) * (2 * u + c)) / denominator if denominator else math.nan
    alpha0 = (theta0 * (c1 - n) + (n - 1) * c1) / (n * u)
    big = j > 1
    j_big, fj_big = j[big], fj[big]
    # the digamma functions' arguments of one score, in one call: ta + u, ta + 1, t + n,
    # t + 1, 1 - a, then j - a for each size j > 1 (the same values, element by element, as
    # calls one by one: the polish calls this a few dozen times per start)
    args = np.empty(5 + len(j_big))
    psi = np.empty_like(args)

    def score(x: NDArray[Any]) -> NDArray[Any]:
        # d logL / d theta and d logL / d alpha in closed form (digamma sums, as in ARX).
        t, a = x
        if a <= 0 or a >= 1 or t <= -a:
            return np.array([1e6, 1e6])
        ta = t / a
        args[0], args[1], args[2], args[3], args[4] = ta + u, ta + 1, t + n, t + 1, 1 - a
        np.subtract(j_big, a, out=args[5:])
        special.digamma(args, out=psi)
        s1 = (psi[0] - psi[1]) / a  # sum 1/(t + i a), i < u
        d_theta = s1 - (psi[2] - psi[3])
        tail = (fj_big * (psi[5:] - psi[4])).sum()
        return np.array([d_theta, (u - 1) / a - ta * s1 - float(tail)])

    def polished(start: tuple[float, float]) -> tuple[float, float] | None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            sol = optimize.root(score, np.array(start), method="hybr")
        # The score terms are sums over u classes: judge the residual relative to that scale.
        if sol.success and np.abs(sol.fun).max() <= 1e-9 * max(u, n):
            return float(sol.x[0]), float(sol.x[1])
        return None

    theta_ewens = ewens_theta(sizes)
    starts: list[tuple[float, float]] = []
    if math.isfinite(theta0) and math.isfinite(alpha0):
        starts.append((max(theta0, 1e-3), min(max(alpha0, 1e-3), 0.999)))
    scale = theta_ewens if theta_ewens is not None else max(u, 1.0)
    starts += [(scale, 0.0)] + [(scale * f, a) for f in (0.1, 1.0) for a in (0.2, 0.5, 0.8)]
    candidates: list[tuple[float, float]] = []
    if theta_ewens is not None:
        candidates.append((theta_ewens, 0.0))
    # the first start taken to a root of the score equations as it is (Hoshino's point: ARX's
    # root search), then the local maxima all the starts climb to, each polished to the root
    # it lies on; Newton's steps take every one to where the score vanishes to rounding, so
    # that the likelihoods compared below are of points each as exact as the others
    found = starts[:1] + _pitman_maximise(sizes, starts)
    partition = _Partition.of(sizes)
    with np.errstate(all="ignore"):
        roots = _polish(partition, found)
    if roots[0] is None and starts[0][1] > 0:
        # Newton's steps from Hoshino's point reach no root: Powell's hybrid root search from
        # there, its root then polished as the others
        root = polished(starts[0])
        if root is not None:
            with np.errstate(all="ignore"):
                roots[0] = _polish(partition, [root])[0] or root
    for ta in (root if root is not None else ta for ta, root in zip(found, roots)):
        # the starts mostly reach the same root, to rounding: its likelihood is read once
        if not any(_same_point(ta, other) for other in candidates):
            candidates.append(ta)
    best = max(candidates, key=lambda ta: _loglik(partition, *ta))
    if theta_ewens is not None and best[1] < 1e-6:
        # On the boundary the optimiser stops a hair away from the exact Ewens fit.
        ewens = _loglik(partition, theta_ewens, 0.0)
        if ewens >= _loglik(partition, *best) - 1e-9 * abs(ewens):
            return theta_ewens, 0.0
    return best


def _same_point(one: tuple[float, float], other: tuple[float, float]) -> bool:
    """Whether two fitted points are one, to rounding (1e-12 relative)."""
    return abs(one[0] - other[0]) <= 1e-12 * abs(other[0]) and abs(one[1] - other[1]) <= (
        1e-12 * abs(other[1])
    )


def pitman_uniques(
    sizes: NDArray[Any], population: float, *, fit: tuple[float, float] | None = None
) -> float:
    """Population uniques by Pitman's model (Hoshino 2001); NaN when the solver fails.
    At the Ewens limit (alpha = 0) the formula gives theta."""
    from scipy import special

    fit = fit if fit is not None else pitman_fit(sizes)
    if fit is None:
        return math.nan
    t, a = fit
    value = math.exp(special.gammaln(t + 1) - special.gammaln(t + a) + a * math.log(population))
    return value if _valid(value, population) else math.nan


def zayatz_uniques(sizes: NDArray[Any], population: float) -> float:
    """Population uniques by Zayatz's model (1991), as ARX computes it."""
    from scipy import stats

    j, fj = _histogram(sizes)
    n, u = int((j * fj).sum()), float(fj.sum())
    c1 = float(fj[j == 1].sum())
    pop = int(population)
    # P(a class of size j in the population contributes exactly one record to the sample).
    p_one = stats.hypergeom.pmf(1, pop, j.astype(int), n)
    denom = float((fj / u * p_one).sum())
    if denom <= 0:
        return math.nan
    uniqueness = (c1 / u) * float(stats.hypergeom.pmf(1, pop, 1, n)) / denom
    value = c1 * uniqueness / (n / population)
    return value if _valid(value, population) else math.nan


def shlosser_classes(sizes: NDArray[Any], fraction: float) -> float:
    """Non-empty population classes K by Haas et al.'s (1995) Shlosser estimator D_Sh3."""
    j, fj = _histogram(sizes)
    u, c1, q = float(fj.sum()), float(fj[j == 1].sum()), fraction
    a = (j * q * q * (1 - q * q) ** (j - 1) * fj).sum()
    # (1-q)^j ((1+q)^j - 1) written without (1+q)^j, which overflows for large classes.
    b = (((1 - q * q) ** j - (1 - q) ** j) * fj).sum()
    c = ((1 - q) ** j * fj).sum()
    d = (j * q * (1 - q) ** (j - 1) * fj).sum()
    return float(u + c1 * (a / b) * (c / d) ** 2)


def snb_moments(k: float, a: float, b: float, f: float) -> tuple[float, float]:
    """Expected sample classes of size 1 and 2 under SNB(alpha=a, beta=b), sampling fraction f.

    Population class sizes F with F - 1 negative binomial(a, b); Bernoulli sampling at f. Summing
    the series gives closed forms in q = (1 - f)(1 - b).
    """
    q = (1 - f) * (1 - b)
    e1 = k * f * (b / (1 - q)) ** a * (a * q / (1 - q) + 1)
    e2 = k * a * b**a * f * f * (1 - b) / 2 / (1 - q) ** (a + 2) * (2 - (1 - a) * q)
    return e1, e2


def snb_fit(sizes: NDArray[Any], population: float) -> tuple[float, float, float] | None:
    """(K, alpha, beta) of the SNB model by the method of moments on c1 and c2, or None.

    The two moment equations can have their root far from any one starting point (ARX starts at
    alpha = 1, beta = 0.5 and misses the root for pycanon's stroke data, 4 QIs, population
    20,000), so the search starts from a grid over log alpha and logit beta, which also keeps
    every iterate inside alpha > 0, 0 < beta < 1. When several distinct roots satisfy the
    equations, the one giving the most population uniques is kept (the cautious choice)."""
    from scipy import optimize

    j, fj = _histogram(sizes)
    f = float((j * fj).sum()) / population
    c1, c2 = float(fj[j == 1].sum()), float(fj[j == 2].sum())
    k = shlosser_classes(sizes, f)
    if c1 <= 0 or not math.isfinite(k):
        return None

    def unpack(x: NDArray[Any]) -> tuple[float, float]:
        return math.exp(min(x[0], 700.0)), 1.0 / (1.0 + math.exp(-max(min(x[1], 700.0), -700.0)))

    def moments(x: NDArray[Any]) -> NDArray[Any]:
        a, b = unpack(x)
        if not 0 < b < 1:
            return np.array([1e6, 1e6])
        try:
            e1, e2 = snb_moments(k, a, b, f)
        except (ZeroDivisionError, OverflowError):  # iterates far out in the tails
            return np.array([1e6, 1e6])
        out = np.array([e1 / c1 - 1, (e2 - c2) / max(c2, 1.0)])
        return out if np.all(np.isfinite(out)) else np.array([1e6, 1e6])

    starts = [np.array([0.0, 0.0])]  # ARX's alpha = 1, beta = 0.5 first
    starts += [np.array([la, lb]) for la in np.linspace(-6, 6, 7) for lb in np.linspace(-8, 8, 9)]
    roots: list[tuple[float, float]] = []
    for start in starts:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            sol = optimize.root(moments, start, method="hybr")
        if not sol.success or not np.all(np.isfinite(sol.fun)) or np.abs(sol.fun).max() > 1e-6:
            continue
        a, b = unpack(sol.x)
        if (
            0 < b < 1
            and a > 0
            and not any(
                math.isclose(a, ra, rel_tol=1e-5) and math.isclose(b, rb, rel_tol=1e-5)
                for ra, rb in roots
            )
        ):
            roots.append((a, b))
    if not roots:
        return None
    a, b = max(roots, key=lambda ab: k * ab[1] ** ab[0])
    return k, a, b


def snb_uniques(sizes: NDArray[Any], population: float) -> float:
    """Population uniques by the SNB model (Chen & Keller-McNulty 1998); NaN if unsolved."""
    fit = snb_fit(sizes, population)
    if fit is None:
        return math.nan
    k, a, b = fit
    value = float(k * b**a)
    return value if _valid(value, population) else math.nan


def individual_risk(sizes: NDArray[Any], fraction: float) -> NDArray[Any]:
    """Journalist risk E[1/F | f] of a record in a sample class of size f (Benedetti & Franconi
    1998, the "individual risk" of mu-Argus and sdcMicro), sampling fraction ``fraction``.

    With F - f negative binomial(f, p) the expectation has the closed form
    (p / f) * 2F1(1, 1; f + 1; 1 - p); for f = 1 it is p ln(1/p) / (1 - p).
    """
    from scipy import special

    f = np.asarray(sizes, dtype=float)
    p = float(fraction)
    if p >= 1.0:
        return 1.0 / f
    with np.errstate(all="ignore"):
        hyp = special.hyp2f1(1.0, 1.0, f + 1.0, 1.0 - p)
    bad = ~np.isfinite(hyp)
    if bad.any():  # scipy gives up for large f, where the series converges fast
        fb = f[bad]
        term, total = np.ones_like(fb), np.ones_like(fb)
        for k in range(400):
            term *= (k + 1) / (fb + 1 + k) * (1 - p)
            total += term
        hyp[bad] = total
    return np.asarray(np.minimum(p / f * hyp, 1.0))


# Above this ratio between the largest and the smallest estimate the report explains the choice.
DISAGREEMENT_RATIO = 10.0

# Why the models part ways, and when each is known to be unreliable: Dankar et al. (2012) found
# that no estimator is accurate in every condition and built their rule on where each does best.
RELIABILITY = {
    "pitman": (
        "Pitman's model had the smallest error in Dankar et al.'s simulations at sampling "
        "fractions up to 10%; it assumes the class sizes follow one Pitman partition, and is "
        "less reliable above 10% or when the sample has few classes."
    ),
    "zayatz": (
        "Zayatz's model divides the sample uniques it judges population-unique by the sampling "
        "fraction, so at very small fractions (well below 10%) a few sample uniques become a "
        "very large estimate; Dankar et al. use it only above 10%, and then only when it is the "
        "smaller of it and SNB."
    ),
    "snb": (
        "The SNB model is fitted to the sample's classes of one and two by the method of "
        "moments; Dankar et al. found it unreliable at small sampling fractions and use it only "
        "above 10%, when it is the smaller of it and Zayatz."
    ),
}


def _count(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 else f"{value:.2g}"


@dataclass(frozen=True)
class PopulationUniqueness:
    """Estimated population uniques by each model and by Dankar et al.'s rule."""

    sample_size: int
    population_size: int
    sample_uniques: int
    estimates: tuple[tuple[str, float | None], ...]  # (model, uniques or None if no estimate)
    chosen_model: str | None
    chosen_uniques: float
    pitman_fit: tuple[float, float] | None = None  # (theta, alpha); alpha = 0: the Ewens limit
    pitman_log_likelihood: float | None = None  # pitman_loglik at pitman_fit

    def _pitman_dict(self) -> dict[str, Any] | None:
        if self.pitman_fit is None:
            return None
        theta, alpha = self.pitman_fit
        return {
            "theta": theta,
            "alpha": alpha,
            "log_likelihood": self.pitman_log_likelihood,
            "ewens_limit": alpha == 0.0,
        }

    def disagreement(self) -> dict[str, Any] | None:
        """The spread of the models' estimates, explained when the largest is more than
        DISAGREEMENT_RATIO times the smallest: which model Dankar et al.'s rule picks and why,
        and when each model is known to be unreliable."""
        values = {m: v for m, v in self.estimates if v is not None and v > 0}
        if self.chosen_model not in MODELS or len(values) < 2:
            return None
        high = max(values, key=lambda m: values[m])
        low = min(values, key=lambda m: values[m])
        ratio = values[high] / values[low]
        if ratio <= DISAGREEMENT_RATIO:
            return None
        fraction = self.sample_size / self.population_size
        if fraction <= 0.1:
            why = (
                f"The sampling fraction is {fraction * 100:.3g}%, at most 10%: Dankar et al.'s rule "
                "takes Pitman's model, the most accurate there in their study"
            )
            if self.chosen_model != "pitman":
                why += ", but it gave no estimate here, so Zayatz's is shown"
        else:
            why = (
                f"The sampling fraction is {fraction * 100:.3g}%, above 10%: Dankar et al.'s rule takes "
                "the smaller of the Zayatz and SNB estimates"
            )
        return {
            "ratio": ratio,
            "largest": high,
            "smallest": low,
            "chosen": self.chosen_model,
            "explanation": (
                f"The models disagree {ratio:,.0f}-fold ({high} {_count(values[high])} against "
                f"{low} {_count(values[low])}). {why}."
            ),
            "reliability": {m: RELIABILITY[m] for m in MODELS if m in values},
        }

    def to_dict(self) -> dict[Any, Any]:
        references = dict(REFERENCES)
        fit = self._pitman_dict()
        if fit is not None:
            where = (
                f"θ = {fit['theta']:.4g}, at its Ewens limit α = 0"
                if fit["ewens_limit"]
                else f"θ = {fit['theta']:.4g}, α = {fit['alpha']:.4g}"
            )
            loglik = fit["log_likelihood"]
            reached = "" if loglik is None else f", log-likelihood {loglik:.4f}"
            references["pitman"] += f"; maximum likelihood over θ and α at {where}{reached}"
        return {
            "sample_size": self.sample_size,
            "population_size": self.population_size,
            "sampling_fraction": self.sample_size / self.population_size,
            "sample_uniques": self.sample_uniques,
            "estimates": {
                m: {
                    "uniques": v,
                    "share": None if v is None else v / self.population_size,
                    "reference": references[m],
                }
                for m, v in self.estimates
            },
            "pitman_fit": fit,
            "model": self.chosen_model,
            "reference": REFERENCES["dankar"],
            "population_uniques": self.chosen_uniques,
            "population_uniqueness": self.chosen_uniques / self.population_size,
            "disagreement": self.disagreement(),
        }


def _sample(sizes: NDArray[Any], population_size: int) -> tuple[NDArray[Any], int, int, int]:
    """The class sizes as int64, the table's rows, the population size checked against them,
    and the sample uniques."""
    sizes = np.asarray(sizes, dtype=np.int64)
    n = int(sizes.sum())
    if population_size is None or int(population_size) < n:
        raise ParameterError(
            f"population size {population_size} is smaller than the table ({n} rows)"
        )
    return sizes, n, int(population_size), int(np.count_nonzero(sizes == 1))


def population_uniqueness(sizes: NDArray[Any], population_size: int) -> PopulationUniqueness:
    """Estimate population uniques from the class sizes of a sample drawn from ``population_size``."""
    sizes, n, pop, c1 = _sample(sizes, population_size)
    est: tuple[tuple[str, float | None], ...]
    if c1 == 0:
        est = tuple((m, 0.0) for m in MODELS)
        return PopulationUniqueness(n, pop, 0, est, None, 0.0)
    if pop == n:  # the sample is the population: its uniques are the population's
        est = tuple((m, float(c1)) for m in MODELS)
        return PopulationUniqueness(n, pop, c1, est, "sample", float(c1))
    fit = pitman_fit(sizes)
    values = {
        "pitman": pitman_uniques(sizes, pop, fit=fit) if fit is not None else math.nan,
        "zayatz": zayatz_uniques(sizes, pop),
        "snb": snb_uniques(sizes, pop),
    }
    model, chosen = _dankar(values, n / pop)
    est = tuple((m, None if math.isnan(v) else v) for m, v in values.items())
    loglik = None if fit is None else pitman_loglik(sizes, *fit)
    return PopulationUniqueness(n, pop, c1, est, model, chosen, fit, loglik)


def dankar_uniques(sizes: NDArray[Any], population_size: int) -> float:
    """The uniques Dankar et al.'s rule picks, ``population_uniqueness(...).chosen_uniques``
    (NaN where it picks no model), computing only the models the rule reads at this sampling
    fraction: Pitman's (Zayatz's only if Pitman's fails) up to 10%, Zayatz's and SNB's above.
    A search asks this at every node it checks; the report asks :func:`population_uniqueness`,
    which shows every model."""
    sizes, n, pop, c1 = _sample(sizes, population_size)
    if c1 == 0:
        return 0.0
    if pop == n:
        return float(c1)
    fraction = n / pop
    values = {"pitman": math.nan, "zayatz": math.nan, "snb": math.nan}
    if fraction <= 0.1:
        values["pitman"] = pitman_uniques(sizes, pop)
        if math.isnan(values["pitman"]):
            values["zayatz"] = zayatz_uniques(sizes, pop)
    else:
        values["zayatz"] = zayatz_uniques(sizes, pop)
        values["snb"] = snb_uniques(sizes, pop)
    model, chosen = _dankar(values, fraction)
    return chosen if model is not None else math.nan


def _dankar(values: dict[str, float], fraction: float) -> tuple[str | None, float]:
    pit, zay, snb = values["pitman"], values["zayatz"], values["snb"]
    if fraction <= 0.1:
        if not math.isnan(pit):
            return "pitman", pit
        return ("zayatz", zay) if not math.isnan(zay) else (None, 0.0)
    if not math.isnan(snb):
        if not math.isnan(zay) and zay < snb:
            return "zayatz", zay
        return "snb", snb
    return ("zayatz", zay) if not math.isnan(zay) else (None, 0.0)
