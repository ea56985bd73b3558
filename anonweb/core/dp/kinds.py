"""The built-in DP statistics, one declaration each (see :class:`~anonweb.core.dp.statistic.Statistic`).

The order here is the order forms, the plan schema and ``manage.py dp-release`` list them in.
Importing :mod:`anonweb.core.dp` registers them, so every DP module finds them.
"""

from __future__ import annotations

from anonweb.core.dp import charts, figures
from anonweb.core.dp import mechanisms as m
from anonweb.core.dp.accuracy import (
    mean_accuracy,
    quantile_accuracy,
    range_accuracy,
    value_accuracy,
)
from anonweb.core.dp.statistic import Statistic, register_statistic
from anonweb.core.errors import ParameterError


def _histogram_check(query: m.DPQuery) -> None:
    if query.categories is None and query.delta is None:
        raise ParameterError(
            "a histogram needs declared categories, or a delta for selecting them privately"
        )


COUNT = Statistic(
    kind="count",
    columns=0,
    build=m.build_count,
    run=m.run_count,
    output_columns=lambda q: [m.COUNT_COLUMN],
    accuracy=value_accuracy("the count is"),
    chart=charts.value_chart(m.COUNT_COLUMN),
    figures=figures.value_figures(m.COUNT_COLUMN),
    truth=figures.count_truth,
    cli_help="number of rows (people)",
)
HISTOGRAM = Statistic(
    kind="histogram",
    columns=None,
    parameters=frozenset({"categories", "delta"}),
    check=_histogram_check,
    build=m.build_histogram,
    run=m.run_histogram,
    output_columns=lambda q: [*q.columns, m.COUNT_COLUMN],
    accuracy=value_accuracy("each cell's count is"),
    chart=charts.histogram_chart,
    figures=figures.histogram_figures,
    truth=figures.histogram_truth,
    cli_metavar="COL[,COL]",
    cli_help="counts per category (cell)",
)
SUM = Statistic(
    kind="sum",
    parameters=frozenset({"bounds"}),
    build=m.build_sum,
    run=m.run_sum,
    output_columns=lambda q: ["column", "noisy_sum"],
    accuracy=value_accuracy("the sum is"),
    chart=charts.value_chart("noisy_sum"),
    figures=figures.value_figures("noisy_sum"),
    truth=figures.sum_truth,
    cli_help="sum of a numeric column",
)
MEAN = Statistic(
    kind="mean",
    parameters=frozenset({"bounds"}),
    build=m.build_mean,
    run=m.run_mean,
    output_columns=lambda q: ["column", "noisy_mean", "noisy_sum", "noisy_count"],
    accuracy=mean_accuracy,
    chart=charts.value_chart(
        "noisy_mean",
        "mean_ci95_halfwidth_approx",
        note=" (approximate: noisy sum over noisy count)",
    ),
    figures=figures.value_figures("noisy_mean", "mean_ci95_halfwidth_approx", "approximate"),
    truth=figures.mean_truth,
    cli_help="mean of a numeric column",
)
QUANTILE = Statistic(
    kind="quantile",
    parameters=frozenset({"bounds", "alphas", "bins"}),
    build=m.build_tree,
    run=m.run_quantile,
    output_columns=lambda q: ["alpha", "quantile"],
    accuracy=quantile_accuracy,
    chart=charts.quantile_chart,
    figures=figures.quantile_figures,
    truth=figures.quantile_truth,
    cli_help="quantile of a numeric column",
)
RANGE = Statistic(
    kind="range",
    parameters=frozenset({"bounds", "bins"}),
    build=m.build_tree,
    run=m.run_range,
    output_columns=lambda q: ["bin_lo", "bin_hi", m.COUNT_COLUMN, "noisy_cumulative"],
    accuracy=range_accuracy,
    chart=charts.range_chart,
    figures=figures.range_figures,
    truth=figures.range_truth,
    cli_help="range of a numeric column",
)

BUILTIN = (COUNT, HISTOGRAM, SUM, MEAN, QUANTILE, RANGE)
for _statistic in BUILTIN:
    register_statistic(_statistic)
