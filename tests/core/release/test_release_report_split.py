"""The public/private split of a release's plan, step reports, conflict findings and attack
figures (``anonweb.core.release.report``): what reaches everyone who receives a release, and
what stays with the team's officers and stewards (or officers alone)."""

from __future__ import annotations

import copy

import pytest

from anonweb.core.release.plan import get_step, plan_from_dict
from anonweb.core.release.report import (
    STEP_PUBLIC,
    attacks_without_records,
    internal_step_keys,
    override_for_reader,
    private_finding_detail,
    public_finding,
    public_step_keys,
    public_steps,
    published_report,
    undecided_finding,
    without_figures,
)

PLAN = plan_from_dict(
    {
        "version": 1,
        "quasi_identifiers": ["age"],
        "steps": [
            {"kind": "drop", "params": {"columns": ["name"]}},
            {"kind": "generalize", "params": {"levels": {"age": 1}}},
        ],
    }
)


@pytest.mark.parametrize(
    ("text", "public"),
    [
        (
            "release 2's mean of bmi over 3 people (24.5) is that person's value",
            "release 2's mean of bmi over 3 people is that person's value",
        ),
        (
            "A and B: the same people but one, who release 1 groups with others; "
            "3 × 24.5 − 2 × 23 is that person's bmi",
            "A and B: the same people but one, who release 1 groups with others; "
            "the difference is that person's bmi",
        ),
        (
            "A minus B (the same people less one) is that person's bmi: 73.5 − 46",
            "A minus B (the same people less one) is that person's bmi",
        ),
        (
            "equations that, with the column's bounds, 12 to 40) fix",
            "equations that, with the column's bounds) fix",
        ),
        ("no figure here", "no figure here"),
    ],
)
def test_explanations_lose_their_figures(text, public):
    assert without_figures(text) == public


def test_a_public_finding_keeps_counts_and_facts_never_records_or_values():
    private = {
        "type": "differencing",
        "records": [4, 9],
        "explanation": "release 2's total of bmi over 3 people (70.5) is that person's value",
        "releases": ["release 1", "release 2"],
        "columns": ["bmi"],
        "values": {"4": 24.5},
        "intervals": {"4": [24, 25]},
        "k": 1,
    }
    before = copy.deepcopy(private)
    public = public_finding(
        private, labels={"release 1": 7, "release 2": None}, l_by_release={"release 1": 2}
    )
    assert public == {
        "type": "differencing",
        "records": 2,
        "columns": ["bmi"],
        "releases": ["release 1", "release 2"],
        "labels": {"release 1": 7, "release 2": None},
        "explanation": "release 2's total of bmi over 3 people is that person's value",
        "facts": {"k": 1, "l_by_release": {"release 1": 2}},
    }
    assert private == before  # the input is untouched
    assert private_finding_detail(private) == {
        "explanation": private["explanation"],
        "records": [4, 9],
        "values": {"4": 24.5},
        "intervals": {"4": [24, 25]},
    }
    assert private_finding_detail({"type": "undecided"}) == {
        "explanation": "",
        "records": [],
        "values": {},
        "intervals": {},
    }


def test_an_undecided_combination_is_public_without_figures():
    public, private = undecided_finding("release 1 and 2 (14) were not decided")
    assert public["records"] == 0 and public["explanation"] == "release 1 and 2 were not decided"
    assert private == {
        "type": "undecided",
        "explanation": "release 1 and 2 (14) were not decided",
        "records": [],
    }


def test_step_reports_keep_the_keys_their_kind_declares_public():
    report = {
        "rows_in": 6,
        "risk_before": {"k": 1},
        "steps": [
            {"step": 1, "kind": "drop", "seconds": 0.1, "dropped": ["name"], "source_note": 1},
            {"kind": "generalize", "levels": {"age": 1}, "suppressed_in": 2},
            {"step": 9, "kind": "ghost", "anything": 1},
        ],
    }
    for i, entry in enumerate(report["steps"], 1):
        keys = public_step_keys(PLAN, entry, i)
        assert set(STEP_PUBLIC) <= keys
        if i <= len(PLAN.steps):
            assert keys == set(STEP_PUBLIC) | set(get_step(PLAN.steps[i - 1].kind).public_report)
        else:
            assert keys == set(STEP_PUBLIC)  # names no step of the plan: the runner's keys only
    steps = public_steps(report, PLAN)
    exposed = internal_step_keys(report, PLAN)
    for i, (entry, kept) in enumerate(zip(report["steps"], steps, strict=True), 1):
        number = entry.get("step", i)
        dropped = {k for k in entry if k not in kept}
        assert {f"step {number} {k}" for k in dropped} == {
            e for e in exposed if e.startswith(f"step {number} ")
        }
    assert "step 9 anything" in exposed
    published = published_report(report, PLAN)
    assert published["steps"] == steps and "rows_in" not in published
    assert "risk_before" not in published


def test_an_override_shows_its_findings_to_staff_only():
    override = {"justification": "accepted", "findings": [{"code": "risk_k"}]}
    assert override_for_reader(override, staff=True) == override
    assert override_for_reader(override, staff=False) == {"justification": "accepted"}
    assert override_for_reader({}, staff=True) is None
    assert override_for_reader(None, staff=False) is None


def test_stewards_read_the_reconstruction_without_records_or_values():
    attacks = {
        "linkage": {"excess": 0.1},
        "reconstruction": {
            "determined": 1,
            "columns": [{"column": "bmi", "determined": 1, "records": [4], "values": {"4": 2}}],
        },
    }
    before = copy.deepcopy(attacks)
    out = attacks_without_records(attacks)
    assert out["reconstruction"]["columns"] == [{"column": "bmi", "determined": 1}]
    assert out["linkage"] == attacks["linkage"] and attacks == before
    assert attacks_without_records({"skipped": "x"}) == {"skipped": "x"}
