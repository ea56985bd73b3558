"""Local differential privacy: each record is randomized on its own, before any aggregation.

* Categorical columns: k-ary randomized response. The true value is kept with probability
  p = e^ε / (e^ε + K − 1), otherwise one of the other K − 1 categories is reported uniformly
  (each with q = 1 / (e^ε + K − 1)), so p / q = e^ε for every pair of inputs.
* Bounded numeric columns: clamp to the declared range, then add Laplace((hi − lo) / ε).

Both use OpenDP's measurements (``make_randomized_response``, ``make_laplace``), whose samplers
draw from a CSPRNG and are exact; the ε reported is the measurement's own map. OpenDP cannot be
seeded, so an LDP release is not reproducible from the plan, by design.

The analyst recovers the category counts with :func:`debias_counts` (n̂_v = (c_v − n·q)/(p − q)),
an unbiased estimate whose variance grows quickly as ε shrinks.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from anonweb.core import schema as sch
from anonweb.core.dp import accounting as acc
from anonweb.core.dp.mechanisms import MISSING, READ_FROM_DATA, READ_FROM_DATA_KEY, cell_labels
from anonweb.core.errors import DataError, ParameterError
from anonweb.core.io.frame import require_columns
from anonweb.core.release.steps import (
    ROW_WISE,
    UNBOUNDED,
    Plan,
    StepContext,
    StepOutcome,
    register_step,
)


def rr_probabilities(epsilon: float, k: int) -> tuple[float, float]:
    """(p, q): probability of reporting the true category, and each other category."""
    if k < 2:
        raise ParameterError("randomized response needs at least two categories")
    denominator = math.exp(epsilon) + k - 1
    return math.exp(epsilon) / denominator, 1.0 / denominator


def debias_counts(
    observed: Mapping[str, float], *, epsilon: float, categories: Sequence[str]
) -> dict[str, float]:
    """Unbiased estimate of the true counts from randomized-response counts (any category
    missing from ``observed`` counts as 0)."""
    eps = acc.check_epsilon(epsilon)
    unknown = set(observed) - set(categories)
    if unknown:
        raise DataError(
            f"observed values outside the categories: {', '.join(sorted(map(str, unknown)))}"
        )
    p, q = rr_probabilities(eps, len(categories))
    n = float(sum(observed.values()))
    return {c: (float(observed.get(c, 0)) - n * q) / (p - q) for c in categories}


@dataclass(frozen=True)
class LDPResult:
    frame: pd.DataFrame
    report: dict[str, Any]


def randomized_response_measurement(categories: Sequence[str], epsilon: float) -> Any:
    """OpenDP's k-ary randomized response at ``epsilon``, and its exact ε (d_in = 1 record)."""
    dp = acc.opendp()
    p, _ = rr_probabilities(epsilon, len(categories))
    meas = dp.m.make_randomized_response(categories=list(categories), prob=p, T=str)
    return meas, float(meas.map(1))


def _missing_category(
    labels: pd.Series, *, column: str, cats: Sequence[str], missing_as: Any
) -> pd.Series:
    """Missing values as a declared category, before the mechanism.

    The output alphabet must be the same for every table: if a missing value widened it, one
    person's missing value would make "(missing)" a possible answer for everyone, and the two
    tables would be told apart with certainty. So missing is either declared as a category
    (``(missing)``) or mapped to one (``missing_as``); otherwise the column is refused."""
    if missing_as is not None:
        target = str(missing_as)
        if target not in cats:
            raise ParameterError(
                f"missing values of {column!r} are to be reported as {target!r}, which is not "
                "one of the declared categories"
            )
        return labels.where(labels != MISSING, target)
    missing = int((labels == MISSING).sum())
    if missing and MISSING not in cats:
        raise DataError(
            f"column {column!r} has {missing} missing value(s) and {MISSING!r} is not a declared "
            f"category: declare {MISSING!r} as a category, or report missing values as one of "
            "the declared categories (missing_as), so that every table has the same possible "
            "answers"
        )
    return labels


