"""The one list of the built-in step modules: importing them registers their step kinds.

:func:`anonweb.core.release.plan.get_step` calls :func:`load` before it looks a kind up, so a
plan can name any built-in kind; a module that fails to import fails loudly here, never by a
step kind missing from a plan."""

from __future__ import annotations

from types import ModuleType

from anonweb.core.dp import local, mechanisms, synthetic
from anonweb.core.transforms import generalize, local_suppression, mask, perturb

# record-level steps first, then the DP measurements and local-DP steps
BUILTIN_STEP_MODULES: tuple[ModuleType, ...] = (
    mask,
    generalize,
    local_suppression,
    perturb,
    mechanisms,
    synthetic,
    local,
)


def load() -> tuple[ModuleType, ...]:
    """The built-in step modules (imported, so their kinds are registered)."""
    return BUILTIN_STEP_MODULES
