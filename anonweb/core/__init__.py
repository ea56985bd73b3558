"""anonweb's privacy core: pure pandas/NumPy/OpenDP, no Django.

The wings, in the order data flows through them (a wing imports only from wings before it):

* :mod:`~anonweb.core.io` — reading tables and generalization hierarchies;
* :mod:`~anonweb.core.risk` — equivalence classes, re-identification risk, population models,
  linkage, the intruder check;
* :mod:`~anonweb.core.models` — privacy models (k-anonymity, l-diversity, t-closeness, ...);
* :mod:`~anonweb.core.assessment` — the risk profile of a table and its charts;
* :mod:`~anonweb.core.search` — the optimal generalization search, its metrics, Mondrian;
* :mod:`~anonweb.core.conflicts` — what releases of one source disclose together;
* :mod:`~anonweb.core.release.steps` — the registry of step kinds;
* :mod:`~anonweb.core.transforms` and :mod:`~anonweb.core.dp` — the step kinds a plan runs;
* :mod:`~anonweb.core.release` — release plans (validation, costs, running them, the catalog of
  built-in steps) and the path that makes a release;
* :mod:`~anonweb.core.utility` — what a release kept of its source (internal).

The main entry points are importable from here: ``from anonweb.core import assess_risk``.
"""

from __future__ import annotations

import importlib
from typing import Any

_PUBLIC = {
    "assess_risk": "anonweb.core.assessment.profile",
    "apply_plan": "anonweb.core.release.run",
    "plan_from_dict": "anonweb.core.release.plan",
    "plan_to_dict": "anonweb.core.release.plan",
    "read_table": "anonweb.core.io.frame",
    "read_hierarchy": "anonweb.core.io.hierarchy",
    "optimal_generalization": "anonweb.core.search.flash",
    "mondrian": "anonweb.core.search.mondrian",
    "release_conflicts": "anonweb.core.conflicts.intersection",
    "intruder_check": "anonweb.core.risk.intruder",
    "release_utility": "anonweb.core.utility.measures",
    "CoreError": "anonweb.core.errors",
    "DataError": "anonweb.core.errors",
    "HierarchyError": "anonweb.core.errors",
    "ParameterError": "anonweb.core.errors",
}

__all__ = sorted(_PUBLIC)


def __getattr__(name: str) -> Any:
    # Lazy, so that importing one wing does not import all of them.
    try:
        module = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'anonweb.core' has no attribute {name!r}") from None
    return getattr(importlib.import_module(module), name)
