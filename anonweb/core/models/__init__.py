"""Privacy models, one module each, with the checks every path calls.

:data:`.registry.MODELS` is the one list of them (k-anonymity, the l-diversity variants,
t-closeness, δ-disclosure, average risk, β-likeness, ...); each class declares its parameters,
figures and command-line flags (:mod:`.base`), and every path iterates the list. The classes
below are exported for convenience; a model added later is imported from its own module.

Each model is a frozen dataclass of its parameters (:class:`~.base.PrivacyModel`) that checks
classes given as :class:`~.counts.ClassData`, however they were formed::

    from anonweb.core.models import DistinctL, class_data

    data = class_data(df, quasi_identifiers=["age", "zip"], sensitive=["disease"])
    DistinctL("disease", 2).check(data)     # ModelCheck(satisfied=..., value=..., ...)
    DistinctL("disease", 2).passes(data)    # one bool per class

The assessment (:mod:`anonweb.core.assessment.profile`), the search
(:mod:`anonweb.core.search.flash`), the release report and the conflict check all call these.
"""

from __future__ import annotations

from anonweb.core.models.average_risk import AverageRisk
from anonweb.core.models.base import ModelCheck, PrivacyModel
from anonweb.core.models.counts import (
    ClassData,
    SensitiveCounts,
    SensitiveDomain,
    class_data,
    class_data_from_codes,
    sensitive_counts,
)
from anonweb.core.models.delta_disclosure import DeltaDisclosure
from anonweb.core.models.distinct_l import DistinctL
from anonweb.core.models.entropy_l import EntropyL
from anonweb.core.models.k_anonymity import KAnonymity
from anonweb.core.models.recursive_l import RecursiveCL
from anonweb.core.models.registry import MODEL_KINDS, model_from_dict, model_to_dict
from anonweb.core.models.t_closeness import TCloseness

__all__ = [
    "MODEL_KINDS",
    "AverageRisk",
    "ClassData",
    "DeltaDisclosure",
    "DistinctL",
    "EntropyL",
    "KAnonymity",
    "ModelCheck",
    "PrivacyModel",
    "RecursiveCL",
    "SensitiveCounts",
    "SensitiveDomain",
    "TCloseness",
    "check_models",
    "class_data",
    "class_data_from_codes",
    "model_from_dict",
    "model_to_dict",
    "sensitive_counts",
]


def check_models(models: list[PrivacyModel], data: ClassData) -> list[ModelCheck]:
    """Each model checked on the same classes."""
    return [m.check(data) for m in models]
