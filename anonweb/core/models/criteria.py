"""Privacy models the generalization search enforces, checked per equivalence class.

Each model answers, for every class of a node at once, whether the class satisfies it; classes
that fail are suppressed (within the suppression limit), as ARX does. ``monotonic`` says whether
the model stays satisfied when a node is generalized further *with suppression*, which is what
lets the search tag whole sublattices without checking them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from anonweb.core.errors import ParameterError
from anonweb.core.io.hierarchy import Hierarchy


@dataclass(frozen=True)
class KAnonymity:
    k: int
    monotonic = True
    sensitive = None

    def __post_init__(self) -> None:
        if not isinstance(self.k, int | np.integer) or self.k < 1:
            raise ParameterError(f"k must be a positive integer, got {self.k!r}")

    def describe(self) -> str:
        return f"{self.k}-anonymity"


@dataclass(frozen=True)
class DistinctL:
    sensitive: str
    l: int  # noqa: E741  (the letter used in the literature)
    monotonic = True

    def __post_init__(self) -> None:
        if self.l < 1:
            raise ParameterError(f"distinct l-diversity needs l >= 1, got {self.l}")

    def describe(self) -> str:
        return f"distinct {self.l}-diversity on {self.sensitive}"

    def passes(self, hist: np.ndarray, q: np.ndarray) -> np.ndarray:
        return (hist > 0).sum(axis=1) >= self.l


@dataclass(frozen=True)
class EntropyL:
    sensitive: str
    l: float  # noqa: E741
    monotonic = False

    def __post_init__(self) -> None:
        if self.l < 1:
            raise ParameterError(f"entropy l-diversity needs l >= 1, got {self.l}")

    def describe(self) -> str:
        return f"entropy {self.l}-diversity on {self.sensitive}"

    def passes(self, hist: np.ndarray, q: np.ndarray) -> np.ndarray:
        p = hist / np.maximum(hist.sum(axis=1, keepdims=True), 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            ent = -np.where(p > 0, p * np.log(p), 0.0).sum(axis=1)
        # a small tolerance so that exactly l equally frequent values count as l-diverse
        return ent >= np.log(self.l) - 1e-12


@dataclass(frozen=True)
class RecursiveCL:
    sensitive: str
    c: float
    l: int  # noqa: E741
    monotonic = False

    def __post_init__(self) -> None:
        if self.l < 1 or self.c <= 0:
            raise ParameterError(
                f"recursive (c,l)-diversity needs c > 0 and l >= 1, got c={self.c}, l={self.l}"
            )

    def describe(self) -> str:
        return f"recursive ({self.c},{self.l})-diversity on {self.sensitive}"

    def passes(self, hist: np.ndarray, q: np.ndarray) -> np.ndarray:
        srt = -np.sort(-hist, axis=1)
        if srt.shape[1] < self.l:
            return np.zeros(len(hist), dtype=bool)
        tail = srt[:, self.l - 1 :].sum(axis=1)
        return srt[:, 0] < self.c * tail


@dataclass(frozen=True)
class TCloseness:
    sensitive: str
    t: float
    distance: str = "equal"  # equal | ordered | hierarchical
    hierarchy: Hierarchy | None = None
    monotonic = False

    def __post_init__(self) -> None:
        if not 0 <= self.t <= 1:
            raise ParameterError(f"t must be between 0 and 1, got {self.t}")
        if self.distance not in ("equal", "ordered", "hierarchical"):
            raise ParameterError(
                f"unknown t-closeness distance {self.distance!r} (equal, ordered, hierarchical)"
            )
        if self.distance == "hierarchical" and self.hierarchy is None:
            raise ParameterError(
                f"hierarchical t-closeness on {self.sensitive!r} needs a hierarchy"
            )

    def describe(self) -> str:
        return f"{self.distance}-distance {self.t}-closeness on {self.sensitive}"

    def passes(
        self, hist: np.ndarray, q: np.ndarray, values: np.ndarray | None = None
    ) -> np.ndarray:
        return emd(hist, q, self.distance, values, self.hierarchy) <= self.t + 1e-12


@dataclass(frozen=True)
class DeltaDisclosure:
    sensitive: str
    delta: float
    monotonic = False

    def __post_init__(self) -> None:
        if self.delta <= 0:
            raise ParameterError(f"delta must be positive, got {self.delta}")

    def describe(self) -> str:
        return f"{self.delta}-disclosure privacy on {self.sensitive}"

    def passes(self, hist: np.ndarray, q: np.ndarray) -> np.ndarray:
        p = hist / np.maximum(hist.sum(axis=1, keepdims=True), 1)
        qn = q / q.sum()
        with np.errstate(divide="ignore"):
            ratio = np.abs(np.log2(np.where(p > 0, p, 1.0) / qn))
        # log base 2 and only the values present in a class, as ARX checks the model
        return np.where(p > 0, ratio, 0.0).max(axis=1) < self.delta


@dataclass(frozen=True)
class AverageRisk:
    """Ceiling on the average prosecutor re-identification risk (classes / records kept)."""

    threshold: float
    monotonic = False
    sensitive = None

    def __post_init__(self) -> None:
        if not 0 < self.threshold <= 1:
            raise ParameterError(
                f"the average-risk ceiling must be in (0, 1], got {self.threshold}"
            )

    def describe(self) -> str:
        return f"average re-identification risk <= {self.threshold}"


def emd(hist, q, distance, values=None, hierarchy=None) -> np.ndarray:
    """Earth mover's distance of each class distribution (rows of ``hist``) to ``q``."""
    p = hist / np.maximum(hist.sum(axis=1, keepdims=True), 1)
    qn = q / q.sum()
    diff = p - qn
    if distance == "equal":
        return 0.5 * np.abs(diff).sum(axis=1)
    if distance == "ordered":
        order = _value_order(values) if values is not None else np.arange(len(qn))
        m = len(qn)
        if m < 2:
            return np.zeros(len(p))
        return np.abs(np.cumsum(diff[:, order], axis=1)).sum(axis=1) / (m - 1)
    return _hierarchical_emd(diff, values, hierarchy)


