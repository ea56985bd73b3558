"""Steps that change data; each module registers its step kinds in :mod:`anonweb.core.plan`.

Importing this package registers every built-in step. Modules are imported only if present, so
a checkout with part of them still runs the others.
"""

from __future__ import annotations

import importlib
import importlib.util

STEP_MODULES = ("mask", "generalize", "perturb", "dp", "ldp")

for _name in STEP_MODULES:
    _full = f"{__name__}.{_name}"
    if importlib.util.find_spec(_full) is not None:
        importlib.import_module(_full)
