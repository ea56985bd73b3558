"""Privacy models by name: the one list of them, and their JSON form in plans, policies and
reports.

:data:`MODELS` is the list every path iterates: the plan's schema (:data:`MODEL_SCHEMA`), the
risk profile's figures, the what-if, the release comparison, the pages, the command line's flags
and the team policy's form all read the model classes found here. Adding a model is one module
(a :class:`~anonweb.core.models.base.PrivacyModel` subclass declaring its ``schema``,
``figures`` and ``cli_flags``) and one line below.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from anonweb.core import schema as sch
from anonweb.core.errors import ParameterError
from anonweb.core.io.hierarchy import Hierarchy
from anonweb.core.models.average_risk import AverageRisk
from anonweb.core.models.base import CliFlag, Figure, PrivacyModel
from anonweb.core.models.beta_likeness import BetaLikeness
from anonweb.core.models.delta_disclosure import DeltaDisclosure
from anonweb.core.models.delta_presence import DeltaPresence
from anonweb.core.models.distinct_l import DistinctL
from anonweb.core.models.entropy_l import EntropyL
from anonweb.core.models.k_anonymity import KAnonymity
from anonweb.core.models.k_map import KMap
from anonweb.core.models.population_uniqueness import PopulationUniqueness
from anonweb.core.models.recursive_l import RecursiveCL
from anonweb.core.models.survey_risk import GlobalRisk, HouseholdRiskCeiling
from anonweb.core.models.t_closeness import TCloseness

MODELS: list[type[PrivacyModel]] = [
    KAnonymity,
    DistinctL,
    EntropyL,
    RecursiveCL,
    TCloseness,
    DeltaDisclosure,
    AverageRisk,
    BetaLikeness,
    PopulationUniqueness,
    KMap,
    DeltaPresence,
    GlobalRisk,
    HouseholdRiskCeiling,
]
# name -> (class, JSON fields), e.g. "t_closeness" -> (TCloseness, ("sensitive", "t", "distance"))
MODEL_KINDS: dict[str, tuple[type[PrivacyModel], tuple[str, ...]]] = {}
# name -> the parameters' schema (plans, forms, API documentation)
MODEL_SCHEMAS: dict[str, sch.Schema] = {}
# one entry of a plan's "models" list; kept as one object (updated in place) so that the step
# schemas holding it see every model registered
MODEL_SCHEMA: sch.Schema = {}


def _derive() -> None:
    MODEL_KINDS.clear()
    MODEL_KINDS.update({cls.kind: (cls, cls.fields) for cls in MODELS})
    MODEL_SCHEMAS.clear()
    MODEL_SCHEMAS.update({cls.kind: cls.schema for cls in MODELS if cls.schema is not None})
    MODEL_SCHEMA.clear()
    MODEL_SCHEMA.update(sch.variants("model", MODEL_SCHEMAS, "A privacy model the search enforces"))


_derive()


def register(cls: type[PrivacyModel]) -> None:
    """Add a model to the registry (a model of a plug-in, or a test's)."""
    if cls.kind in MODEL_KINDS:
        raise ParameterError(f"a privacy model named {cls.kind!r} is registered already")
    MODELS.append(cls)
    _derive()


def unregister(cls: type[PrivacyModel]) -> None:
    MODELS.remove(cls)
    _derive()


@contextmanager
def registered(cls: type[PrivacyModel]) -> Iterator[type[PrivacyModel]]:
    """The model registered for the duration of a ``with`` block."""
    register(cls)
    try:
        yield cls
    finally:
        unregister(cls)


def sensitive_figures() -> list[tuple[type[PrivacyModel], Figure]]:
    """Every model's figures of a sensitive column, in registry order."""
    return [(cls, f) for cls in MODELS for f in cls.figures]


def cli_flags() -> list[CliFlag]:
    """Every model's command-line flags, in registry order."""
    return [flag for cls in MODELS for flag in cls.cli_flags]


def model_class(kind: object) -> type[PrivacyModel]:
    if kind not in MODEL_KINDS:
        known = ", ".join(MODEL_KINDS)
        raise ParameterError(f"unknown privacy model {kind!r} (one of {known})")
    return MODEL_KINDS[str(kind)][0]


def canonical_model_spec(spec: object) -> object:
    """A model's JSON form as the registry reads it: ``{"kind": ...}`` is read as
    ``{"model": ...}``, and a parameter's alias (``field_aliases``, e.g. average risk's ``max``)
    as the parameter. Anything else is returned as it is, for :func:`model_from_dict` to refuse
    with its reason."""
    if not isinstance(spec, Mapping):
        return spec
    out = dict(spec)
    if "model" not in out and "kind" in out:
        out["model"] = out.pop("kind")
    kind = out.get("model")
    if isinstance(kind, str) and kind in MODEL_KINDS:
        for alias, name in MODEL_KINDS[kind][0].field_aliases.items():
            if alias in out and name not in out:
                out[name] = out.pop(alias)
    return out


def model_from_dict(
    spec: object, hierarchies: Mapping[str, Hierarchy] | None = None
) -> PrivacyModel:
    """A model from its JSON form, e.g. ``{"model": "t_closeness", "sensitive": "disease",
    "t": 0.2, "distance": "hierarchical"}`` (the hierarchy is looked up by column; ``"kind"``
    may stand for ``"model"``: :func:`canonical_model_spec`)."""
    spec = canonical_model_spec(spec)
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
    optional = cls.optional_fields()
    missing = [f for f in fields if f not in spec and f not in optional]
    if missing:
        raise ParameterError(f"privacy model {spec['model']!r} needs {', '.join(missing)}")
    kwargs: dict[str, Any] = {f: spec[f] for f in fields if f in spec}
    return cls.from_spec(kwargs, hierarchies or {})


def model_to_dict(model: PrivacyModel) -> dict[str, Any]:
    if not isinstance(model, PrivacyModel):
        raise ParameterError(f"not a privacy model: {model!r}")
    return model.to_dict()
