"""Risk charts for pages, built once per distinct risk report.

Building the plotly figures costs tens of milliseconds of CPU, and a stored report does not
change between views of its page, so the figures are kept in Django's cache under the digest of
the report they show (a purged or different report is a different key)."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from django.core.cache import cache

CHART_SECONDS = 24 * 3600


def risk_charts_cached(risk: Mapping[str, Any]) -> list[dict[Any, Any]]:
    from anonweb.core.assessment.charts import risk_charts

    text = json.dumps(risk, sort_keys=True, separators=(",", ":"), default=str)
    key = "anonweb:risk-charts:" + hashlib.sha256(text.encode()).hexdigest()
    return cache.get_or_set(key, lambda: risk_charts(risk), CHART_SECONDS)
