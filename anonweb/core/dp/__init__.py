"""Differential privacy: the accounting (privacy maps, calibration) next to the mechanisms.

Its modules register the DP step kinds (``dp_release``, ``dp_synthetic``, the local-DP steps) in
:mod:`anonweb.core.release.steps` on import; :mod:`anonweb.core.release.catalog` lists them.
Importing the package registers the built-in statistics of ``dp_release``
(:mod:`anonweb.core.dp.kinds`), so the mechanisms, charts and utility figures find them whichever
DP module is imported first.
"""

from anonweb.core.dp import kinds

__all__ = ["kinds"]
