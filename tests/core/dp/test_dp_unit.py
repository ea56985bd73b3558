"""The privacy unit: who a DP guarantee protects, what contribution bounding drops, and an
accuracy statement that stays true when it drops rows (issue 19.2).

With ``name`` (not unique per person) as the unit, bounding to one row per name silently dropped
about 71 of 3,000 rows and the released counts fell far outside the stated ±3.38. The internal
report now counts the rows dropped, and the interval against the source's row counts widens by
the rows each cell can lose, so it covers the truth under either unit."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from anonweb.core.dp.accounting import contributions
from anonweb.core.release.plan import plan_from_dict
from anonweb.core.release.report import published_report
from anonweb.core.release.run import apply_plan
from anonweb.core.utility.dp import dp_statistics

ROWS = 3000


@pytest.fixture(scope="module")
def people() -> pd.DataFrame:
    """3,000 rows: one person (ssn 1000) has three rows; names repeat across people."""
    rng = np.random.default_rng(19)
    ssn = np.arange(1000, 1000 + ROWS)
    ssn[1:3] = 1000  # the same person's second and third visit
    names = np.array([f"name{i}" for i in range(2929)])
    name = np.concatenate([names, rng.choice(names, ROWS - len(names))])
    rng.shuffle(name)
    return pd.DataFrame(
        {"ssn": ssn, "name": name, "sex": rng.choice(["F", "M"], ROWS, p=[0.69, 0.31])}
    )


def _plan(unit: str) -> dict:
    params = {
        "kind": "histogram",
        "epsilon": 1.0,
        "columns": ["sex"],
        "categories": {"sex": ["F", "M"]},
        "count_missing": False,
        "identifier": unit,
        "max_contributions": 1,
    }
    return {"version": 1, "steps": [{"kind": "dp_release", "params": params}]}


def test_rows_per_person_and_rows_dropped(people):
    by_ssn = contributions(people["ssn"], bound=1)
    assert (by_ssn.persons, by_ssn.max_rows, by_ssn.dropped) == (ROWS - 2, 3, 2)
    assert dict(by_ssn.distribution) == {1: ROWS - 3, 3: 1}
    by_name = contributions(people["name"], bound=1)
    assert by_name.persons == 2929 and by_name.dropped == ROWS - 2929
    assert "71 row(s)" in by_name.statement() and "covers the noise only" in by_name.statement()


@pytest.mark.parametrize("unit", ["ssn", "name"])
def test_the_internal_report_counts_the_rows_dropped_and_the_published_one_does_not(people, unit):
    plan = plan_from_dict(_plan(unit))
    _, report = apply_plan(people, plan, rng=np.random.default_rng(0), measure_risk=False)
    (entry,) = report.steps
    bounding = entry["contribution_bounding"]
    assert bounding["rows_dropped"] == contributions(people[unit]).dropped
    assert bounding["max_rows_per_person"] == (
        3 if unit == "ssn" else people[unit].value_counts().max()
    )
    assert "(the noise only: rows beyond 1 per person are dropped" in entry["accuracy"]
    (public,) = published_report(report.to_dict(), plan)["steps"]
    assert "contribution_bounding" not in public


@pytest.mark.slow
@pytest.mark.parametrize("unit", ["ssn", "name"])
def test_the_reported_interval_covers_the_source_counts_in_95_percent_of_runs(people, unit):
    plan = plan_from_dict(_plan(unit))
    rng = np.random.default_rng(1)
    truth: dict[str, tuple[float, float]] = {}
    covered = checked = 0
    for run in range(400):
        table, report = apply_plan(people, plan, rng=rng, measure_risk=False)
        source = people if run == 0 else None
        for stat in dp_statistics(report.to_dict()["steps"], table, source=source, plan=plan):
            if run == 0:
                truth[stat.label] = (stat.exact, stat.shortfall)
            exact, shortfall = truth[stat.label]
            low, high = stat.value - stat.halfwidth, stat.value + stat.halfwidth + shortfall
            covered += low <= exact <= high
            checked += 1
    assert truth["F"][0] + truth["M"][0] == ROWS
    assert covered / checked >= 0.95, (covered, checked, truth)
