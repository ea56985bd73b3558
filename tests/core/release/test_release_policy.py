"""The release gate (anonweb.core.release.policy): each finding on the cases a steward missed."""

import json
import string

import numpy as np
import pandas as pd
import pytest

from anonweb.core.conflicts.check import ReleaseView, check_conflicts
from anonweb.core.errors import ParameterError
from anonweb.core.findings import CODES, Finding
from anonweb.core.release.plan import plan_from_dict
from anonweb.core.release.policy import (
    PolicyThresholds,
    evaluate_plan,
    evaluate_release,
    free_text,
)
from anonweb.core.release.run import apply_plan

N = 800
STATES = ["IL", "OH", "TX", "CA", "NY", "WA", "FL", "GA"]


def people(n: int = N, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    letters = np.array(list(string.ascii_lowercase))
    names = ["".join(rng.choice(letters, 8)).title() for _ in range(n)]
    return pd.DataFrame(
        {
            "name": names,
            "email": [f"{x.lower()}{i}@example.org" for i, x in enumerate(names)],
            "age": rng.integers(20, 80, n),
            "sex": rng.choice(["F", "M"], n),
            "disease": rng.choice(["flu", "asthma", "diabetes"], n),
        }
    )


def run(df, plan_dict, **kwargs):
    out, report = apply_plan(
        df, plan_from_dict(plan_dict), rng=np.random.default_rng(1), secrets={"k": b"x" * 32}
    )
    return out, report


def codes(result) -> list[str]:
    return sorted({f.code for f in result.findings})


def by_code(result, code) -> list[Finding]:
    return [f for f in result.findings if f.code == code]


TAGS = {
    "name": "identifier",
    "email": "identifier",
    "age": "quasi_identifier",
    "sex": "quasi_identifier",
    "disease": "sensitive",
}
AGE_BANDS = {"age": {"builder": "interval", "width": 20}}
GENERALIZE = {
    "quasi_identifiers": ["age", "sex"],
    "sensitive": ["disease"],
    "hierarchies": AGE_BANDS,
    "steps": [{"kind": "generalize", "params": {"levels": {"age": 1}}}],
}


@pytest.mark.parametrize("steps", [[], GENERALIZE["steps"]])
def test_a_plan_without_drop_releasing_name_and_email_is_blocked(steps):
    df = people()
    plan = {**GENERALIZE, "steps": steps}
    out, _ = run(df, plan)
    result = evaluate_release(df, out, plan=plan, tags=TAGS)
    found = by_code(result, "identifier_released")
    assert sorted(c for f in found for c in f.columns) == ["email", "name"]
    assert all(f.severity == "block" and f.records == N for f in found)
    assert result.blocking


def test_dropping_the_identifiers_clears_them():
    df = people()
    plan = {**GENERALIZE, "steps": [{"kind": "drop", "params": {"columns": ["name", "email"]}}]}
    plan["steps"] += GENERALIZE["steps"]
    out, _ = run(df, plan)
    result = evaluate_release(df, out, plan=plan, tags=TAGS)
    assert not {"identifier_released", "identifier_partly_masked"} & set(codes(result))
    # 20-year bands x sex over 800 people: every class is large, each holds all three diseases
    assert result.risk["k"] >= 5 and not result.blocking, result.to_dict()


def test_tokens_are_not_partly_masked():
    df = people()
    plan = {
        **GENERALIZE,
        "steps": [
            {"kind": "drop", "params": {"columns": ["name"]}},
            {"kind": "tokenize", "params": {"columns": ["email"], "key": "k"}},
            *GENERALIZE["steps"],
        ],
    }
    out, _ = run(df, plan)
    assert codes(evaluate_release(df, out, plan=plan, tags=TAGS)) == []


def cities(n: int = N) -> pd.DataFrame:
    """A free-text column: "Lives in <city>, <state>", 799 distinct values in 800 rows."""
    df = people(n).drop(columns=["name", "email"])
    lives = [f"Lives in Town{i:03d}, {STATES[i % len(STATES)]}" for i in range(n)]
    lives[-1] = lives[0]
    return df.assign(lives=lives)


def test_free_text_column_is_blocked_until_tagged_keep():
    df = cities()
    assert df["lives"].nunique() == 799
    plan = GENERALIZE
    out, report = run(df, plan)
    # what the report said in the incident: k >= 5 on the plan's QIs, no unique record
    assert report.risk_after["k"] >= 5 and report.risk_after["uniques"] == 0
    tags = {c: t for c, t in TAGS.items() if c in df.columns}
    untagged = evaluate_release(df, out, plan=plan, tags=tags)
    assert codes(untagged) == ["column_untagged", "free_text"]
    (f,) = by_code(untagged, "free_text")
    assert f.columns == ("lives",) and f.records == N and f.facts["distinct"] == 799
    assert by_code(untagged, "column_untagged")[0].columns == ("lives",)
    other = evaluate_release(df, out, plan=plan, tags={**tags, "lives": "other"})
    assert codes(other) == ["free_text"]
    kept = evaluate_release(df, out, plan=plan, tags={**tags, "lives": "keep"})
    assert codes(kept) == ["free_text_kept"] and not kept.blocking
    assert kept.findings[0].severity == "warn"
    # tagged quasi-identifier, it is measured: 799 classes of one person
    as_qi = evaluate_release(df, out, plan=plan, tags={**tags, "lives": "quasi_identifier"})
    assert "free_text" not in codes(as_qi)
    (k,) = by_code(as_qi, "risk_k")
    assert k.facts["k"] == 1 and "lives" in k.columns and k.records >= 798


def test_free_text_detection():
    assert free_text(pd.Series(["a", "b"] * 50)) is None
    assert free_text(pd.Series([f"v{i}" for i in range(30)]))["distinct"] == 30
    assert free_text(pd.Series(["x" * 80] * 3))["mean_length"] == 80
    assert free_text(pd.Series(np.arange(100.0))) is None  # numbers are not text


def ssns(n: int, seed: int = 5) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    serial = rng.choice(10**9, n, replace=False)
    ssn = [f"{s // 10**6:03d}-{s // 10**4 % 100:02d}-{s % 10**4:04d}" for s in serial]
    return people(n, seed).drop(columns=["name", "email"]).assign(ssn=ssn)


def test_ssn_masked_to_its_last_four_digits_is_partly_masked_and_a_quasi_identifier():
    df = ssns(4460)
    plan = {
        **GENERALIZE,
        "steps": [
            {"kind": "regex_mask", "params": {"columns": ["ssn"], "preset": "keep_last_digits"}},
            *GENERALIZE["steps"],
        ],
    }
    out, _ = run(df, plan)
    assert out["ssn"].str.startswith("***-**-").all()
    tags = {**{c: t for c, t in TAGS.items() if c in df.columns}, "ssn": "identifier"}
    result = evaluate_release(df, out, plan=plan, tags=tags)
    (f,) = by_code(result, "identifier_partly_masked")
    # independently: rows whose last four digits occur once
    last4 = df["ssn"].str[-4:]
    unique = int((last4.map(last4.value_counts()) == 1).sum())
    assert f.facts["unique"] == unique and round(unique / len(df), 2) == 0.64
    assert "64%" in f.message and f.severity == "block"
    # counted as a quasi-identifier in the risk after
    assert "ssn" in result.risk["quasi_identifiers"]
    assert by_code(result, "risk_k")[0].facts["k"] == 1


def test_no_quasi_identifiers_in_the_plan_uses_the_tagged_ones():
    df = people().drop(columns=["name", "email"])
    plan = {"steps": []}
    out, report = run(df, plan)
    assert report.risk_after is None  # the plan alone gives no risk figures
    tags = {c: t for c, t in TAGS.items() if c in df.columns}
    result = evaluate_release(df, out, plan=plan, tags=tags)
    assert result.risk["quasi_identifiers"] == ["age", "sex"]
    assert result.risk["k"] == int(df.groupby(["age", "sex"]).size().min())
    assert "risk_k" in codes(result)


def test_no_quasi_identifier_anywhere_is_blocked():
    df = people().drop(columns=["name", "email"])
    out, _ = run(df, {"steps": []})
    tags = {"age": "other", "sex": "other", "disease": "sensitive"}
    result = evaluate_release(df, out, plan={"steps": []}, tags=tags)
    assert codes(result) == ["no_quasi_identifiers"]


def test_union_of_tagged_and_plan_quasi_identifiers():
    df = people().drop(columns=["name", "email"])
    plan = {"quasi_identifiers": ["age"], "steps": []}
    out, _ = run(df, plan)
    tags = {"age": "other", "sex": "quasi_identifier", "disease": "other"}
    result = evaluate_release(df, out, plan=plan, tags=tags)
    assert result.risk["quasi_identifiers"] == ["sex", "age"]


def hand_table() -> pd.DataFrame:
    # classes on (band): A has 5 people, 2 diseases; B has 5 people, all flu; C has 4 people
    return pd.DataFrame(
        {
            "band": ["A"] * 5 + ["B"] * 5 + ["C"] * 4,
            "disease": ["flu", "hiv", "flu", "flu", "hiv"] + ["flu"] * 5 + ["flu", "hiv"] * 2,
        }
    )


def test_thresholds_on_a_hand_worked_table():
    df = hand_table()
    tags = {"band": "quasi_identifier", "disease": "sensitive"}
    result = evaluate_release(df, df, plan={"steps": []}, tags=tags)
    assert codes(result) == ["risk_k", "risk_l", "risk_prosecutor"]
    (k,) = by_code(result, "risk_k")
    assert (k.records, k.facts["k"], k.facts["classes"]) == (4, 4, 1)
    (l_,) = by_code(result, "risk_l")
    assert l_.records == 5 and l_.columns == ("disease",) and "disclosed" in l_.message
    (p,) = by_code(result, "risk_prosecutor")
    assert p.records == 4 and p.facts["max_prosecutor_risk"] == 0.25
    # a steward who accepts k = 4 and risk 0.25, and l = 1
    loose = PolicyThresholds(k=4, l=1, max_prosecutor_risk=0.25)
    assert codes(evaluate_release(df, df, plan={"steps": []}, tags=tags, thresholds=loose)) == []
    # t-closeness only when the team sets a t. The table is 10 flu, 4 hiv (5/7, 2/7): B (all
    # flu) is at 1/2 (2/7 + 2/7) = 0.286, C (half and half) at 0.214, A (3/5 flu) at 0.114
    strict_t = PolicyThresholds(k=4, l=1, max_prosecutor_risk=0.25, t=0.2)
    (t,) = by_code(
        evaluate_release(df, df, plan={"steps": []}, tags=tags, thresholds=strict_t), "risk_t"
    )
    assert t.records == 9 and t.facts["t"] == pytest.approx(2 / 7)


def test_suppressed_records_form_no_class():
    df = hand_table().assign(band=["A"] * 5 + ["B"] * 5 + ["*"] * 4)
    tags = {"band": "quasi_identifier", "disease": "other"}
    plan = {"quasi_identifiers": ["band"], "steps": []}
    result = evaluate_release(df, df, plan=plan, tags=tags)
    assert result.risk["suppressed"] == 4 and result.risk["k"] == 5 and codes(result) == []


@pytest.mark.parametrize(
    "bad",
    [
        {"k": 0},
        {"k": 2.5},
        {"l": 0},
        {"t": 0},
        {"t": 1.5},
        {"max_prosecutor_risk": 0},
        {"x": 1},
        {"max_attack_excess": 1.5},
        {"max_membership_auc": 0.4},
    ],
)
def test_bad_thresholds_are_refused(bad):
    with pytest.raises(ParameterError):
        PolicyThresholds.from_dict(bad)


def test_default_thresholds():
    assert PolicyThresholds().to_dict() == {
        "k": 5,
        "l": 2,
        "t": None,
        "max_prosecutor_risk": 0.2,
        "max_attack_excess": None,
        "max_membership_auc": None,
        # the same policy as a list of model specs (an extension: the keys above stay)
        "models": [{"model": "k_anonymity", "k": 5}, {"model": "distinct_l", "l": 2}],
    }


AGES = [31, 32, 33, 34, 31, 32, 33, 34, 31, 32, 36, 36, 41, 42, 43, 44, 41, 42, 43, 44, 41, 42]


def bins(ages: pd.Series, start: int) -> pd.Series:
    lo = (ages - start) // 10 * 10 + start
    return lo.astype(str) + "-" + (lo + 9).astype(str)


def test_two_releases_keeping_a_unique_glucose_reading_conflict():
    rng = np.random.default_rng(3)
    src = pd.DataFrame(
        {
            "age": AGES,
            "glucose": rng.permutation(np.arange(80, 80 + len(AGES))).astype(float),
            "stroke": ["no"] * len(AGES),
        }
    )
    src.loc[[0, 12], "stroke"] = "yes"
    views = []
    for label, start, seed in (("v1", 0, 1), ("v2", 5, 2)):
        order = np.random.default_rng(seed).permutation(len(src))
        frame = src.assign(age=bins(src["age"], start))
        views.append(ReleaseView(label, frame.iloc[order].reset_index(drop=True), order))
    report = check_conflicts(
        src, views, quasi_identifiers=["age"], sensitive=["stroke"], k=2, l=2, new="v2"
    )
    tags = {"age": "quasi_identifier", "glucose": "other", "stroke": "sensitive"}
    loose = PolicyThresholds(k=2, l=1, max_prosecutor_risk=0.5)
    result = evaluate_release(
        src,
        views[1].frame,
        plan={"steps": []},
        tags=tags,
        thresholds=loose,
        conflicts=report,
        statuses={"v1": "approved", "v2": "new"},
    )
    found = by_code(result, "conflict_linkage")
    assert found and all(f.severity == "block" for f in found)
    (on_stroke,) = [f for f in found if f.columns == ("stroke",)]
    assert on_stroke.records == 2 and on_stroke.facts["link_columns"] == ["glucose"]
    assert on_stroke.facts["statuses"] == {"v1": "approved", "v2": "new"}
    assert "v1: approved" in on_stroke.message


def test_a_dp_release_exposing_exact_figures_is_blocked():
    df = people().drop(columns=["name", "email"])
    plan = {"steps": [{"kind": "dp_release", "params": {"kind": "count", "epsilon": 1.0}}]}
    out, report = run(df, plan)
    full = report.to_dict()
    result = evaluate_release(df, out, plan=plan, tags={}, report=full)
    (f,) = result.findings
    assert f.code == "dp_exact_figures" and "rows_in" in f.facts["exposed"]
    # what the step declares public, without the source's row count: nothing to block
    public = {k: v for k, v in full.items() if k not in ("rows_in", "risk_before", "risk_after")}
    assert codes(evaluate_release(df, out, plan=plan, tags={}, report=public)) == []
    # a report key the step does not declare public is exposed too
    extra = {**public, "steps": [{**public["steps"][0], "true_count": len(df)}]}
    (f,) = evaluate_release(df, out, plan=plan, tags={}, report=extra).findings
    assert f.facts["exposed"] == ["step 1 true_count"]


def test_findings_hold_no_cell_value():
    df = ssns(500).assign(name=people(500)["name"], email=people(500)["email"])
    plan = {
        **GENERALIZE,
        "steps": [
            {"kind": "regex_mask", "params": {"columns": ["ssn"], "preset": "keep_last_digits"}},
        ],
    }
    out, _ = run(df, plan)
    tags = {**TAGS, "ssn": "identifier"}
    text = json.dumps(evaluate_release(df, out, plan=plan, tags=tags).to_dict())
    for col in ("name", "email", "ssn", "disease"):
        for value in df[col].astype(str).unique():
            assert value not in text


def test_every_code_has_its_sentence():
    assert all(isinstance(v, str) and v.endswith(".") for v in CODES.values())
    with pytest.raises(ValueError):
        Finding("no_such_code", "block", "x")
    with pytest.raises(ValueError):
        Finding("risk_k", "maybe", "x")


PRE_RUN = ("identifier_released", "column_untagged", "no_quasi_identifiers")


@pytest.mark.parametrize(
    "steps,tags",
    [
        ([], TAGS),  # name and email go out as they are
        ([{"kind": "drop", "params": {"columns": ["name"]}}], TAGS),
        ([{"kind": "drop", "params": {"columns": ["name", "email"]}}], TAGS),
        (
            [
                {"kind": "drop", "params": {"columns": ["name"]}},
                {"kind": "tokenize", "params": {"columns": ["email"], "key": "k"}},
            ],
            TAGS,
        ),
        ([{"kind": "drop", "params": {"columns": ["name", "email"]}}], {**TAGS, "disease": None}),
        (
            [{"kind": "drop", "params": {"columns": ["name", "email"]}}],
            {"age": "other", "sex": "other", "disease": "sensitive"},
        ),
    ],
)
def test_the_plan_alone_gives_the_same_pre_run_findings_as_the_release(steps, tags):
    df = people()
    plan = {"sensitive": ["disease"], "steps": steps}
    out, _ = run(df, plan)
    after = evaluate_release(df, out, plan=plan, tags=tags)
    before = evaluate_plan(plan, tags=tags, columns=list(df.columns), rows=len(df))
    expected = sorted((f.code, f.columns) for f in after.findings if f.code in PRE_RUN)
    assert sorted((f.code, f.columns) for f in before.findings) == expected
    assert all(f.severity == "block" and f.records == N for f in before.findings)


def test_the_plan_alone_names_an_untouched_identifier_by_the_plan():
    [finding] = evaluate_plan(
        {"steps": [{"kind": "drop", "params": {"columns": ["name"]}}]},
        tags=TAGS,
        columns=["name", "email", "age", "sex", "disease"],
        rows=10,
    ).findings
    assert finding.code == "identifier_released" and finding.columns == ("email",)
    assert "no step of the plan changes or drops it" in finding.message
    assert finding.facts == {"rows": 10}


def test_the_plan_alone_judges_nothing_of_an_aggregate_release():
    plan = {"steps": [{"kind": "dp_release", "params": {"kind": "count", "epsilon": 1.0}}]}
    result = evaluate_plan(plan, tags={}, columns=["name", "x"], rows=5)
    assert result.findings == () and result.risk == {"output": "aggregate"}
