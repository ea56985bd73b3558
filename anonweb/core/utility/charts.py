"""A release's utility (``ReleaseUtility.to_dict()``) as plotly figures: per column, the source's
distribution beside the released one. Pure: plotly's figure objects only. Each chart is a dict
with an ``id``, a ``data_id`` for the embedded JSON and the ``figure``, like the risk charts.

The charts show the source's values: they are for privacy officers and data stewards only."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from anonweb.core.assessment.charts import _as_data, chart_text
from anonweb.core.numbers import for_people

ORIGINAL_COLOR = "#8a8f98"
RELEASED_COLOR = "#2f5d8a"
MAX_CHARTS = 60


def _side(dist: Mapping[str, Any], color: str, name: str) -> go.Bar:
    labels = [str(v) for v in dist.get("labels") or []]
    counts = list(dist.get("counts") or [])
    if dist.get("kind") == "histogram" and dist.get("missing"):
        labels.append("(missing)")
        counts.append(dist["missing"])
    return go.Bar(
        x=labels,
        y=counts,
        name=name,
        marker_color=color,
        hovertemplate=f"{name}: %{{x}}: %{{y}} records<extra></extra>",
    )


def _subtitle(col: Mapping[str, Any]) -> str:
    parts = []
    if col.get("information_loss") is not None:
        parts.append(f"information loss {col['information_loss']:.4f}")
    if col.get("tvd") is not None:
        parts.append(f"total variation distance {col['tvd']:.3f}")
    if col.get("mean_shift") is not None:
        scale = (col.get("mean") or {}).get("original")
        shift = for_people(col["mean_shift"], scale=scale)
        parts.append(f"mean shift {'+' if shift[0].isdigit() and shift != '0' else ''}{shift}")
    if col.get("suppressed"):
        parts.append(f"{col['suppressed']} cells suppressed")
    if col.get("changed_share") is not None:
        parts.append(f"{col['changed_share']:.1%} of cells changed")
    return "; ".join(parts)


def _safe_id(name: str, index: int) -> str:
    return f"utility-{index}-" + re.sub(r"[^A-Za-z0-9_-]", "_", name)[:40]


def column_chart(col: Mapping[str, Any], index: int = 0) -> dict[Any, Any]:
    """The source's distribution (left) beside the released one (right), one column."""
    orig, rel = col["original"], col["released"]
    fig = make_subplots(
        rows=1,
        cols=2,
        subplot_titles=("source", "released"),
        shared_yaxes=col.get("kind") == "numeric",
        horizontal_spacing=0.08,
    )
    fig.add_trace(_side(orig, ORIGINAL_COLOR, "source"), row=1, col=1)
    fig.add_trace(_side(rel, RELEASED_COLOR, "released"), row=1, col=2)
    title = chart_text(str(col["column"])) + (
        " (quasi-identifier)" if col.get("quasi_identifier") else ""
    )
    sub = _subtitle(col)
    fig.update_layout(
        title=title + (f"<br><sub>{sub}</sub>" if sub else ""),
        showlegend=False,
        height=340,
        margin={"l": 50, "r": 20, "t": 100, "b": 80},
        template="plotly_white",
    )
    fig.update_xaxes(type="category", tickangle=-30, automargin=True)
    fig.update_yaxes(title_text="records", row=1, col=1)
    cid = _safe_id(str(col["column"]), index)
    return {"id": f"chart-{cid}", "data_id": f"chart-{cid}-data", "figure": _as_data(fig)}


def utility_charts(utility: Mapping[str, Any]) -> list[dict[Any, Any]]:
    """One chart per compared column (at most ``MAX_CHARTS``), quasi-identifiers first."""
    columns = list(utility.get("columns") or [])
    columns.sort(key=lambda c: not c.get("quasi_identifier"))
    return [column_chart(c, i) for i, c in enumerate(columns[:MAX_CHARTS])]
