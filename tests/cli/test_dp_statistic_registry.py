"""A DP statistic is one declaration: registered from here, with nothing else edited, it is in
the ``dp_release`` plan schema the forms read, runs as a plan step on OpenDP, has its chart, its
utility figures with their value on the source, its accuracy sentence and its ``dp-release``
flag."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np
import pandas as pd
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from anonweb.core.dp import charts, figures
from anonweb.core.dp import mechanisms as m
from anonweb.core.dp.accuracy import value_accuracy
from anonweb.core.dp.charts import dp_charts
from anonweb.core.dp.statistic import (
    Statistic,
    register_statistic,
    statistic_kinds,
    unregister_statistic,
)
from anonweb.core.release.plan import plan_from_dict, step_schemas, validate_plan
from anonweb.core.release.run import apply_plan
from anonweb.core.utility.dp import dp_statistics

TOY = "present"
COLUMN = "noisy_present"


def _build(q: m.DPQuery, d_in: int) -> m.Prepared:
    """How many rows hold a value in the column: OpenDP's count after dropping the missing."""
    dp = m.acc.opendp()
    return m.noisy(q, m.space(float) >> dp.t.then_count(), d_in, integer=True, stats=[TOY])


def _run(prepared: m.Prepared, data: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, Any]]:
    values = m.numeric_values(data, prepared.query.columns[0])
    return pd.DataFrame({COLUMN: [int(prepared.measurement(values))]}), {}


def _truth(q: m.DPQuery, source: pd.DataFrame) -> dict[str, tuple[float, float]]:
    present = pd.to_numeric(source[q.columns[0]], errors="coerce").notna().sum()
    return {TOY: (float(present), 0.0)}


PRESENT = Statistic(
    kind=TOY,
    build=_build,
    run=_run,
    output_columns=lambda q: [COLUMN],
    accuracy=value_accuracy("the number of values present is"),
    chart=charts.value_chart(COLUMN),
    figures=figures.value_figures(COLUMN),
    truth=_truth,
    cli_help="rows holding a value in a column",
)


@pytest.fixture
def present() -> Iterator[Statistic]:
    register_statistic(PRESENT)
    yield PRESENT
    unregister_statistic(TOY)


@pytest.fixture
def table() -> pd.DataFrame:
    rng = np.random.default_rng(3)
    income = rng.normal(50, 10, 300).round(1)
    income[:40] = np.nan
    return pd.DataFrame({"income": income, "region": rng.choice(list("NS"), 300)})


def _plan(params: Mapping[str, Any]):
    return plan_from_dict({"version": 1, "steps": [{"kind": "dp_release", "params": params}]})


def test_a_registered_statistic_is_in_the_plan_schema_and_leaves_with_its_registration(present):
    schema = step_schemas()["steps"]["dp_release"]["schema"]
    assert schema["properties"]["kind"]["enum"][-1] == TOY
    assert TOY in schema["properties"]["columns"]["x-when"]["kind"]
    # it takes no bounds, bins or categories: the form does not offer them for it
    for name in ("bounds", "bins", "categories", "alphas", "delta"):
        assert TOY not in schema["properties"][name]["x-when"]["kind"]
    unregister_statistic(TOY)
    schema = step_schemas()["steps"]["dp_release"]["schema"]
    assert TOY not in schema["properties"]["kind"]["enum"]
    assert TOY not in statistic_kinds()
    register_statistic(PRESENT)


def test_a_registered_statistic_runs_charts_and_has_utility_figures(present, table):
    params = {"kind": TOY, "epsilon": 1.0, "columns": ["income"]}
    plan = _plan(params)
    validate_plan(plan, columns=list(table.columns))
    released, report = apply_plan(table, plan, rng=np.random.default_rng(0), measure_risk=False)
    steps = report.to_dict()["steps"]
    assert list(released.columns) == [COLUMN]
    entry = steps[0]
    assert entry["kind"] == TOY and entry["epsilon_spent"] == pytest.approx(1.0)
    assert entry["accuracy"].startswith("With 95% confidence the number of values present is")
    # Laplace noise of scale 1 on 260: far outside ±40 would mean the column was not read
    assert abs(int(released[COLUMN].iloc[0]) - 260) < 40

    chart = dp_charts(steps, released)
    assert [c["id"] for c in chart] == ["chart-dp-step-1"]
    assert "DP present of income" in json.dumps(chart[0]["figure"])

    (stat,) = dp_statistics(steps, released, source=table, plan=plan)
    assert stat.label == TOY and stat.exact == 260.0
    assert stat.value == float(released[COLUMN].iloc[0])
    assert stat.halfwidth == entry["ci95_halfwidth"]


def test_a_registered_statistic_has_its_dp_release_flag(present, table, tmp_path, capsys):
    path = tmp_path / "t.csv"
    table.to_csv(path, index=False)
    out, report = tmp_path / "out.csv", tmp_path / "report.json"
    call_command(
        "dp-release", str(path), f"--{TOY}", "income", "--epsilon", "1",
        "--out", str(out), "--report", str(report),
    )  # fmt: skip
    assert list(pd.read_csv(out).columns) == [COLUMN]
    assert json.loads(report.read_text())["kind"] == TOY
    # one statistic per release: the flags of every registered statistic exclude each other
    with pytest.raises(CommandError):
        call_command("dp-release", str(path), f"--{TOY}", "income", "--count", "--epsilon", "1")


def test_without_its_registration_the_flag_is_unknown(table, tmp_path):
    path = tmp_path / "t.csv"
    table.to_csv(path, index=False)
    with pytest.raises(CommandError):
        call_command("dp-release", str(path), f"--{TOY}", "income", "--epsilon", "1")
    with pytest.raises(Exception, match="must be one of count, histogram, sum, mean"):
        m.DPQuery.from_params({"kind": TOY, "epsilon": 1.0, "columns": ["income"]})
