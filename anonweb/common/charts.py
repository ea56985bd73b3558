"""Charts for pages (risk, utility), built once per distinct report.

Building the plotly figures costs tens of milliseconds of CPU, and a stored report does not
change between views of its page, so the figures are kept in Django's cache under the digest of
the report they show (a purged or different report is a different key)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

from django.core.cache import cache

from anonweb.core.assessment.charts import risk_charts

CHART_SECONDS = 24 * 3600


def cached_by_digest(kind: str, data: Any, build: Callable[[], Any]) -> Any:
    """``build()``, kept in the cache under ``kind`` and the digest of the ``data`` it shows."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    key = f"anonweb:{kind}:" + hashlib.sha256(text.encode()).hexdigest()
    return cache.get_or_set(key, build, CHART_SECONDS)


def risk_charts_cached(risk: Mapping[str, Any]) -> list[dict[Any, Any]]:
    return cached_by_digest("risk-charts", risk, lambda: risk_charts(risk))