def randomize_categories(
    df: pd.DataFrame,
    *,
    column: str,
    epsilon: Any,
    categories: Sequence[str] | None = None,
    missing_as: Any = None,
) -> LDPResult:
    """Randomize ``column`` record by record; the report holds the debiased category counts.

    The categories must be declared (public): read from the data, the set of possible answers
    would depend on who is in the table. Missing values are a declared category or are mapped
    to one (see :func:`_missing_category`).
    """
    eps = acc.check_epsilon(epsilon)
    require_columns(df, [column])
    if not categories:
        raise ParameterError(
            f"randomized response on {column!r} needs its public categories (a codebook): read "
            "from the data, the possible answers would depend on who is in the table"
        )
    cats = [str(c) for c in categories]
    if len(set(cats)) != len(cats):
        raise ParameterError(f"declared categories for {column!r} are not distinct")
    labels = _missing_category(
        cell_labels(df[column]), column=column, cats=cats, missing_as=missing_as
    )
    outside = sorted(set(labels) - set(cats))
    if outside:
        raise DataError(
            f"column {column!r} has values outside the declared categories: {', '.join(outside[:5])}"
        )
    meas, eps_spent = randomized_response_measurement(cats, eps)
    # One call per record: each draw must be independent, and OpenDP's sampler is the one that
    # resists floating-point and timing attacks, so we keep it despite the per-call overhead.
    randomized = pd.Series([meas(v) for v in labels], index=df.index, dtype=object)
    originals = dict(zip(cell_labels(df[column]), df[column]))
    out = df.copy()
    out[column] = randomized.map(lambda v: originals.get(v, v) if v != MISSING else None)
    observed = randomized.value_counts().to_dict()
    p, q = rr_probabilities(eps, len(cats))
    report = {
        "kind": "ldp_randomized_response",
        "column": column,
        "epsilon_spent": eps_spent,
        "model": "local (each record randomized on its own)",
        "categories": cats,
        "categories_source": "declared",
        "missing_as": None if missing_as is None else str(missing_as),
        "p_keep": p,
        "q_other": q,
        "observed_counts": {c: int(observed.get(c, 0)) for c in cats},
        "estimated_counts": debias_counts(observed, epsilon=eps, categories=cats),
        "estimate_sd": _debias_sd(len(df), p, q),
        "estimate_ci95_halfwidth": estimate_halfwidths(observed, p=p, q=q, categories=cats),
    }
    return LDPResult(out, report)


def estimate_halfwidths(
    observed: Mapping[str, float], *, p: float, q: float, categories: Sequence[str]
) -> dict[str, float]:
    """95% half-width of each debiased count. A category's observed count sums n_v records
    kept with probability p and n − n_v others reported as it with probability q, so its
    variance is n_v·p(1−p) + (n − n_v)·q(1−q), over (p − q)²; n_v is taken from the estimate
    itself (clipped to [0, n]): post-processing of the randomized column only. The normal
    approximation is close for the table sizes local DP needs."""
    n = float(sum(observed.values()))
    out = {}
    for c in categories:
        estimate = (float(observed.get(c, 0)) - n * q) / (p - q)
        kept = min(max(estimate, 0.0), n)
        variance = kept * p * (1 - p) + (n - kept) * q * (1 - q)
        out[c] = float(NORMAL_95 * math.sqrt(variance) / (p - q))
    return out


NORMAL_95 = 1.959963984540054  # the 97.5th percentile of the standard normal


def _debias_sd(n: int, p: float, q: float) -> float:
    """Worst-case standard deviation of one debiased count (observed share near 1/2)."""
    return math.sqrt(n * 0.25) / (p - q)


def laplace_measurement(bounds: tuple[float, float], epsilon: float) -> tuple[Any, float, float]:
    """Laplace((hi − lo)/ε) on each value; ε from the map at d_in = hi − lo (one record's
    value moving across the whole range)."""
    dp = acc.opendp()
    lo, hi = bounds
    space = (dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.l1_distance(T=float))
    meas, scale = acc.calibrate(
        lambda s: dp.m.make_laplace(*space, scale=s),
        sensitivity=hi - lo,
        d_in=hi - lo,
        epsilon=epsilon,
    )
    return meas, scale, acc.epsilon_of(meas, hi - lo)[0]


