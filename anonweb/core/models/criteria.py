"""The privacy models under their earlier home; each now lives in a module of its own
(:mod:`anonweb.core.models`). Import from there."""

from __future__ import annotations

from anonweb.core.models.average_risk import AverageRisk
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
    "DeltaDisclosure",
    "DistinctL",
    "EntropyL",
    "KAnonymity",
    "RecursiveCL",
    "TCloseness",
    "model_from_dict",
    "model_to_dict",
]
