"""The utility of a release, checked against hand-worked small tables, the search's own loss and
OpenDP's accuracy."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from anonweb.core import release_utility
from anonweb.core.dp import accounting as acc
from anonweb.core.dp.mechanisms import DPQuery, prepare
from anonweb.core.io.hierarchy_builders import resolve_hierarchies
from anonweb.core.release.plan import plan_from_dict
from anonweb.core.release.run import apply_plan
from anonweb.core.search.whatif import WhatIfTable
from anonweb.core.utility.measures import OTHER, column_utility, total_variation


def test_categorical_column_hand_worked():
    before = pd.Series(["a", "a", "b", "c"], name="x")
    after = pd.Series(["a", "*", "b", "b"], name="x")
    cu = column_utility(before, after, aligned=before)
    d = cu.to_dict()
    assert d["kind"] == "categorical"
    assert d["original"]["labels"] == ["a", "b", "c"] and d["original"]["counts"] == [2, 1, 1]
    assert d["released"]["labels"] == ["b", "*", "a"] and d["released"]["counts"] == [2, 1, 1]
    # ½(|2/4 − 1/4| + |1/4 − 2/4| + |1/4 − 0| + |0 − 1/4|) = ½
    assert d["tvd"] == pytest.approx(0.5)
    assert d["suppressed"] == 1 and d["suppressed_share"] == 0.25
    assert d["changed"] == 2 and d["changed_share"] == 0.5  # a→*, c→b


def test_top_categories_then_other_and_missing_counted():
    before = pd.Series(list("aaaabbbccd") + [None, None], name="x")
    cu = column_utility(before, before, top=2)
    orig = cu.to_dict()["original"]
    assert orig["labels"] == ["a", "b", OTHER] and orig["counts"] == [4, 3, 5]
    assert orig["missing"] == 2 and orig["distinct"] == 5 and orig["total"] == 12
    assert cu.tvd == 0.0 and cu.changed is None


def test_numeric_column_shared_bins_hand_worked():
    before = pd.Series([1, 2, 3, 4], name="n")
    after = pd.Series([1.0, 2.0, 3.0, 10.0], name="n")
    d = column_utility(before, after, aligned=before, bins=3).to_dict()
    assert d["kind"] == "numeric"
    # whole numbers 1..10 in at most 3 bins: width ⌈10 / 3⌉ = 4
    assert d["original"]["edges"] == [1.0, 5.0, 9.0, 13.0] == d["released"]["edges"]
    assert d["original"]["labels"] == ["[1, 5[", "[5, 9[", "[9, 13]"]
    assert d["original"]["counts"] == [4, 0, 0] and d["released"]["counts"] == [3, 0, 1]
    assert d["tvd"] == pytest.approx(0.25)  # ½(¼ + 0 + ¼)
    assert d["mean"] == {"original": 2.5, "released": 4.0} and d["mean_shift"] == 1.5
    # population standard deviations: √1.25 and √12.5
    assert d["std"]["original"] == pytest.approx(math.sqrt(1.25))
    assert d["std"]["released"] == pytest.approx(math.sqrt(12.5))
    assert d["changed"] == 1  # 4 → 10; 1 and 1.0 read the same


def test_generalized_numbers_are_released_categories():
    before = pd.Series([23, 27, 35, 61], name="age")
    after = pd.Series(["[20, 30[", "[20, 30[", "[30, 40[", "*"], name="age")
    d = column_utility(before, after, bins=2).to_dict()
    assert d["kind"] == "categorical" and d["tvd"] is None
    assert d["original"]["kind"] == "histogram" and d["original"]["counts"] == [3, 1]
    # intervals in the order of their values, then the suppressed cells
    assert d["released"]["labels"] == ["[20, 30[", "[30, 40[", "*"]
    assert d["released"]["counts"] == [2, 1, 1]
    assert d["suppressed"] == 1


def test_fractional_numbers_get_equal_bins_over_their_range():
    before = pd.Series([0.5, 1.0, 2.5], name="x")
    d = column_utility(before, before * 2, bins=2).to_dict()  # 1, 2, 5
    assert d["original"]["edges"] == [0.5, 2.75, 5.0]
    assert d["original"]["counts"] == [3, 0] and d["released"]["counts"] == [2, 1]
    assert d["original"]["labels"] == ["[0.5, 2.75[", "[2.75, 5]"]
    assert d["tvd"] == pytest.approx(1 / 3)


def test_total_variation_normalises_and_handles_disjoint_supports():
    assert total_variation({"a": 2}, {"b": 5}) == 1.0
    assert total_variation({"a": 1, "b": 1}, {"a": 2, "b": 2}) == 0.0


def test_input_frames_are_not_modified():
    src = pd.DataFrame({"x": ["a", "b"], "n": [1, 2]})
    rel = pd.DataFrame({"x": ["*", "b"], "n": [1, 5]})
    copies = src.copy(), rel.copy()
    release_utility(src, rel, report={"steps": []}, source_rows=[0, 1])
    pd.testing.assert_frame_equal(src, copies[0])
    pd.testing.assert_frame_equal(rel, copies[1])


def _tiny():
    df = pd.DataFrame({"x": ["a", "b", "c", "c"], "sex": ["F", "M", "F", "M"]})
    specs = {
        "x": {"rows": [["a", "ab", "*"], ["b", "ab", "*"], ["c", "c", "*"]]},
        "sex": {"rows": [["F", "*"], ["M", "*"]]},
    }
    return df, specs


def test_fixed_levels_loss_hand_worked():
    df, specs = _tiny()
    plan = plan_from_dict(
        {
            "quasi_identifiers": ["x", "sex"],
            "hierarchies": specs,
            "steps": [{"kind": "generalize", "params": {"levels": {"x": 1, "sex": 1}}}],
        }
    )
    out, report = apply_plan(df, plan, rng=np.random.default_rng(0), measure_risk=False)
    u = release_utility(
        df,
        out,
        report=report.to_dict(),
        plan=plan,
        hierarchies=resolve_hierarchies(specs, df),
        source_rows=np.arange(4),
    ).to_dict()
    loss = u["information_loss"]
    # ARX's Loss: x at level 1 covers 2, 2, 1, 1 of 3 leaves: (6 − 4) / (4 · 2) = ¼;
    # sex at its root covers both leaves: (8 − 4) / (4 · 1) = 1
    assert loss["per_qi"] == {"x": 0.25, "sex": 1.0}
    assert loss["aggregate"] == "geometric"
    assert loss["aggregate_value"] == pytest.approx(math.sqrt(1.25 * 2) - 1)
    by_col = {c["column"]: c for c in u["columns"]}
    assert by_col["x"]["information_loss"] == 0.25 and by_col["x"]["quasi_identifier"]
    assert by_col["x"]["changed"] == 2  # a, b → ab


@pytest.mark.parametrize("aggregate", [None, "arithmetic", "sum", "max"])
def test_search_loss_is_the_search_figure_and_its_aggregate(fixtures_dir, aggregate):
    df = pd.read_csv(fixtures_dir / "test2.csv", sep=";")
    specs = {
        "ZIPCode": {"path": str(fixtures_dir / "test2_hierarchy_ZIPCode.csv")},
        "Age": {"path": str(fixtures_dir / "test2_hierarchy_Age.csv")},
    }
    params = {"k": 3, "suppression": 0.2} | ({"aggregate": aggregate} if aggregate else {})
    plan = plan_from_dict(
        {
            "quasi_identifiers": ["ZIPCode", "Age"],
            "sensitive": ["Disease"],
            "hierarchies": specs,
            "steps": [{"kind": "optimal_generalization", "params": params}],
        }
    )
    out, report = apply_plan(df, plan, rng=np.random.default_rng(0))
    step = report.steps[0]
    u = release_utility(df, out, report=report.to_dict(), plan=plan)
    loss = u.loss
    assert loss is not None and loss.source == "search"
    assert loss.aggregate_value == pytest.approx(step["information_loss"], abs=1e-12)
    # the same node scored by the what-if table (the search's metric objects) agrees
    node = WhatIfTable(
        df,
        quasi_identifiers=["ZIPCode", "Age"],
        hierarchies=resolve_hierarchies(specs, df),
        aggregate=aggregate,
    ).evaluate(step["levels"], suppression=0.2, k=3)
    assert loss.per_qi == pytest.approx(node.loss_per_qi)
    assert u.records_suppressed == step["suppressed"]


def _dp_plan(params):
    return plan_from_dict({"steps": [{"kind": "dp_release", "params": params}]})


def test_dp_count_interval_is_opendps():
    df = pd.DataFrame({"x": ["a"] * 70 + ["b"] * 30})
    plan = _dp_plan({"kind": "count", "epsilon": 0.5})
    out, report = apply_plan(df, plan, rng=np.random.default_rng(1))
    u = release_utility(df, out, report=report.to_dict(), plan=plan)
    assert u.columns == ()  # counts are not rows: no column comparison
    (stat,) = u.dp
    scale = report.steps[0]["noise"]["scale"]
    dp = acc.opendp()
    expected = dp.discrete_laplacian_scale_to_accuracy(scale=scale, alpha=0.05)
    assert stat.halfwidth == pytest.approx(expected)
    assert stat.value == out["noisy_count"].iloc[0] and stat.exact == 100.0
    d = stat.to_dict()
    assert d["low"] == stat.value - expected and d["interval"] == "exact"


def test_dp_histogram_and_sum_with_exact_values():
    df = pd.DataFrame({"x": ["a"] * 7 + ["b"] * 3, "v": [1.0, 2, 3, 4, 5, 6, 7, 8, 9, 50]})
    plan = plan_from_dict(
        {
            "steps": [
                {
                    "kind": "dp_release",
                    "params": {
                        "kind": "histogram",
                        "epsilon": 1.0,
                        "columns": ["x"],
                        "categories": {"x": ["a", "b", "c"]},
                        "count_missing": False,
                    },
                },
                {
                    "kind": "dp_release",
                    "params": {"kind": "sum", "epsilon": 1, "columns": ["v"], "bounds": [0, 10]},
                },
            ]
        }
    )
    out, report = apply_plan(df, plan, rng=np.random.default_rng(2))
    u = release_utility(df, out, report=report.to_dict(), plan=plan)
    hist = [s for s in u.dp if s.kind == "histogram"]
    assert [s.label for s in hist] == ["a", "b", "c"]
    assert [s.exact for s in hist] == [7.0, 3.0, 0.0]
    (total,) = [s for s in u.dp if s.kind == "sum"]
    # step 2 reads what step 1 read, but only the first step's exact value is stated
    assert total.exact is None
    scale = report.steps[1]["noise"]["scale"]
    dp = acc.opendp()
    assert total.halfwidth == pytest.approx(dp.laplacian_scale_to_accuracy(scale=scale, alpha=0.05))


def test_dp_sum_exact_value_is_clamped():
    df = pd.DataFrame({"v": [1.0, 2, 3, 50, None]})
    plan = _dp_plan({"kind": "sum", "epsilon": 1, "columns": ["v"], "bounds": [0, 10]})
    out, report = apply_plan(df, plan, rng=np.random.default_rng(3))
    (stat,) = release_utility(df, out, report=report.to_dict(), plan=plan).dp
    assert stat.exact == 16.0  # 1 + 2 + 3 + 10 (clamped); the blank drops out


@pytest.mark.slow
def test_repeated_releases_land_in_the_interval_about_95_percent_of_the_time():
    """The interval shown is OpenDP's: repeated runs of the measurement a release runs cover the
    true count about 95% of the time (discrete noise: at least 95%)."""
    q = DPQuery.from_params({"kind": "count", "epsilon": 0.3})
    prepared = prepare(q)
    half = prepared.ci95["count"]
    data = [""] * 200
    runs = 2000
    inside = sum(abs(int(prepared.measurement(data)) - 200) <= half for _ in range(runs))
    assert 0.93 <= inside / runs <= 0.985


def test_local_dp_estimates_and_synthetic_records():
    rng = np.random.default_rng(4)
    df = pd.DataFrame({"city": rng.choice(["A", "B"], 200), "age": rng.integers(18, 90, 200)})
    plan = plan_from_dict(
        {
            "steps": [
                {
                    "kind": "ldp_randomized_response",
                    "params": {"column": "city", "epsilon": 1, "categories": ["A", "B"]},
                }
            ]
        }
    )
    out, report = apply_plan(df, plan, rng=rng)
    u = release_utility(df, out, report=report.to_dict(), plan=plan, source_rows=np.arange(200))
    entry = report.steps[0]
    assert [s.label for s in u.dp] == list(entry["estimated_counts"])
    halves = entry["estimate_ci95_halfwidth"]
    assert all(s.halfwidth == pytest.approx(halves[s.label]) for s in u.dp)
    assert all(s.interval == "approximate" for s in u.dp)
    city = next(c for c in u.columns if c.column == "city")
    assert city.changed == int((df["city"] != out["city"]).sum())

    synthetic = plan_from_dict(
        {
            "steps": [
                {
                    "kind": "dp_synthetic",
                    "params": {
                        "columns": ["city", "age"],
                        "epsilon": 1.0,
                        "categories": {"city": ["A", "B"]},
                        "bounds": {"age": [0, 100]},
                        "bins": 5,
                    },
                }
            ]
        }
    )
    out, report = apply_plan(df, synthetic, rng=rng)
    u = release_utility(df, out, report=report.to_dict(), plan=synthetic)
    # synthetic records are records: their distributions are compared, no cell is matched
    assert {c.column for c in u.columns} == {"city", "age"} and not u.matched
    assert all(c.changed is None for c in u.columns)