def randomize_numeric(
    df: pd.DataFrame, *, column: str, epsilon: Any, bounds: Any, missing_as: Any = None
) -> LDPResult:
    """Clamp ``column`` to the declared bounds and add Laplace noise to each value.

    A missing value left missing would say exactly who has one (no noise hides it), so missing
    values are refused unless ``missing_as`` names a value within the bounds to stand for them;
    that value is then randomized like any other.
    """
    eps = acc.check_epsilon(epsilon)
    lo, hi = acc.check_bounds(bounds, what=f"local noise on {column!r}")
    require_columns(df, [column])
    values = pd.to_numeric(df[column], errors="coerce")
    if values.isna().sum() > df[column].isna().sum():
        raise DataError(f"column {column!r} is not numeric")
    missing = int(values.isna().sum())
    if missing_as is not None:
        try:
            fill = float(missing_as)
        except (TypeError, ValueError):
            raise ParameterError(
                f"missing values of {column!r} must stand for a number, not {missing_as!r}"
            ) from None
        if not lo <= fill <= hi:
            raise ParameterError(
                f"missing values of {column!r} must stand for a number within the bounds "
                f"{lo:g} to {hi:g}, not {fill:g}"
            )
        values = values.fillna(fill)
    elif missing:
        raise DataError(
            f"column {column!r} has {missing} missing value(s): left missing they would show who "
            "has one, unprotected by the noise. Give a value within the bounds to report them as "
            "(missing_as), or fill them in first"
        )
    meas, scale, eps_spent = laplace_measurement((lo, hi), eps)
    clamped = np.clip(values.to_numpy(dtype=float), lo, hi).tolist()
    out = df.copy()
    out[column] = np.asarray(meas(clamped) if clamped else [], dtype=float)
    report = {
        "kind": "ldp_laplace",
        "column": column,
        "epsilon_spent": eps_spent,
        "model": "local (each record randomized on its own)",
        "bounds": [lo, hi],
        "noise": {"mechanism": "laplace", "scale": scale},
        "ci95_halfwidth": acc.laplace_ci95(scale, integer=False),
        "missing_as": None if missing_as is None else float(missing_as),
    }
    return LDPResult(out, report)


# Randomized response keeps the true value with p = e^ε / (e^ε + K − 1); beyond this ε, p rounds
# to 1 in floating point for two categories and OpenDP refuses the mechanism (and e^ε itself
# overflows past ε ≈ 709). Local ε this large protects nobody anyway.
MAX_LOCAL_EPSILON = 30.0
LOCAL_EPSILON = sch.number(
    "Privacy loss of each person's randomized value",
    exclusive_minimum=0,
    maximum=MAX_LOCAL_EPSILON,
)
RR_SCHEMA = sch.obj(
    {
        "column": sch.column("The categorical column to randomize", role="writes"),
        "epsilon": LOCAL_EPSILON,
        "categories": sch.array(
            sch.one_of(sch.string(max_length=None), sch.number()),
            "Public categories (a codebook; required to run)",
            min_items=2,
            max_items=10_000,
            unique=True,
        ),
        "missing_as": sch.one_of(
            sch.string(max_length=None),
            sch.number(),
            description="The declared category missing values are reported as",
        ),
        READ_FROM_DATA_KEY: READ_FROM_DATA,
    },
    required=["column", "epsilon"],
    labels={
        "column": "Column",
        "epsilon": "ε per column per record (local DP)",
        "categories": "Public categories",
        "missing_as": "Category a missing value reports as",
        "read_from_data": "Read from the data (not private)",
    },
    title="Local DP: randomized response",
)
LAPLACE_SCHEMA = sch.obj(
    {
        "column": sch.column("The numeric column to randomize", role="writes", numeric=True),
        "epsilon": LOCAL_EPSILON,
        "bounds": sch.one_of(
            sch.array(sch.number(minimum=-1e15, maximum=1e15), min_items=2, max_items=2),
            sch.string(min_length=3, max_length=100),
            description="Public clamping bounds [lo, hi]",
        ),
        "missing_as": sch.number("The value within the bounds missing values are reported as"),
        READ_FROM_DATA_KEY: READ_FROM_DATA,
    },
    required=["column", "epsilon", "bounds"],
    labels={
        "column": "Column",
        "epsilon": "ε per column per record (local DP)",
        "bounds": "Public bounds [low, high]",
        "missing_as": "Value a missing value stands for",
        "read_from_data": "Read from the data (not private)",
    },
    title="Local DP: Laplace noise",
)
LOCAL_PUBLIC_REPORT = (
    "kind",
    "column",
    "epsilon_spent",
    "model",
    "categories",
    "categories_source",
    "p_keep",
    "q_other",
    "observed_counts",
    "estimated_counts",
    "estimate_sd",
    "estimate_ci95_halfwidth",
    "bounds",
    "noise",
    "ci95_halfwidth",
    "missing_as",
)


