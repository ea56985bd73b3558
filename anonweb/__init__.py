"""anonweb: anonymize tabular datasets and review their disclosure risk before release.

Kept import-free on purpose: management commands that only need the computation core
(``assess``, ``anonymize``) start without loading Celery, plotly or OpenDP.
"""
