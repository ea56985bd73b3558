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
    """Maximise the log-likelihood over both parameters with bounded quasi-Newton steps
    (L-BFGS-B) from each start, over 0 <= alpha < 1 and theta > -alpha. The search runs in
    (log(theta + alpha), alpha), which keeps theta > -alpha a box bound and scales theta, which
    spans orders of magnitude, like alpha."""
    p = _Partition.of(sizes)
    objective = _Objective(p)

    def negative(x: NDArray[Any]) -> tuple[float, NDArray[Any]]:
        phi, a = math.exp(float(x[0])), float(x[1])
        t = phi - a
        if not (0 <= a < 1 and t > -a) or (a == 0 and t <= 0):
            return 1e300, np.zeros(2)
        value, d_t, d_a = objective(phi, a)
        if not math.isfinite(value):
            return 1e300, np.zeros(2)
        # theta = phi - alpha: d/d log phi = phi d/dtheta; d/dalpha at fixed phi = d_a - d_t.
        return -value, -np.array([d_t * phi, d_a - d_t])

    found: list[tuple[float, float]] = []
    for t0, a0 in starts:
        a0 = min(max(a0, 0.0), 0.999)
        if not (math.isfinite(t0) and t0 + a0 > 0):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            x = _minimise_bounded(negative, np.array([math.log(t0 + a0), a0]))
        a = float(x[1])
        t = math.exp(float(x[0])) - a
        if math.isfinite(_loglik(p, t, a)):
            found.append((t, a))
    return found


# x = theta / alpha up to this many times the classes: the sums over i < u in closed form;
# beyond it, towards alpha = 0, term by term. The closed forms' differences of digamma functions
# lose about eps (x / u)^2 of the terms summed: 1e-14 here, 1e-11 at 64 u (measured). On Adult's
# fits 93% of the evaluations fall within 8 u
_CLOSED_FORM_SPAN = 8.0


class _Objective:
    """Pitman's log-likelihood and its gradient in (theta, alpha), as :func:`_loglik_at` and
    :func:`_pitman_gradient` give them, at the cost of a few dozen special functions instead of
    three passes over the u classes: with x = theta / alpha,

        sum_{i<u} log(theta + i alpha) = (u - 1) log alpha + lgamma(x + u) - lgamma(x + 1),
        sum_{i<u} 1 / (theta + i alpha) = (psi(x + u) - psi(x + 1)) / alpha,
        sum_{i<u} i / (theta + i alpha) = (u - 1 - theta sum 1 / (theta + i alpha)) / alpha,

    the rest being sums over the class sizes present (the frequencies of frequencies). Near
    alpha = 0 (x far above u) the sums are taken term by term, as there the closed forms
    cancel. The fit polishes each interior optimum to a root of the score equations and keeps
    the candidate of highest exact likelihood, so these rounding differences on the way do not
    reach the fit (tests compare it with the term-by-term objective's on many tables)."""

    def __init__(self, p: _Partition) -> None:
        self.p = p
        self.terms = np.empty((2, len(p.i)))
        # x + u, x + 1, theta + n, theta + 1, 1 - alpha, then j - alpha for each size j present
        self.args = np.empty(5 + len(p.j))
        self.lgam = np.empty_like(self.args)
        self.psi = np.empty_like(self.args)
        self.span = _CLOSED_FORM_SPAN * max(p.u, 1)

    def __call__(self, phi: float, a: float) -> tuple[float, float, float]:
        """(log-likelihood, d/d theta, d/d alpha) at theta = phi - alpha."""
        from scipy import special

        p = self.p
        t = phi - a
        if not (a > 0 and t <= self.span * a):
            steps = np.add(np.multiply(p.i, a, out=self.terms[0]), t, out=self.terms[0])
            value = _loglik_at(p, t, a, steps, self.terms[1])
            if not math.isfinite(value):
                return value, 0.0, 0.0
            d_t, d_a = _pitman_gradient(p, t, a, steps, self.terms[1])
            return value, d_t, d_a
        args = self.args
        x1 = phi / a  # x + 1 = (theta + alpha) / alpha, without cancelling near theta = -alpha
        args[0] = x1 + (p.u - 1)
        args[1] = x1
        args[2] = t + p.n
        args[3] = t + 1.0
        args[4] = 1.0 - a
        np.subtract(p.j, a, out=args[5:])
        lg = special.gammaln(args, out=self.lgam)
        ps = special.digamma(args, out=self.psi)
        u1 = p.u - 1
        first = u1 * math.log(a) + float(lg[0] - lg[1])
        sizes_part = float(np.dot(p.fj, lg[5:])) - float(lg[4]) * p.u
        if t < _STIRLING_FROM:
            rising, d_rising = float(lg[2] - lg[3]), float(ps[2] - ps[3])
        else:
            rising, d_rising = _log_rising(t, p.n), _digamma_rising(t, p.n)
        value = first - rising + sizes_part
        s1 = float(ps[0] - ps[1]) / a
        d_t = s1 - d_rising
        tail = float(np.dot(p.fj, ps[5:])) - float(ps[4]) * p.u
        return value, d_t, (u1 - t * s1) / a - tail


# the box the fit searches in (log(theta + alpha), alpha), and its stopping rules
_BOUNDS = ((-30.0, 40.0), (0.0, 1.0 - 1e-9))
_FTOL, _GTOL, _MAXITER = 1e-15, 1e-9, 2000


