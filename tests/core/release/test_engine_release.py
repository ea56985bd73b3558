"""A release made out of core (:func:`make_engine_release`) has the figures of the one made in
memory (:func:`make_release`) on the same table: the search's node, suppression, k, classes,
information loss, model checks, the risk before and after, and the policy's findings; its rows
are the same multiset. Plans an engine cannot run are refused with the reason, and a table past
the in-memory limit is refused at submission by the one plan validator."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anonweb.core.engine.duckdb_engine import DuckDBEngine
from anonweb.core.engine.pandas_engine import PandasEngine
from anonweb.core.errors import ParameterError, PlanError
from anonweb.core.release.engine_release import make_engine_release
from anonweb.core.release.make import make_release
from anonweb.core.release.plan import plan_from_dict, validate_plan

HIERARCHIES = {
    "age": {"rows": [[a, f"{a // 10 * 10}-{a // 10 * 10 + 9}", "*"] for a in range(18, 80)]},
    "zip": {"rows": [[z, z[:4] + "*", z[:3] + "**", "*"] for z in ("47677", "47602", "47678")]},
    "sex": {"rows": [["F", "*"], ["M", "*"]]},
}
FIGURES = ("levels", "suppressed", "k", "classes", "information_loss", "model_checks")


def _table(seed: int, n: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "name": [f"person {i}" for i in range(n)],
            "age": rng.integers(18, 80, n),
            "zip": rng.choice(["47677", "47602", "47678"], n),
            "sex": rng.choice(["F", "M"], n),
            "disease": rng.choice(["flu", "ulcer", "cancer"], n, p=[0.5, 0.3, 0.2]),
        }
    )


def _plan(search: dict) -> dict:
    return {
        "quasi_identifiers": ["age", "zip", "sex"],
        "sensitive": ["disease"],
        "hierarchies": HIERARCHIES,
        "steps": [
            {"kind": "drop", "params": {"columns": ["name"]}},
            {"kind": "optimal_generalization", "params": search},
        ],
    }


TAGS = {"age": "quasi_identifier", "zip": "quasi_identifier", "sex": "quasi_identifier"}
TAGS |= {"disease": "sensitive", "name": "identifier"}


DISCLOSING_LIMIT = 20  # assess_risk's disclosing_limit


def close(a, b, path="") -> None:
    """Equal, numbers to 1e-9; a profile's disclosing classes as a set (their order among
    classes of equal size follows the class numbering)."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert set(a) == set(b), (path, sorted(set(a) ^ set(b)))
        for key in a:
            x, y = a[key], b[key]
            if key == "disclosing_classes" and len(x) >= DISCLOSING_LIMIT:
                # the list is capped, largest first: among classes of equal size, which ones
                # make the cut follows the class numbering
                x, y = (sorted(c["size"] for c in v) for v in (x, y))
            elif key == "disclosing_classes":
                x, y = (sorted(json.dumps(c, sort_keys=True) for c in v) for v in (x, y))
            close(x, y, f"{path}.{key}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            close(x, y, f"{path}[{i}]")
    elif isinstance(a, float) or isinstance(b, float):
        assert a is not None and b is not None, (path, a, b)
        assert math.isclose(a, b, rel_tol=0, abs_tol=1e-9), (path, a, b)
    else:
        assert a == b, (path, a, b)


def rows(frame: pd.DataFrame) -> list[tuple]:
    return sorted(map(tuple, frame.astype(str).to_numpy().tolist()))


def _both(df: pd.DataFrame, plan_dict: dict, engine, tmp_path, seed: int = 3):
    plan = plan_from_dict(plan_dict)
    memory = make_release(df, plan, rng=np.random.default_rng(seed), tags=TAGS)
    source = tmp_path / "source.parquet"
    df.to_parquet(source, index=False)
    out = tmp_path / "release.parquet"
    made = make_engine_release(
        source, plan, engine=engine, out=out, rng=np.random.default_rng(seed), tags=TAGS
    )
    return memory, made, pd.read_parquet(out)


def _compare(memory, made, written) -> None:
    search = next(s for s in memory.report["steps"] if s["kind"] == "optimal_generalization")
    ours = next(s for s in made.report["steps"] if s["kind"] == "optimal_generalization")
    for key in FIGURES:
        close(search[key], ours[key], key)
    close(memory.report["risk_before"], made.report["risk_before"], "risk_before")
    close(memory.report["risk_after"], made.report["risk_after"], "risk_after")
    assert (memory.report["rows_in"], memory.report["rows_out"]) == (
        made.report["rows_in"],
        made.report["rows_out"],
    )
    close(memory.gate.to_dict(), made.gate.to_dict(), "gate")
    assert list(written.columns) == list(memory.frame.columns)
    assert rows(written) == rows(memory.frame)
    assert made.rows == len(memory.frame)
    assert made.published["row_order"] == memory.published["row_order"] == "shuffled"


@pytest.mark.parametrize(
    "search",
    [
        {"k": 5, "suppression": 0.05, "models": [{"model": "distinct_l", "sensitive": "disease", "l": 2}]},
        {"k": 40, "suppression": 0.1, "models": [{"model": "t_closeness", "sensitive": "disease", "t": 0.2}]},
        {"k": 3, "suppression": 0.02, "models": [{"model": "recursive_cl", "sensitive": "disease", "c": 3, "l": 2}]},
        {"k": 10, "suppression": 0.2, "metric": "entropy"},
    ],
    ids=["distinct-l", "t-closeness", "recursive-cl", "entropy"],
)  # fmt: skip
def test_duckdb_release_has_the_in_memory_figures(tmp_path, search):
    df = _table(1, 1500)
    engine = DuckDBEngine(memory_limit="200MB")
    try:
        memory, made, written = _both(df, _plan(search), engine, tmp_path)
    finally:
        engine.close()
    _compare(memory, made, written)
    assert made.engine == "duckdb" and made.report["engine"] == "duckdb"
    assert made.published["engine"] == "duckdb"
    # the suppressed records read * in every quasi-identifier, and there are as many as the
    # search reported
    ours = next(s for s in made.report["steps"] if s["kind"] == "optimal_generalization")
    star = (written[["age", "zip", "sex"]] == "*").all(axis=1)
    assert int(star.sum()) == ours["suppressed"]
    assert "name" not in written.columns


def test_a_table_wide_model_suppresses_the_same_records_on_duckdb(tmp_path):
    # average risk 0.5 at the bottom node: 10 of its many single records go, chosen among
    # classes of one size and one loss by their values (a histogram has no record order), so
    # the engine writes the very rows the table in memory gives
    df = _table(1, 600)
    search = {"k": 1, "suppression": 0.1, "models": [{"model": "average_risk", "threshold": 0.5}]}
    engine = DuckDBEngine(memory_limit="200MB")
    try:
        memory, made, written = _both(df, _plan(search), engine, tmp_path)
    finally:
        engine.close()
    _compare(memory, made, written)
    ours = next(s for s in made.report["steps"] if s["kind"] == "optimal_generalization")
    assert ours["levels"] == {"age": 0, "zip": 0, "sex": 0} and ours["suppressed"] == 10
    check = next(c for c in ours["model_checks"] if c["model"]["model"] == "average_risk")
    assert check["satisfied"] and check["value"] == pytest.approx(ours["classes"] / 590)
    star = (written[["age", "zip", "sex"]] == "*").all(axis=1)
    assert int(star.sum()) == 10


def test_the_risk_after_is_measured_on_the_written_table(tmp_path):
    """k after, by hand: the released classes (suppressed records left out) counted from the
    file the engine wrote."""
    df = _table(2, 800)
    engine = DuckDBEngine()
    try:
        _, made, written = _both(df, _plan({"k": 8, "suppression": 0.05}), engine, tmp_path)
    finally:
        engine.close()
    kept = written[~(written[["age", "zip", "sex"]] == "*").all(axis=1)]
    sizes = kept.groupby(["age", "zip", "sex"], dropna=False).size()
    assert made.report["risk_after"]["k"] == int(sizes.min()) >= 8
    assert made.report["risk_after"]["classes"] == len(sizes)
    assert made.report["risk_after"]["suppressed"] == len(written) - len(kept)


def test_rows_are_shuffled_unless_order_is_kept(tmp_path):
    df = _table(4, 300).drop(columns=["name"])
    plan = plan_from_dict(
        {
            "quasi_identifiers": ["age"],
            "hierarchies": {"age": HIERARCHIES["age"]},
            "steps": [{"kind": "optimal_generalization", "params": {"k": 1}}],
        }
    )
    source = tmp_path / "s.parquet"
    df.to_parquet(source, index=False)
    engine = PandasEngine()
    for keep, expected in ((True, "source order (kept on request)"), (False, "shuffled")):
        out = tmp_path / f"{keep}.parquet"
        made = make_engine_release(
            source,
            plan,
            engine=engine,
            out=out,
            rng=np.random.default_rng(0),
            tags={},
            keep_order=keep,
        )
        assert made.published["row_order"] == expected
        same = pd.read_parquet(out)["age"].astype(int).tolist() == df["age"].tolist()
        assert same is keep


def test_a_released_column_the_engine_does_not_read_blocks_the_release(tmp_path):
    df = _table(5, 400)
    plan = _plan({"k": 5, "suppression": 0.05})
    plan["steps"] = plan["steps"][1:]  # the identifier is not dropped
    engine = DuckDBEngine()
    try:
        memory, made, _ = _both(df, plan, engine, tmp_path)
    finally:
        engine.close()
    codes = {f.code for f in made.gate.blocking}
    assert "column_unchecked" in codes
    assert "identifier_released" in {f.code for f in memory.gate.blocking}


def test_a_step_an_engine_cannot_run_is_refused_with_the_reason(tmp_path):
    df = _table(6, 200)
    source = tmp_path / "s.parquet"
    df.to_parquet(source, index=False)
    plan = plan_from_dict(
        {
            "quasi_identifiers": ["age"],
            "steps": [{"kind": "mondrian", "params": {"k": 5, "columns": ["age"]}}],
        }
    )
    engine = DuckDBEngine()
    try:
        with pytest.raises(ParameterError, match=r"step 1 \(mondrian\) runs in memory only"):
            make_engine_release(
                source, plan, engine=engine, out=tmp_path / "o.parquet",
                rng=np.random.default_rng(0), tags={},
            )  # fmt: skip
        local = _plan({"k": 5, "local_suppression": {"importance": {}}})
        with pytest.raises(ParameterError, match="optimal_generalization.*in memory only"):
            make_engine_release(
                source, plan_from_dict(local), engine=engine, out=tmp_path / "o.parquet",
                rng=np.random.default_rng(0), tags={},
            )  # fmt: skip
    finally:
        engine.close()
    assert not (tmp_path / "o.parquet").exists()


def test_the_validator_refuses_an_in_memory_step_past_the_limit():
    plan = plan_from_dict(
        {
            "quasi_identifiers": ["age"],
            "hierarchies": {"age": HIERARCHIES["age"]},
            "steps": [
                {"kind": "drop", "params": {"columns": ["name"]}},
                {"kind": "mondrian", "params": {"k": 5, "columns": ["age"]}},
            ],
        }
    )
    with pytest.raises(PlanError) as refused:
        validate_plan(plan, ["age", "name"], rows=2_000_000, memory_rows=1_000_000)
    assert refused.value.errors == [
        "step 2 (mondrian) runs in memory only (its output for one row depends on the other "
        "rows), and the table has 2,000,000 rows, more than the 1,000,000 an in-memory step "
        "may read (ANONWEB_ENGINE_AUTO_ROWS): remove the step, or reach the goal with steps "
        "an out-of-core engine runs (dropping columns, the generalization search with record "
        "suppression)"
    ]
    # at the limit, or without one (the pandas engine chosen by name), it stands
    validate_plan(plan, ["age", "name"], rows=1_000_000, memory_rows=1_000_000)
    validate_plan(plan, ["age", "name"], rows=2_000_000, memory_rows=None)
    # the search alone runs out of core at any size
    search_only = plan_from_dict({**_plan({"k": 5}), "steps": [_plan({"k": 5})["steps"][1]]})
    validate_plan(search_only, None, rows=10**9, memory_rows=1_000_000)


@settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(30, 400),
    k=st.integers(1, 12),
    suppression=st.sampled_from([0.0, 0.02, 0.1, 0.3]),
    model=st.sampled_from(
        [
            [],
            [{"model": "distinct_l", "sensitive": "disease", "l": 2}],
            [{"model": "entropy_l", "sensitive": "disease", "l": 1.5}],
            [{"model": "t_closeness", "sensitive": "disease", "t": 0.3}],
        ]
    ),
)
def test_random_tables_release_alike_in_memory_and_on_duckdb(
    tmp_path_factory, seed, n, k, suppression, model
):
    df = _table(seed, n)
    plan = _plan({"k": min(k, n), "suppression": suppression, "models": model})
    tmp = tmp_path_factory.mktemp("h")
    engine = DuckDBEngine()
    try:
        try:
            memory = make_release(
                df, plan_from_dict(plan), rng=np.random.default_rng(seed), tags=TAGS
            )
        except ParameterError as exc:  # no node satisfies the models: refused alike
            with pytest.raises(ParameterError, match="no generalization satisfies"):
                _both(df, plan, engine, tmp, seed)
            assert "no generalization satisfies" in str(exc)
            return
        _, made, written = _both(df, plan, engine, tmp, seed)
    finally:
        engine.close()
    _compare(memory, made, written)


@pytest.mark.parametrize(
    "params, on_engine",
    [
        ({"k": 2}, True),
        ({"k": 2, "local_suppression": True}, False),
        ({"k": 2, "population_dataset": 7, "models": [{"kind": "k_map", "k": 3}]}, False),
    ],
)
def test_which_searches_an_engine_runs(params, on_engine):
    """The search runs out of core unless it blanks cells row by row or counts a population
    table, which is read in memory: those stay in memory, by the step's one declaration."""
    from anonweb.core.release.engine_release import engine_problems

    plan = plan_from_dict(
        {
            "quasi_identifiers": ["age"],
            "steps": [{"kind": "optimal_generalization", "params": params}],
        }
    )
    problems = engine_problems(plan, "duckdb")
    assert (problems == []) is on_engine, problems
    if not on_engine:
        assert "runs in memory only" in problems[0]
