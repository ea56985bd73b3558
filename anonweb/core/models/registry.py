"""Privacy models by name: their JSON form in plans, policies and reports."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from anonweb.core.errors import ParameterError
from anonweb.core.io.hierarchy import Hierarchy
from anonweb.core.models.average_risk import AverageRisk
from anonweb.core.models.base import PrivacyModel
from anonweb.core.models.delta_disclosure import DeltaDisclosure
from anonweb.core.models.distinct_l import DistinctL
from anonweb.core.models.entropy_l import EntropyL
from anonweb.core.models.k_anonymity import KAnonymity
from anonweb.core.models.recursive_l import RecursiveCL
from anonweb.core.models.t_closeness import TCloseness

MODELS: tuple[type[PrivacyModel], ...] = (
    KAnonymity,
    DistinctL,
    EntropyL,
    RecursiveCL,
    TCloseness,
    DeltaDisclosure,
    AverageRisk,
)
# name -> (class, JSON fields), e.g. "t_closeness" -> (TCloseness, ("sensitive", "t", "distance"))
MODEL_KINDS: dict[str, tuple[type[PrivacyModel], tuple[str, ...]]] = {
    cls.kind: (cls, cls.fields) for cls in MODELS
}
OPTIONAL = {"distance"}


def model_from_dict(
    spec: object, hierarchies: Mapping[str, Hierarchy] | None = None
) -> PrivacyModel:
    """A model from its JSON form, e.g. ``{"model": "t_closeness", "sensitive": "disease",
    "t": 0.2, "distance": "hierarchical"}`` (the hierarchy is looked up by column)."""
    if not isinstance(spec, Mapping) or spec.get("model") not in MODEL_KINDS:
        known = ", ".join(MODEL_KINDS)
        got = spec.get("model") if isinstance(spec, Mapping) else spec
        raise ParameterError(f"unknown privacy model {got!r} (one of {known})")
    cls, fields = MODEL_KINDS[spec["model"]]
    extra = set(spec) - set(fields) - {"model"}
    if extra:
        raise ParameterError(
            f"privacy model {spec['model']!r}: unknown parameter(s) {', '.join(sorted(extra))}"
        )
    missing = [f for f in fields if f not in spec and f not in OPTIONAL]
    if missing:
        raise ParameterError(f"privacy model {spec['model']!r} needs {', '.join(missing)}")
    kwargs: dict[str, Any] = {f: spec[f] for f in fields if f in spec}
    if cls is TCloseness and kwargs.get("distance") == "hierarchical":
        kwargs["hierarchy"] = (hierarchies or {}).get(kwargs["sensitive"])
    return cls(**kwargs)


def model_to_dict(model: PrivacyModel) -> dict[str, Any]:
    if not isinstance(model, PrivacyModel):
        raise ParameterError(f"not a privacy model: {model!r}")
    return model.to_dict()
