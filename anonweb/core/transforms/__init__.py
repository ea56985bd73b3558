"""Steps that change record-level data: masking, generalization, perturbation.

Each module registers its step kinds in :mod:`anonweb.core.release.steps` on import;
:mod:`anonweb.core.release.catalog` lists them. Differential-privacy steps live in
:mod:`anonweb.core.dp`.
"""
