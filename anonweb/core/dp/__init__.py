"""Differential privacy: the accounting (privacy maps, calibration) next to the mechanisms.

Its modules register the DP step kinds (``dp_release``, ``dp_synthetic``, the local-DP steps) in
:mod:`anonweb.core.release.steps` on import; :mod:`anonweb.core.release.catalog` lists them.
"""