def _value_order(values: np.ndarray) -> np.ndarray:
    try:
        numeric = np.array([float(v) for v in values])
        return np.argsort(numeric, kind="stable")
    except (TypeError, ValueError):
        return np.argsort(np.array([str(v) for v in values]), kind="stable")


def _hierarchical_emd(diff: np.ndarray, values, hierarchy: Hierarchy) -> np.ndarray:
    """Li et al.'s hierarchical distance: each inner node moves min(positive, negative) extra
    mass of its children, at cost level / height."""
    import pandas as pd

    hierarchy.validate_covers(pd.Series([str(v) for v in values]))
    index = {v: i for i, v in enumerate(hierarchy.values)}
    rows = [hierarchy.rows[index[str(v)]] for v in values]
    top = hierarchy.height - 1
    total = np.zeros(diff.shape[0])
    prev = np.arange(len(rows))
    extra = diff
    for level in range(1, hierarchy.height):
        cur, uniq = pd.factorize(pd.Series([r[level] for r in rows], dtype=object))
        c2p = np.zeros((extra.shape[1], len(uniq)))
        c2p[prev, cur] = 1.0
        pos = np.maximum(extra, 0) @ c2p
        neg = np.maximum(-extra, 0) @ c2p
        total += (level / top) * np.minimum(pos, neg).sum(axis=1)
        extra = extra @ c2p
        prev = cur
    return total


MODEL_KINDS = {
    "k_anonymity": (KAnonymity, ("k",)),
    "distinct_l": (DistinctL, ("sensitive", "l")),
    "entropy_l": (EntropyL, ("sensitive", "l")),
    "recursive_cl": (RecursiveCL, ("sensitive", "c", "l")),
    "t_closeness": (TCloseness, ("sensitive", "t", "distance")),
    "delta_disclosure": (DeltaDisclosure, ("sensitive", "delta")),
    "average_risk": (AverageRisk, ("threshold",)),
}


def model_from_dict(spec, hierarchies=None):
    """A model from its JSON form, e.g. ``{"model": "t_closeness", "sensitive": "disease",
    "t": 0.2, "distance": "hierarchical"}`` (the hierarchy is looked up by column)."""
    if not isinstance(spec, dict) or spec.get("model") not in MODEL_KINDS:
        known = ", ".join(MODEL_KINDS)
        got = spec.get("model") if isinstance(spec, dict) else spec
        raise ParameterError(f"unknown privacy model {got!r} (one of {known})")
    cls, fields = MODEL_KINDS[spec["model"]]
    extra = set(spec) - set(fields) - {"model"}
    if extra:
        raise ParameterError(
            f"privacy model {spec['model']!r}: unknown parameter(s) {', '.join(sorted(extra))}"
        )
    missing = [f for f in fields if f not in spec and f != "distance"]
    if missing:
        raise ParameterError(f"privacy model {spec['model']!r} needs {', '.join(missing)}")
    kwargs = {f: spec[f] for f in fields if f in spec}
    if cls is TCloseness and kwargs.get("distance") == "hierarchical":
        kwargs["hierarchy"] = (hierarchies or {}).get(kwargs["sensitive"])
    return cls(**kwargs)


def model_to_dict(model) -> dict:
    for name, (cls, fields) in MODEL_KINDS.items():
        if type(model) is cls:
            return {"model": name, **{f: getattr(model, f) for f in fields}}
    raise ParameterError(f"not a privacy model: {model!r}")
