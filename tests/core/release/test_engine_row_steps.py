"""Row-wise steps on an engine: masks, keyed tokens, noise and PRAM run out of core, a part of
the table at a time, and write exactly what the in-memory run writes for the same seed (each
row's draw is keyed by its position and the step's seed), with the same step reports."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from anonweb.core.engine import duckdb_engine
from anonweb.core.engine.duckdb_engine import DuckDBEngine
from anonweb.core.engine.pandas_engine import PandasEngine
from anonweb.core.errors import ParameterError
from anonweb.core.release.engine_release import engine_problems, make_engine_release
from anonweb.core.release.make import make_release
from anonweb.core.release.plan import plan_from_dict
from anonweb.core.transforms.rowdraws import row_normals, row_uniforms

from .test_engine_release import FIGURES, HIERARCHIES, close, rows

SECRETS = {"token-key": b"a key of the release"}
TAGS = {"age": "quasi_identifier", "zip": "quasi_identifier", "sex": "quasi_identifier"}
TAGS |= {"disease": "sensitive", "name": "identifier", "ssn": "identifier"}
PRAM = {"flu": {"flu": 0.7, "ulcer": 0.2, "cancer": 0.1}, "ulcer": {"ulcer": 0.9, "flu": 0.1}}
PRAM |= {"cancer": {"cancer": 1.0}}


def _table(seed: int, n: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    income = rng.normal(40_000, 9_000, n)
    return pd.DataFrame(
        {
            "name": [f"person {i}" for i in range(n)],
            "ssn": [f"{rng.integers(100, 999)}-{rng.integers(10, 99)}-{i:04d}" for i in range(n)],
            "age": rng.integers(18, 80, n),
            "zip": rng.choice(["47677", "47602", "47678"], n),
            "sex": rng.choice(["F", "M"], n),
            "city": rng.choice(["Paris", "Lyon", "Nice", None], n),
            "income": income,
            "hours": rng.integers(10, 60, n).astype(float),
            "disease": rng.choice(["flu", "ulcer", "cancer"], n, p=[0.5, 0.3, 0.2]),
        }
    )


def _plan() -> dict:
    return {
        "quasi_identifiers": ["age", "zip", "sex"],
        "sensitive": ["disease"],
        "hierarchies": HIERARCHIES,
        "steps": [
            {"kind": "tokenize", "params": {"columns": ["name"], "key": "token-key"}},
            {"kind": "suppress", "params": {"columns": ["city"], "values": ["Paris"]}},
            {"kind": "substitute", "params": {"columns": ["city"], "codebook": {"Lyon": "L"}}},
            {"kind": "add_noise", "params": {"columns": ["income"], "sd": 1500.0}},
            {"kind": "multiplicative_noise", "params": {"columns": ["hours"], "scale": 0.1}},
            {"kind": "pram", "params": {"column": "disease", "matrix": PRAM}},
            {
                "kind": "optimal_generalization",
                "params": {
                    "k": 5,
                    "suppression": 0.05,
                    "models": [{"model": "distinct_l", "sensitive": "disease", "l": 2}],
                },
            },
            # after the search, on a column the search does not read: run in the same pass
            {"kind": "regex_mask", "params": {"columns": ["ssn"], "preset": "keep_last_digits"}},
        ],
    }


def _both(df, plan_dict, engine, tmp_path, seed=11):
    plan = plan_from_dict(plan_dict)
    memory = make_release(df, plan, rng=np.random.default_rng(seed), tags=TAGS, secrets=SECRETS)
    source = tmp_path / "source.parquet"
    df.to_parquet(source, index=False)
    out = tmp_path / "release.parquet"
    made = make_engine_release(
        source, plan, engine=engine, out=out, rng=np.random.default_rng(seed), tags=TAGS,
        secrets=SECRETS,
    )  # fmt: skip
    return memory, made, pd.read_parquet(out)


def _compare(memory, made, written) -> None:
    """The figures of :func:`test_engine_release._compare` but the policy's findings: the
    engine's policy does not read the values of columns outside the quasi-identifiers and
    sensitive columns (tokens, masks), so it blocks them where the in-memory policy reads them
    (and counts a partly masked identifier among the quasi-identifiers)
    (see ``evaluate_engine_release``)."""
    search = next(s for s in memory.report["steps"] if s["kind"] == "optimal_generalization")
    ours = next(s for s in made.report["steps"] if s["kind"] == "optimal_generalization")
    for key in FIGURES:
        close(search[key], ours[key], key)
    for key in ("risk_before", "risk_after", "rows_in", "rows_out"):
        close(memory.report[key], made.report[key], key)
    assert list(written.columns) == list(memory.frame.columns)
    assert rows(written) == rows(memory.frame)
    unread = {f.columns[0] for f in made.gate.blocking if f.code == "column_unchecked"}
    assert unread == {"name", "ssn", "city", "income", "hours"}


def _steps(report):
    """The row-wise steps' reports (the search's figures are compared by ``_compare``)."""
    return [
        {k: v for k, v in s.items() if k != "seconds"}
        for s in report["steps"]
        if s["kind"] != "optimal_generalization"
    ]


@pytest.mark.parametrize("part_rows", [97, 1_000_000], ids=["many-parts", "one-part"])
def test_row_steps_on_duckdb_write_the_in_memory_release(tmp_path, monkeypatch, part_rows):
    monkeypatch.setattr(duckdb_engine, "MAP_BATCH_ROWS", part_rows)
    df = _table(1, 1200)
    engine = DuckDBEngine(memory_limit="200MB")
    try:
        memory, made, written = _both(df, _plan(), engine, tmp_path)
    finally:
        engine.close()
    _compare(memory, made, written)
    # every step's report, the parts' counts added up, as the in-memory run has it
    assert _steps(made.report) == _steps(memory.report)
    assert _steps(made.published) == _steps(memory.published)
    pram = next(s for s in made.report["steps"] if s["kind"] == "pram")
    assert pram["changed_cells"] > 0
    suppressed = next(s for s in made.report["steps"] if s["kind"] == "suppress")
    assert suppressed["suppressed_cells"] == {"city": int((df["city"] == "Paris").sum())}
    # the noise moved the values, the keyed tokens and masks are what they are in memory
    assert not np.allclose(np.sort(written["income"].dropna()), np.sort(df["income"].dropna()))
    assert written["ssn"].str.match(r"^\*\*\*-\*\*-\d{4}$").all()
    assert not any(p.name.startswith(".rows-") for p in tmp_path.iterdir())


def test_the_pandas_engine_runs_the_same_pass(tmp_path):
    df = _table(2, 300)
    memory, made, written = _both(df, _plan(), PandasEngine(), tmp_path, seed=5)
    _compare(memory, made, written)
    assert _steps(made.report) == _steps(memory.report)


def test_another_seed_draws_other_noise(tmp_path):
    df = _table(3, 200)
    written = []
    engine = DuckDBEngine()
    try:
        for seed in (1, 2):
            (tmp_path / str(seed)).mkdir()
            written.append(_both(df, _plan(), engine, tmp_path / str(seed), seed=seed)[2])
    finally:
        engine.close()
    a, b = written
    assert not np.allclose(a["income"].dropna().sort_values(), b["income"].dropna().sort_values())


def test_row_draws_are_keyed_by_position_not_by_the_parts():
    whole = row_normals(42, np.arange(10_000))
    parts = np.concatenate([row_normals(42, np.arange(a, b)) for a, b in ((0, 3), (3, 9_999))])
    parts = np.append(parts, row_normals(42, np.array([9_999])))
    assert np.array_equal(whole, parts)
    assert not np.array_equal(whole, row_normals(43, np.arange(10_000)))
    assert not np.array_equal(whole, row_normals(42, np.arange(10_000), stream=1))
    # the draws are the distributions the steps promise (a fixed seed: not a flaky test)
    assert stats.kstest(whole, "norm").pvalue > 0.01
    u = row_uniforms(7, np.arange(50_000))
    assert u.min() > 0 and u.max() < 1
    assert stats.kstest(u, "uniform").pvalue > 0.01
    # neighbouring rows' draws are not correlated
    assert abs(np.corrcoef(whole[:-1], whole[1:])[0, 1]) < 0.05


def test_which_row_steps_an_engine_runs():
    def problems(step, engine="duckdb"):
        plan = plan_from_dict({"quasi_identifiers": ["age"], "steps": [step]})
        return engine_problems(plan, engine)

    assert problems({"kind": "add_noise", "params": {"columns": ["x"], "sd": 1.0}}) == []
    assert problems({"kind": "pram", "params": {"column": "x", "matrix": {"a": {"a": 1}}}}) == []
    assert problems({"kind": "tokenize", "params": {"columns": ["x"], "key": "k"}}) == []
    # a figure of every row first: the column's spread, its categories, its rare values
    for step in (
        {"kind": "add_noise", "params": {"columns": ["x"], "scale": 0.1}},
        {"kind": "pram", "params": {"column": "x", "p_keep": 0.8}},
        {"kind": "suppress", "params": {"columns": ["x"], "rare": 3}},
        {"kind": "rank_swap", "params": {"columns": ["x"], "p": 5}},
        {"kind": "shuffle", "params": {"columns": ["x"]}},
    ):
        assert "runs in memory only" in problems(step)[0], step
    assert problems({"kind": "tokenize", "params": {"columns": ["x"], "key": "k"}}, "spark") == [
        "step 1 (tokenize) runs on the pandas, duckdb engines, not on the spark engine"
    ]


def test_a_step_after_the_search_on_a_column_it_reads_is_refused(tmp_path):
    plan = _plan()
    plan["steps"].append({"kind": "tokenize", "params": {"columns": ["zip"], "key": "token-key"}})
    problems = engine_problems(plan_from_dict(plan), "duckdb")
    assert problems == [
        "step 9 (tokenize) comes after the optimal_generalization step and touches 'zip', "
        "which the search reads: an engine runs it before the search, so put it before the "
        "search or use the pandas engine"
    ]
    df = _table(4, 100)
    source = tmp_path / "s.parquet"
    df.to_parquet(source, index=False)
    engine = DuckDBEngine()
    try:
        with pytest.raises(ParameterError, match="comes after the optimal_generalization"):
            make_engine_release(
                source, plan_from_dict(plan), engine=engine, out=tmp_path / "o.parquet",
                rng=np.random.default_rng(0), tags={}, secrets=SECRETS,
            )  # fmt: skip
    finally:
        engine.close()


# ---- the evidence beside an engine release ------------------------------------------------


def _released(tmp_path, df, plan_dict, engine, **kwargs):
    source = tmp_path / "source.parquet"
    df.to_parquet(source, index=False)
    out = tmp_path / "release.parquet"
    made = make_engine_release(
        source, plan_from_dict(plan_dict), engine=engine, out=out,
        rng=np.random.default_rng(8), tags=TAGS, secrets=SECRETS, **kwargs,
    )  # fmt: skip
    return source, out, made


def test_an_engine_release_reports_what_the_in_memory_release_reports(tmp_path):
    df = _table(5, 1500)
    engine = DuckDBEngine()
    try:
        source, out, made = _released(tmp_path, df, _plan(), engine)
    finally:
        engine.close()
    memory = make_release(
        df, plan_from_dict(_plan()), rng=np.random.default_rng(8), tags=TAGS, secrets=SECRETS
    )
    for key in ("attacks", "reconstruction"):
        assert key in made.report and key in memory.report
        assert "skipped" not in made.report[key]
    attacks = made.report["attacks"]
    # the attacks' figures, with what an engine release lacks said in the report
    assert set(memory.report["attacks"]) <= set(attacks)
    assert attacks["known"] == memory.report["attacks"]["known"] == ["age", "zip", "sex"]
    assert attacks["sample"] == {"records": 1500, "of": 1500}
    assert attacks["linkage"]["targets"] == memory.report["attacks"]["linkage"]["targets"]
    assert "lineage" in attacks and attacks["note"]
    # the generalized release: a person's class holds at least k=5 rows, so the linkage rate is
    # at most 1/5 (the suppressed records are linked among many)
    assert attacks["linkage"]["rate"] <= 0.2 + 1e-9
    assert made.report["reconstruction"]["determined"] == 0
    assert made.report["conflicts"] == {
        "run": True, "checked": [], "findings": {}, "note": "no earlier live release"
    }  # fmt: skip
    lineage = made.lineage()
    assert lineage["records"] == made.rows == len(df)
    import hashlib

    assert lineage["source_sha256"] == hashlib.sha256(source.read_bytes()).hexdigest()
    assert lineage["release_sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert len(lineage["plan_sha256"]) == 64
    # nothing of it reaches the published report
    for key in ("attacks", "reconstruction", "conflicts", "lineage"):
        assert key not in made.published
    assert "conflicts_unchecked" not in {f.code for f in made.gate.findings}


def test_the_attacks_read_a_bounded_sample_of_the_source(tmp_path):
    df = _table(6, 9000)
    plan = {**_plan(), "attacks": {"targets": 300}}
    engine = DuckDBEngine()
    try:
        _, _, made = _released(tmp_path, df, plan, engine)
    finally:
        engine.close()
    attacks = made.report["attacks"]
    # the singling-out group's size (5000) bounds the sample, not the table's 9000 rows
    assert attacks["sample"] == {"records": 5000, "of": 9000}
    assert attacks["linkage"]["targets"] == 300


def test_an_engine_release_is_blocked_unchecked_when_an_earlier_lineage_cannot_be_read(tmp_path):
    from anonweb.core.conflicts.release import EarlierRelease

    df = _table(7, 400)
    # the check runs out of core (tests/core/release/test_engine_lineage.py), but not against a
    # release whose lineage is unreadable: the gate blocks and says why
    earlier = [EarlierRelease("release 1", "approved", 1, error="its files are missing")]
    plan = {**_plan(), "attacks": {"holdout": 0.2}}
    engine = DuckDBEngine()
    try:
        _, _, made = _released(tmp_path, df, plan, engine, earlier=lambda: earlier)
    finally:
        engine.close()
    conflicts = made.report["conflicts"]
    assert conflicts["run"] is False and conflicts["earlier"] == ["release 1"]
    assert "not run" in conflicts["reason"].lower()
    assert "lineage of release 1 cannot be read (its files are missing)" in conflicts["reason"]
    blocking = [f for f in made.gate.blocking if f.code == "conflicts_unchecked"]
    assert len(blocking) == 1 and "release 1" in blocking[0].message
    # the control the plan asked for is not held out on an engine: said, not hidden
    assert made.report["attacks"]["control_records"] == 0
    assert "control" in made.report["attacks"]


def test_an_earlier_release_with_aggregates_is_not_reconstructed_out_of_core(tmp_path):
    from anonweb.core.conflicts.inference import Aggregate
    from anonweb.core.conflicts.release import EarlierRelease

    df = _table(8, 200)
    groups = np.arange(len(df)) // 5
    aggregate = Aggregate("release 1", "income", groups, np.zeros(groups.max() + 1))
    earlier = [EarlierRelease("release 1", "approved", 1, aggregates=(aggregate,))]
    engine = DuckDBEngine()
    try:
        _, _, made = _released(tmp_path, df, _plan(), engine, earlier=earlier)
    finally:
        engine.close()
    rec = made.report["reconstruction"]
    assert rec["determined"] is None and rec["releases"] == ["release 1"]
    assert rec["skipped"].startswith("Not run")


def test_the_intruder_check_on_noisy_columns_reads_the_lineage(tmp_path):
    df = _table(9, 300)
    engine = DuckDBEngine()
    try:
        _, _, made = _released(tmp_path, df, _plan(), engine)
    finally:
        engine.close()
    memory = make_release(
        df, plan_from_dict(_plan()), rng=np.random.default_rng(8), tags=TAGS, secrets=SECRETS
    )
    ours, theirs = made.report["intruder"], memory.report["intruder"]
    assert "skipped" not in ours
    assert ours["columns"] == theirs["columns"] == ["income", "hours"]
    # the same records paired with the same noisy values (the baseline's draws differ: the
    # two paths draw other numbers from the plan's rng before it)
    for key in ("n_records", "correct_link_share", "permutation_distance"):
        assert ours[key] == theirs[key], key
    assert ours["match_distances"]["summary"] == theirs["match_distances"]["summary"]
    assert ours["correct_link_share"] > 10 / 300  # far above a guess among 300
    plan = _plan()
    plan["steps"] = [s for s in plan["steps"] if "noise" not in s["kind"]]
    engine = DuckDBEngine()
    try:
        (tmp_path / "b").mkdir()
        _, _, made = _released(tmp_path / "b", _table(9, 300), plan, engine)
    finally:
        engine.close()
    assert "intruder" not in made.report  # nothing perturbed: as in memory


# Parameters for every step kind an engine streams (other than drop and the search): a kind
# declared for DuckDB without an entry here fails the test below until one is added.
STREAMED = {
    "tokenize": {"columns": ["name", "age"], "key": "token-key", "length": 12},
    "suppress": {"columns": ["city", "age"], "values": ["Paris", 30]},
    "substitute": {"columns": ["city"], "codebook": {"Lyon": "L", "Nice": 7}, "unmatched": "suppress"},
    "regex_mask": {"columns": ["ssn"], "pattern": r"^(\d+)-", "replacement": r"X\1-"},
    "add_noise": {"columns": ["income", "hours"], "sd": 10.0},
    "multiplicative_noise": {"columns": ["income"], "scale": 0.2},
    "pram": {"column": "disease", "matrix": PRAM},
}  # fmt: skip


def test_every_streamed_step_gives_in_parts_what_it_gives_whole(tmp_path, monkeypatch):
    """The row-wise contract, for every kind an engine streams: the table in parts of 13 rows
    gives the rows and the report the whole table gives in memory for the same seed."""
    from anonweb.core.release.engine_release import DROP, SEARCH, _row_pass
    from anonweb.core.release.plan import get_step
    from anonweb.core.release.run import apply_plan
    from anonweb.core.release.steps import StepContext, registered_kinds

    streamed = {
        kind
        for kind in registered_kinds()
        if kind not in (DROP, SEARCH)
        and "duckdb" in get_step(kind).engines_for(STREAMED.get(kind, {}))
    }
    assert streamed == set(STREAMED)
    monkeypatch.setattr(duckdb_engine, "MAP_BATCH_ROWS", 13)
    df = _table(10, 150)
    source = tmp_path / "s.parquet"
    df.to_parquet(source, index=False)
    engine = DuckDBEngine()
    try:
        for kind, params in STREAMED.items():
            plan = plan_from_dict({"steps": [{"kind": kind, "params": params}]})
            whole, report = apply_plan(
                df, plan, rng=np.random.default_rng(4), secrets=SECRETS, measure_risk=False
            )
            ctx = StepContext(rng=np.random.default_rng(4), secrets=SECRETS)
            out = tmp_path / f"{kind}.parquet"
            passed = _row_pass(engine, source, plan, ctx, out)
            parts = pd.read_parquet(out)
            assert rows(parts) == rows(whole), kind
            ours = {k: v for k, v in passed[1].items() if k != "seconds"}
            assert ours == {k: v for k, v in report.steps[0].items() if k != "seconds"}, kind
    finally:
        engine.close()


def test_the_validator_refuses_a_streamed_step_past_the_limit_only_on_spark():
    from anonweb.core.errors import PlanError
    from anonweb.core.release.plan import validate_plan

    plan = plan_from_dict(
        {"steps": [{"kind": "tokenize", "params": {"columns": ["name"], "key": "k"}}]}
    )
    for engine in (None, "auto", "duckdb"):  # DuckDB streams it
        validate_plan(plan, ["name"], rows=2_000_000, memory_rows=1_000_000, engine=engine)
    with pytest.raises(PlanError) as refused:
        validate_plan(plan, ["name"], rows=2_000_000, memory_rows=1_000_000, engine="spark")
    assert refused.value.errors == [
        "step 1 (tokenize) runs on the pandas, duckdb engines, not on the spark engine a table "
        "of 2,000,000 rows goes to (more than the 1,000,000 an in-memory step may read, "
        "ANONWEB_ENGINE_AUTO_ROWS): use the DuckDB engine, or remove the step"
    ]


def test_a_column_dropped_after_the_search_is_read_by_it(tmp_path):
    """With a pass, a drop after the search still leaves the search its column: the release is
    written without it, as in memory."""
    plan = _plan()
    plan["steps"].append({"kind": "drop", "params": {"columns": ["sex", "ssn"]}})
    df = _table(11, 400)
    engine = DuckDBEngine()
    try:
        memory, made, written = _both(df, plan, engine, tmp_path)
    finally:
        engine.close()
    assert "sex" not in written.columns and "ssn" not in written.columns
    assert list(written.columns) == list(memory.frame.columns)
    assert rows(written) == rows(memory.frame)
    assert _steps(made.report) == _steps(memory.report)


def test_a_csv_source_is_streamed_in_its_order(tmp_path, monkeypatch):
    """DuckDB reads a CSV file in parallel; the parts still come in the file's order, so each
    row gets its own draw."""
    monkeypatch.setattr(duckdb_engine, "MAP_BATCH_ROWS", 101)
    df = _table(12, 900)
    source = tmp_path / "source.csv"
    df.to_csv(source, index=False)
    # pandas' default float parser may miss the nearest double by one unit; DuckDB's does not
    table = pd.read_csv(source, float_precision="round_trip")
    plan = plan_from_dict(_plan())
    memory = make_release(table, plan, rng=np.random.default_rng(3), tags=TAGS, secrets=SECRETS)
    engine = DuckDBEngine(threads=2)
    try:
        made = make_engine_release(
            source, plan, engine=engine, out=tmp_path / "r.parquet",
            rng=np.random.default_rng(3), tags=TAGS, secrets=SECRETS,
        )  # fmt: skip
    finally:
        engine.close()

    def missing_as_none(frame):  # pandas reads a blank CSV cell as NaN, DuckDB as a null
        return frame.astype(object).where(frame.notna(), None)

    written = missing_as_none(pd.read_parquet(tmp_path / "r.parquet"))
    assert rows(written) == rows(missing_as_none(memory.frame))
    assert _steps(made.report) == _steps(memory.report)


def test_the_validator_refuses_a_step_after_the_search_past_the_limit():
    """Past the in-memory limit the table goes to DuckDB, which would run the step before the
    search: refused at submission, not sent back to memory by the job."""
    from anonweb.core.errors import PlanError
    from anonweb.core.release.plan import validate_plan

    plan = _plan()
    plan["steps"].append({"kind": "tokenize", "params": {"columns": ["zip"], "key": "token-key"}})
    columns = list(_table(1, 5).columns)
    validate_plan(plan_from_dict(plan), columns, rows=1_000, memory_rows=1_000_000)
    with pytest.raises(PlanError) as refused:
        validate_plan(plan_from_dict(plan), columns, rows=2_000_000, memory_rows=1_000_000)
    assert refused.value.errors == engine_problems(plan_from_dict(plan), "duckdb")