def _minimise_bounded(negative: Any, x0: NDArray[Any]) -> NDArray[Any]:
    """The minimum of ``negative`` (value and gradient) from ``x0`` over :data:`_BOUNDS`, as
    ``scipy.optimize.minimize(negative, x0, jac=True, method="L-BFGS-B", bounds=_BOUNDS,
    options={"ftol": _FTOL, "gtol": _GTOL, "maxiter": _MAXITER}).x`` finds it.

    With scipy 1.15's L-BFGS-B (its C ``setulb``), the routine is driven here as ``minimize``
    drives it, without ``minimize``'s wrapping of the function (a copy, a comparison and
    several conversions per evaluation, and the setup of each call): the same steps from the
    same values, so the same point to the last bit (a test compares the two), in about two
    thirds of the time. A fit runs L-BFGS-B from eight starts at every node a search checks.
    Other scipy versions go through ``minimize`` itself."""
    setulb = _setulb()
    if setulb is None:
        from scipy import optimize

        r = optimize.minimize(
            negative,
            x0,
            jac=True,
            method="L-BFGS-B",
            bounds=list(_BOUNDS),
            options={"ftol": _FTOL, "gtol": _GTOL, "maxiter": _MAXITER},
        )
        return np.asarray(r.x)
    m, n = 10, 2  # minimize's default number of corrections; two parameters
    low = np.array([b[0] for b in _BOUNDS])
    high = np.array([b[1] for b in _BOUNDS])
    kinds = np.full(n, 2, dtype=np.int32)  # bounded on both sides
    x = np.clip(np.asarray(x0, dtype=np.float64).ravel(), low, high)
    factr = _FTOL / np.finfo(float).eps
    wa = np.zeros(2 * m * n + 5 * n + 11 * m * m + 8 * m, np.float64)
    iwa = np.zeros(3 * n, dtype=np.int32)
    task = np.zeros(2, dtype=np.int32)
    ln_task = np.zeros(2, dtype=np.int32)
    lsave = np.zeros(4, dtype=np.int32)
    isave = np.zeros(44, dtype=np.int32)
    dsave = np.zeros(29, dtype=np.float64)
    # minimize evaluates at the start once, then again only where the point moved
    at = x.copy()
    f, g = _value_and_gradient(negative, at)
    evaluations, iterations = 1, 0
    while True:
        g = g.astype(np.float64)
        setulb(m, x, low, high, kinds, f, g, factr, _GTOL, wa, iwa, task, lsave, isave, dsave,
               20, ln_task)  # fmt: skip
        if task[0] == 3:  # the value and gradient at x
            # np.array_equal(x, at), element by element: a tenth of its cost on two floats
            if not (x[0] == at[0] and x[1] == at[1]):
                at = x.copy()
                f, g = _value_and_gradient(negative, at)
                evaluations += 1
        elif task[0] == 1:  # a new iterate
            iterations += 1
            if iterations >= _MAXITER or evaluations > 15000:
                task[0], task[1] = 5, 504 if iterations >= _MAXITER else 502
        else:
            return x


def _value_and_gradient(negative: Any, x: NDArray[Any]) -> tuple[float, NDArray[Any]]:
    """``negative`` at ``x`` converted as ``minimize`` converts it: the value a scalar, the
    gradient an array of floats."""
    value, gradient = negative(np.copy(x))
    if not isinstance(value, float):
        value = np.asarray(value).item()
    return value, np.asarray(gradient, dtype=np.float64).reshape(-1)


_SETULB: list[Any] = []  # scipy's L-BFGS-B routine when driven directly, or None


def _setulb() -> Any:
    if not _SETULB:
        import scipy
        from scipy.optimize import _lbfgsb

        major, minor = (int(v) for v in scipy.__version__.split(".")[:2])
        _SETULB.append(_lbfgsb.setulb if (major, minor) == (1, 15) else None)
    return _SETULB[0]


_BLAS: list[Any] = []  # the BLAS thread pools, found once scipy is loaded


def _one_blas_thread() -> Any:
    """A context in which BLAS runs on one thread. The fit's quasi-Newton steps call BLAS and
    LAPACK on vectors of two: with OpenBLAS's threads waking for each, a fit cost 6 to 14 times
    more CPU on two busy cores (Adult, population uniqueness 0.01 by Pitman: 1,200-2,800 ms a
    search against 190 ms). One thread computes the same figures."""
    from threadpoolctl import ThreadpoolController

    if not _BLAS:
        _BLAS.append(ThreadpoolController())
    return _BLAS[0].limit(limits=1, user_api="blas")


def pitman_fit(sizes: NDArray[Any]) -> tuple[float, float] | None:
    """Maximum-likelihood (theta, alpha) of Pitman's partition for the class sizes, or None
    (see :func:`_pitman_fit`), with BLAS on one thread."""
    from scipy import optimize  # noqa: F401  (loaded before its thread pools are looked up)

    with _one_blas_thread():
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
    for t, a in starts[:1] + _pitman_maximise(sizes, starts):
        root = polished((t, a)) if a > 0 else None
        candidates.append(root if root is not None else (t, a))
    partition = _Partition.of(sizes)
    best = max(candidates, key=lambda ta: _loglik(partition, *ta))
    if theta_ewens is not None and best[1] < 1e-6:
        # On the boundary the optimiser stops a hair away from the exact Ewens fit.
        ewens = _loglik(partition, theta_ewens, 0.0)
        if ewens >= _loglik(partition, *best) - 1e-9 * abs(ewens):
            return theta_ewens, 0.0
    return best


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
