"""DP outputs as DP outputs: each released statistic as a plotly chart with its 95% interval.

The figures come from the released table (noisy values) and the step's own report (the interval
half-widths, computed from the noise scale without data), so a chart shows nothing that the
release does not. Pure: plotly's figure objects only. Each chart is a dict with an ``id``, a
``data_id`` for the embedded JSON and the ``figure`` (data + layout), like the risk charts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from anonweb.core.assessment.charts import _LAYOUT, _as_data, chart_text
from anonweb.core.dp.mechanisms import COUNT_COLUMN
from anonweb.core.dp.statistic import find_statistic
from anonweb.core.dp.synthetic_quality import quality_chart
from anonweb.core.numbers import for_people, probability
from anonweb.core.release.steps import STATISTIC_COLUMN

MAX_BARS = 200
COLOR = "#2f5d8a"


def _interval(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if out == out else None


def statistic_rows(table: pd.DataFrame, step: int) -> pd.DataFrame:
    """The rows of a released table that step ``step`` measured (several stacked measurements
    are labelled ``"<step>: ..."`` in the ``statistic`` column)."""
    if STATISTIC_COLUMN not in table.columns:
        return table
    labels = table[STATISTIC_COLUMN].astype(str)
    part = table[labels.str.startswith(f"{step}: ")]
    return part.drop(columns=[STATISTIC_COLUMN]).dropna(axis=1, how="all")


def _title(entry: Mapping[str, Any], what: str) -> str:
    columns = chart_text(", ".join(map(str, entry.get("columns") or [])))
    eps = entry.get("epsilon_spent")
    cost = f"ε = {for_people(eps)}" if isinstance(eps, (int, float)) else ""
    if entry.get("delta_spent"):
        cost += f", δ = {probability(entry['delta_spent'])}"
    head = f"Step {entry.get('step')}: DP {entry.get('kind')}" + (
        f" of {columns}" if columns else ""
    )
    return f"{head} ({cost})<br><sub>{what}</sub>"


def _bars(
    x: Sequence[str], y: Sequence[float], half: float | None, *, name: str, hover: str
) -> go.Bar:
    return go.Bar(
        x=list(x),
        y=list(y),
        name=name,
        marker_color=COLOR,
        error_y={"type": "constant", "value": half or 0.0, "visible": half is not None},
        hovertemplate=hover + "<extra></extra>",
    )


def histogram_chart(entry: Mapping[str, Any], part: pd.DataFrame) -> go.Figure | None:
    columns = [str(c) for c in entry.get("columns") or []]
    if not columns:
        return None
    if part.empty or COUNT_COLUMN not in part.columns or not set(columns) <= set(part.columns):
        part = pd.DataFrame({**{c: [] for c in columns}, COUNT_COLUMN: []})  # nothing released
    part = part.head(MAX_BARS)
    x = part[columns].astype(str).agg(" · ".join, axis=1) if len(part) else []
    half = _interval(entry.get("ci95_halfwidth"))
    what = (
        f"noisy counts; bars show the 95% interval ±{for_people(half)}" if half else "noisy counts"
    )
    if entry.get("suppressed_keys"):
        what += f"; {entry['suppressed_keys']}"
    fig = go.Figure(
        _bars(x, part[COUNT_COLUMN].astype(float), half, name="noisy count", hover="%{x}: %{y}")
    )
    fig.update_layout(title=_title(entry, what), xaxis_type="category", yaxis_title="count")
    return fig


def range_chart(entry: Mapping[str, Any], part: pd.DataFrame) -> go.Figure | None:
    if not {"bin_lo", "bin_hi", COUNT_COLUMN} <= set(part.columns):
        return None
    last = len(part) - 1
    x = [
        f"[{lo:g}, {hi:g}{']' if i == last else ')'}"
        for i, (lo, hi) in enumerate(zip(part["bin_lo"], part["bin_hi"]))
    ]
    half = _interval(entry.get("ci95_halfwidth"))
    bounds = entry.get("bounds") or []
    what = f"noisy counts over public bins between the declared bounds {bounds}"
    if half:
        what += f"; bars show the 95% interval ±{for_people(half)}"
    fig = go.Figure(
        _bars(x, part[COUNT_COLUMN].astype(float), half, name="noisy count", hover="%{x}: %{y:.1f}")
    )
    fig.update_layout(title=_title(entry, what), xaxis_type="category", yaxis_title="count")
    return fig


def value_chart(
    column: str, key: str = "ci95_halfwidth", *, note: str = ""
) -> Callable[[Mapping[str, Any], pd.DataFrame], go.Figure | None]:
    """The chart of a statistic released as one noisy value: the value in ``column`` of the
    released table, its 95% half-width under ``key`` of the report entry; ``note`` says how the
    interval is approximate, when it is."""

    def chart(entry: Mapping[str, Any], part: pd.DataFrame) -> go.Figure | None:
        return _single(entry, part, column=column, key=key, note=note)

    return chart


def _single(
    entry: Mapping[str, Any], part: pd.DataFrame, *, column: str, key: str, note: str
) -> go.Figure | None:
    kind = str(entry.get("kind"))
    if column not in part.columns or part.empty:
        return None
    value = float(part[column].iloc[0])
    half = _interval(entry.get(key))
    what = f"noisy {kind}" + (f" with its 95% interval ±{for_people(half)}" if half else "")
    what += note
    fig = go.Figure(_bars([kind], [value], half, name=f"noisy {kind}", hover="%{y:.4g}"))
    fig.update_layout(title=_title(entry, what), xaxis_type="category")
    return fig


def quantile_chart(entry: Mapping[str, Any], part: pd.DataFrame) -> go.Figure | None:
    if not {"alpha", "quantile"} <= set(part.columns):
        return None
    values = part["quantile"].astype(float).tolist()
    intervals = list(entry.get("quantile_ci95") or [])
    shown = len(intervals) == len(values)
    what = "noisy quantiles read off noisy binned counts"
    if shown:
        what += "; bars show each one's 95% interval"
    fig = go.Figure(
        go.Scatter(
            x=[f"{a:g}" for a in part["alpha"]],
            y=values,
            mode="markers",
            marker={"color": COLOR, "size": 10},
            error_y={
                "type": "data",
                "symmetric": False,
                "array": [float(hi) - v for v, (_, hi) in zip(values, intervals)] if shown else [],
                "arrayminus": [v - float(lo) for v, (lo, _) in zip(values, intervals)]
                if shown
                else [],
                "visible": shown,
            },
            hovertemplate="quantile %{x}: %{y:.4g}<extra></extra>",
        )
    )
    fig.update_layout(title=_title(entry, what), xaxis_type="category", xaxis_title="level")
    return fig


def _local(entry: Mapping[str, Any]) -> go.Figure | None:
    estimated, sd = entry.get("estimated_counts"), _interval(entry.get("estimate_sd"))
    if not isinstance(estimated, Mapping) or not estimated:
        return None
    per_category = entry.get("estimate_ci95_halfwidth")
    labels = [str(k) for k in estimated]
    if isinstance(per_category, Mapping):
        halves = [_interval(per_category.get(k)) or 0.0 for k in estimated]
        what = "debiased counts estimated from the randomized column; bars show each one's 95% interval"
        error = {"type": "data", "array": halves, "visible": True}
    else:  # a release made before: the worst case over categories
        half = 1.96 * sd if sd is not None else None
        what = "debiased counts estimated from the randomized column"
        if half:
            what += f"; bars show the 95% interval ±{for_people(half)} (worst case)"
        error = {"type": "constant", "value": half or 0.0, "visible": half is not None}
    fig = go.Figure(
        go.Bar(
            x=labels,
            y=[float(v) for v in estimated.values()],
            name="estimated count",
            marker_color=COLOR,
            error_y=error,
            hovertemplate="%{x}: %{y:.1f}<extra></extra>",
        )
    )
    title = (
        f"Step {entry.get('step')}: local DP on {chart_text(str(entry.get('column')))} "
        f"(ε = {for_people(entry.get('epsilon_spent', 0))} per record)<br><sub>{what}</sub>"
    )
    fig.update_layout(title=title, xaxis_type="category", yaxis_title="count")
    return fig


def needs_table(steps: Sequence[Mapping[str, Any]]) -> bool:
    """Whether :func:`dp_charts` reads the released table (a central DP statistic is there)."""
    return any(find_statistic(e.get("kind")) is not None and "noise" in e for e in steps)


def dp_charts(
    steps: Sequence[Mapping[str, Any]], table: pd.DataFrame | None
) -> list[dict[Any, Any]]:
    """One chart per DP statistic of a release: ``steps`` are its report's step entries,
    ``table`` its released table (several measurements stacked under ``statistic``)."""
    charts = []
    for entry in steps:
        fig = None
        if entry.get("kind") == "ldp_randomized_response":
            fig = _local(entry)
        elif entry.get("kind") == "dp_synthetic":
            fig = quality_chart(entry)
        elif "noise" in entry and table is not None:
            statistic = find_statistic(entry.get("kind"))
            if statistic is not None and statistic.chart is not None:
                fig = statistic.chart(entry, statistic_rows(table, int(entry.get("step", 0))))
        if fig is None:
            continue
        fig.update_layout(**_LAYOUT, showlegend=entry.get("kind") == "dp_synthetic")
        fig.update_layout(margin={"l": 60, "r": 20, "t": 80, "b": 60})
        name = f"dp-step-{entry.get('step')}"
        charts.append(
            {"id": f"chart-{name}", "data_id": f"chart-{name}-data", "figure": _as_data(fig)}
        )
    return charts
