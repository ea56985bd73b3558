"""Risk results (plain dicts from ``RiskProfile.to_dict()``) -> plotly figures as JSON data.

Pure: plotly's figure objects only, no web framework. Each chart is a dict with an ``id``,
a ``data_id`` for the embedded JSON and the ``figure`` (data + layout).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
from numpy.typing import ArrayLike
from plotly.utils import PlotlyJSONEncoder

_LAYOUT = {
    "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
    "height": 340,
    "template": "plotly_white",
}


# Trace fields that hold text taken from the data (category labels, values, names).
_TEXT_FIELDS = ("x", "y", "text", "hovertext", "labels", "name", "ids")


def chart_text(value: str) -> str:
    """Text from the data as plotly shows it, never as markup: plotly renders a subset of HTML
    in labels (``<a href>`` is a live link), so ``&``, ``<`` and ``>`` become entities, which
    it displays as the characters."""
    return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _plain(value: Any) -> Any:
    if isinstance(value, str):
        return chart_text(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _as_data(fig: go.Figure) -> dict[Any, Any]:
    """The figure as JSON data; every chart passes here, so the data's text in its traces is
    made plain (:func:`chart_text`) in this one place. Titles name columns through
    :func:`chart_text` where they are built."""
    data: dict[Any, Any] = json.loads(json.dumps(fig.to_plotly_json(), cls=PlotlyJSONEncoder))
    for trace in data.get("data") or []:
        for key in _TEXT_FIELDS:
            if key in trace:
                trace[key] = _plain(trace[key])
    return data


def _class_size_chart(risk: Mapping[str, Any]) -> go.Figure | None:
    sizes = risk.get("class_sizes")
    if not sizes:
        return None
    if isinstance(sizes, Mapping):
        pairs = sorted(((int(k), int(v)) for k, v in sizes.items()), key=lambda p: p[0])
    else:
        pairs = sorted((int(d["size"]), int(d["classes"])) for d in sizes)
    x = [str(s) for s, _ in pairs]
    records = [s * c for s, c in pairs]
    fig = go.Figure(
        go.Bar(
            x=x,
            y=records,
            name="records",
            hovertemplate="class size %{x}: %{y} records<extra></extra>",
        )
    )
    fig.update_layout(
        title="Records by equivalence-class size (size 1 = unique)",
        xaxis_title="class size",
        yaxis_title="records",
        xaxis_type="category",
        **_LAYOUT,
    )
    return fig


def _records_at_risk_chart(risk: Mapping[str, Any]) -> go.Figure | None:
    at_risk = risk.get("records_at_risk")
    if not at_risk:
        return None
    items = sorted(at_risk.items(), key=lambda kv: -float(kv[0]))
    x = [f"> {float(k):.0%}" for k, _ in items]
    y = [float(v["share"]) if isinstance(v, Mapping) else float(v) for _, v in items]
    fig = go.Figure(
        go.Bar(x=x, y=y, marker_color="#b3261e", hovertemplate="%{y:.1%} of records<extra></extra>")
    )
    fig.update_layout(
        title="Records whose re-identification risk exceeds a threshold",
        yaxis_tickformat=".0%",
        xaxis_title="prosecutor risk",
        yaxis_title="share of records",
        **_LAYOUT,
    )
    return fig


SHARE_BINS = (
    ("under 50%", 0.0, 0.5),
    ("50-80%", 0.5, 0.8),
    ("80-99%", 0.8, 1.0),
    ("100%: disclosed", 1.0, 1.01),
)


def homogeneity_histogram(top_share: ArrayLike, sizes: ArrayLike) -> dict[str, int]:
    """Records by the share of their class that holds the class's most frequent sensitive
    value: 100% means the class discloses the value to anyone who can place a person in it."""
    import numpy as np

    share = np.asarray(top_share, dtype=float)
    size = np.asarray(sizes, dtype=np.int64)
    out = {}
    for label, lo, hi in SHARE_BINS:
        mask = (share >= lo) & (share < hi) if hi <= 1.0 else share >= lo - 1e-12
        out[label] = int(size[mask].sum())
    return out


def _homogeneity_chart(risk: Mapping[str, Any]) -> go.Figure | None:
    hist = risk.get("homogeneity") or {}
    if not hist:
        return None
    fig = go.Figure()
    colors = ["#2e7d32", "#f9a825", "#ef6c00", "#b3261e"]
    for (label, _, _), color in zip(SHARE_BINS, colors, strict=True):
        fig.add_bar(
            name=label, x=list(hist), y=[hist[sa].get(label, 0) for sa in hist], marker_color=color
        )
    fig.update_layout(
        title="Homogeneity: records by the share of their class holding its most common sensitive value",
        barmode="stack",
        xaxis_title="sensitive column",
        yaxis_title="records",
        **_LAYOUT,
    )
    return fig


def intruder_chart(result: Mapping[str, Any]) -> dict[Any, Any] | None:
    """The two distance distributions of the maximum-knowledge intruder check: each original
    record's distance to its closest anonymized record, against random records' distances."""
    match, chance = result.get("match_distances"), result.get("baseline_distances")
    if not match or not chance:
        return None
    fig = go.Figure()
    for name, dist, color in (
        ("original records", match, "#b3261e"),
        ("random records (chance)", chance, "#5b6775"),
    ):
        edges, counts = dist["bin_edges"], dist["counts"]
        total = max(1, sum(counts))
        fig.add_bar(
            name=name,
            x=[(a + b) / 2 for a, b in zip(edges, edges[1:], strict=False)],
            y=[c / total for c in counts],
            marker_color=color,
            opacity=0.7,
        )
    fig.add_vline(
        x=result.get("threshold", 0), line_dash="dash", annotation_text="5th percentile of chance"
    )
    fig.update_layout(
        title="Distance to the closest released record: linkage against chance",
        barmode="overlay",
        xaxis_title=f"distance ({result.get('metric', 'rank')})",
        yaxis_title="share of records",
        yaxis_tickformat=".0%",
        **_LAYOUT,
    )
    return {"id": "chart-intruder", "data_id": "chart-intruder-data", "figure": _as_data(fig)}


def _suda_score_chart(risk: Mapping[str, Any]) -> go.Figure | None:
    scores = (risk.get("survey") or {}).get("suda_scores")
    if not scores:
        return None
    x = [f"{float(d['score']):g}" for d in scores]
    y = [int(d["records"]) for d in scores]
    fig = go.Figure(go.Bar(x=x, y=y, hovertemplate="SUDA score %{x}: %{y} records<extra></extra>"))
    fig.update_layout(
        title="Records by SUDA score (0: no minimal sample unique)",
        xaxis_title="SUDA score",
        yaxis_title="records",
        xaxis_type="category",
        **_LAYOUT,
    )
    return fig


def _survey_risk_chart(risk: Mapping[str, Any]) -> go.Figure | None:
    bands = (risk.get("survey") or {}).get("risk_bands")
    if not bands:
        return None
    unit = str(bands["unit"])
    x = [str(b["band"]) for b in bands["bands"]]
    y = [int(b["count"]) for b in bands["bands"]]
    fig = go.Figure(
        go.Bar(x=x, y=y, marker_color="#b3261e", hovertemplate=f"%{{y}} {unit}<extra></extra>")
    )
    what = "household risk" if unit == "households" else "individual risk"
    fig.update_layout(
        title=f"{unit.capitalize()} by {what} (sdcMicro's measure, with survey weights)",
        xaxis_title=what,
        yaxis_title=unit,
        xaxis_type="category",
        **_LAYOUT,
    )
    return fig


def risk_charts(risk: Mapping[str, Any]) -> list[dict[Any, Any]]:
    builders = [
        ("class-sizes", _class_size_chart),
        ("records-at-risk", _records_at_risk_chart),
        ("homogeneity", _homogeneity_chart),
        ("suda-scores", _suda_score_chart),
        ("survey-risk", _survey_risk_chart),
    ]
    charts = []
    for name, build in builders:
        fig = build(risk)
        if fig is not None:
            charts.append(
                {"id": f"chart-{name}", "data_id": f"chart-{name}-data", "figure": _as_data(fig)}
            )
    return charts


def loss_chart(loss_per_qi: Mapping[str, float], measure: str = "") -> dict[Any, Any] | None:
    """Information loss per quasi-identifier (0 = kept as is, 1 = all generalized away)."""
    if not loss_per_qi:
        return None
    fig = go.Figure(
        go.Bar(
            x=list(loss_per_qi),
            y=list(loss_per_qi.values()),
            marker_color="#5b6775",
            hovertemplate="%{x}: %{y:.4f}<extra></extra>",
        )
    )
    fig.update_layout(
        title="Information loss per quasi-identifier",
        xaxis_title="quasi-identifier",
        yaxis_title="information loss",
        **_LAYOUT,
    )
    return {"id": "chart-loss", "data_id": "chart-loss-data", "figure": _as_data(fig)}


def alternatives_chart(alternatives: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The search's alternatives: information loss against prosecutor risk, one point per node
    that satisfies the models (the Pareto front), the optimum marked. Each point carries its
    levels, so a page can turn a click into a plan with those levels."""
    if not alternatives:
        return None

    def text(a: Mapping[str, Any]) -> str:
        levels = ", ".join(f"{q} {lv}" for q, lv in a["levels"].items())
        return f"{levels}; k {a['k']}, {a['suppressed']} suppressed, {a['classes']} classes"

    fig = go.Figure()
    for optimal, name, symbol, color, size in (
        (False, "other nodes that satisfy the models", "circle", "#5b6775", 10),
        (True, "the search's optimum", "star", "#b3261e", 18),
    ):
        pts = [a for a in alternatives if bool(a.get("optimal")) == optimal]
        fig.add_scatter(
            x=[a["information_loss"] for a in pts],
            y=[a["prosecutor_risk"] for a in pts],
            mode="markers",
            name=name,
            marker={"symbol": symbol, "color": color, "size": size},
            text=[text(a) for a in pts],
            customdata=[json.dumps(a["levels"]) for a in pts],
            hovertemplate="loss %{x:.4f}, risk %{y:.4f}<br>%{text}<extra></extra>",
        )
    fig.update_layout(
        title="The search's alternatives: information loss against highest prosecutor risk",
        xaxis_title="information loss",
        yaxis_title="highest prosecutor risk (1/k)",
        **_LAYOUT,
    )
    return {
        "id": "chart-alternatives",
        "data_id": "chart-alternatives-data",
        "figure": _as_data(fig),
    }
