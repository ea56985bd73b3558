"""Steps that change record-level data: masking, generalization, perturbation.

Each module registers its step kinds in :mod:`anonweb.core.release.plan` on import; importing
this package registers them all. Differential-privacy steps live in :mod:`anonweb.core.dp`.
"""

from __future__ import annotations

from anonweb.core.transforms import generalize, mask, perturb  # noqa: F401  (registers the steps)