def _register() -> None:
    def check_rr(params: Mapping[str, Any]) -> None:
        eps = acc.check_epsilon(params.get("epsilon"))
        if not params.get("column"):
            raise ParameterError("randomized response needs a column")
        if eps > MAX_LOCAL_EPSILON:
            raise ParameterError(
                f"local epsilon must be at most {MAX_LOCAL_EPSILON:g}, not {eps:g}"
            )

    def check_rr_missing(params: Mapping[str, Any]) -> None:
        check_rr(params)
        cats, missing_as = params.get("categories"), params.get("missing_as")
        if cats and missing_as is not None and str(missing_as) not in [str(c) for c in cats]:
            raise ParameterError(
                f"missing values are to be reported as {missing_as!r}, which is not one of the "
                "declared categories"
            )

    def check_laplace(params: Mapping[str, Any]) -> None:
        check_rr(params)
        acc.check_bounds(params.get("bounds"), what="local Laplace noise")

    def cost(params: Mapping[str, Any]) -> dict[str, float]:
        # Local ε protects each record against everyone, the collector included. It has its own
        # key because it is per record; the ledger charges it too (the server holds the raw
        # table, so the randomized copy is also a release about those people).
        return {"local_epsilon": acc.check_epsilon(params.get("epsilon"))}

    def rr_stability(params: Mapping[str, Any], plan: Plan) -> int | None:
        # Without declared categories the output alphabet is the set seen in the data: one
        # person's new value becomes a possible output of every other record.
        return ROW_WISE if params.get("categories") else UNBOUNDED

    @register_step(
        "ldp_randomized_response",
        validate=check_rr_missing,
        privacy_cost=cost,
        stability=rr_stability,
        schema=RR_SCHEMA,
        # the values written are the declared categories, checked against a public codebook
        keeps_values=lambda params: bool(params.get("categories")),
        public_report=LOCAL_PUBLIC_REPORT,
    )
    def rr_step(df: pd.DataFrame, params: Mapping[str, Any], ctx: StepContext) -> StepOutcome:
        result = randomize_categories(
            df,
            column=params["column"],
            epsilon=params["epsilon"],
            categories=params.get("categories"),
            missing_as=params.get("missing_as"),
        )
        return StepOutcome(frame=result.frame, report=result.report)

    @register_step(
        "ldp_laplace",
        validate=check_laplace,
        privacy_cost=cost,
        stability=ROW_WISE,
        schema=LAPLACE_SCHEMA,
        perturbs=True,
        public_report=LOCAL_PUBLIC_REPORT,
    )
    def laplace_step(df: pd.DataFrame, params: Mapping[str, Any], ctx: StepContext) -> StepOutcome:
        result = randomize_numeric(
            df,
            column=params["column"],
            epsilon=params["epsilon"],
            bounds=params["bounds"],
            missing_as=params.get("missing_as"),
        )
        return StepOutcome(frame=result.frame, report=result.report)


_register()
