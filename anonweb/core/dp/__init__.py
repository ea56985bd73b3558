"""Differential privacy: the accounting (privacy maps, calibration) next to the mechanisms.

Importing this package registers the DP step kinds (``dp_release``, ``dp_synthetic``, the local-DP
steps) in :mod:`anonweb.core.release.plan`.
"""

from __future__ import annotations

from anonweb.core.dp import local, mechanisms, synthetic  # noqa: F401  (registers the steps)
