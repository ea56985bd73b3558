"""Attack-based risk: each attack's success on people in a release against people not in it.

Calibration: the source itself (shuffled) is attacked almost always; independent noise gives
an excess of about 0 with an interval covering 0; a 10-anonymous release links nobody with more
than 1/10; the intervals cover the rate over the whole source at about their stated level.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from anonweb.core.attacks.matching import Column
from anonweb.core.attacks.run import NO_CONTROL, run_attacks
from anonweb.core.attacks.stats import newcombe, wilson
from anonweb.core.errors import DataError, ParameterError

KNOWN = ["age", "sex", "zip"]
ZIPS = [f"0{z}" for z in range(2100, 2300)]


def people(n: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    age = rng.integers(17, 90, n)
    return pd.DataFrame(
        {
            "age": age,
            "sex": rng.choice(["F", "M"], n),
            "zip": rng.choice(ZIPS, n),
            # depends on age, so a control learns something from the population too
            "disease": np.where(age > 60, "heart", rng.choice(["flu", "asthma", "ulcer"], n)),
            "income": rng.normal(40_000, 9_000, n).round(),
        }
    )


@pytest.fixture(scope="module")
def split():
    everyone = people(7000, 1)
    return everyone.iloc[1000:].reset_index(drop=True), everyone.iloc[:1000]


def k10(df: pd.DataFrame) -> pd.DataFrame:
    """Age in decades, ZIP to three digits, classes under 10 rows suppressed."""
    out = df.copy()
    low = (df["age"] // 10) * 10
    out["age"] = [f"[{a}, {a + 10}[" for a in low]
    out["zip"] = df["zip"].str[:3] + "**"
    size = out.groupby(KNOWN)["sex"].transform("size")
    out.loc[size < 10, KNOWN] = "*"
    return out


def test_wilson_and_newcombe_give_the_published_intervals():
    # Newcombe (1998), Statistics in Medicine 17: 81/263, and 56/70 - 48/80 (method 10)
    lo, hi = wilson(81, 263)
    assert (round(lo, 4), round(hi, 4)) == (0.2553, 0.3662)
    lo, hi = newcombe(56, 70, 48, 80)
    assert (round(lo, 4), round(hi, 4)) == (0.0524, 0.3339)


def test_the_source_itself_shuffled_is_linked_and_inferred_almost_always(split):
    source, control = split
    release = source.sample(frac=1, random_state=3)
    r = run_attacks(
        source,
        release,
        known=KNOWN,
        sensitive=["disease", "income"],
        control=control,
        targets=1000,
        rng=np.random.default_rng(0),
    )
    assert r.linkage.rate > 0.9
    assert r.inference["disease"].rate > 0.9
    assert r.inference["income"].rate > 0.85  # a mean over the few people sharing the QIs
    assert r.linkage.ci[0] > 0.5  # the excess, not only the rate
    assert r.membership_auc is not None and r.membership_auc > 0.95


def test_a_release_of_independent_noise_gives_no_excess(split):
    source, control = split
    release = people(6000, 99)  # the same population, none of these people
    r = run_attacks(
        source,
        release,
        known=KNOWN,
        sensitive=["disease"],
        control=control,
        targets=1000,
        rng=np.random.default_rng(3),
    )
    for rate in (r.linkage, r.inference["disease"], r.singling_out):
        lo, hi = rate.ci
        assert lo <= 0 <= hi, rate.to_dict()
        assert abs(rate.excess) < 0.05
    # a control predicts the disease from the age as well as a member: the population's part
    assert r.inference["disease"].control_rate > 0.3
    lo, hi = r.membership_ci
    assert lo <= 0.5 <= hi


def test_a_10_anonymous_release_links_nobody_with_more_than_one_in_ten(split):
    source, control = split
    release = k10(source).sample(frac=1, random_state=4)
    r = run_attacks(
        source,
        release,
        known=KNOWN,
        control=control,
        targets=2000,
        rng=np.random.default_rng(0),
    )
    assert 0 < r.linkage.rate <= 0.1
    # the record-level figure: each linked person's class holds at least 10 rows
    assert r.linkage.rate * r.linkage.targets <= r.linkage.targets / 10


def test_perturbed_numbers_are_linked_by_the_nearest_record(split):
    source, control = split
    rng = np.random.default_rng(5)
    excess = []
    order = rng.permutation(len(source))  # the release's rows, shuffled: its lineage
    for sd in (0.05, 20.0):
        release = source.assign(
            age=source["age"] + rng.normal(0, sd, len(source)),
            income=source["income"] + rng.normal(0, 500 * sd, len(source)),
        ).iloc[order]
        r = run_attacks(
            source,
            release,
            known=["age", "income"],
            sensitive=["disease"],
            control=control,
            targets=500,
            rng=np.random.default_rng(0),
            lineage=order,
        )
        excess.append(r.linkage.excess)
    # little noise: the nearest record is the person's own; much noise: it is anyone's
    assert excess[0] > 0.25 and excess[1] < excess[0] / 4, excess


def test_the_intervals_cover_the_rate_over_the_whole_source_at_their_level(split):
    source, _ = split
    release = k10(source)
    whole = run_attacks(
        source,
        release,
        known=KNOWN,
        sensitive=["disease"],
        targets=len(source),
        rng=np.random.default_rng(0),
    )
    true_link, true_inf = whole.linkage.rate, whole.inference["disease"].rate
    covered = [0, 0]
    runs = 60
    for seed in range(runs):
        r = run_attacks(
            source,
            release,
            known=KNOWN,
            sensitive=["disease"],
            targets=150,
            rng=np.random.default_rng(seed + 10),
        )
        covered[0] += r.linkage.ci[0] <= true_link <= r.linkage.ci[1]
        ci = r.inference["disease"].ci
        covered[1] += ci[0] <= true_inf <= ci[1]
    # 95% intervals: at most 3 misses in 60 runs are expected, 8 would be very unlikely
    assert min(covered) >= runs - 7, covered


def test_the_singling_out_interval_covers_its_expected_excess_over_repeated_draws(split):
    """The same predicates are read on both groups, so the two counts are not independent
    draws; the interval must still cover the excess expected over draws (0 for a release of
    other people, the mean over many draws for the source itself) at about its level."""
    source, control = split
    for release, truth in ((people(6000, 99), 0.0), (source.sample(frac=1, random_state=3), None)):
        found = []
        for seed in range(30):
            r = run_attacks(
                source,
                release,
                known=KNOWN,
                control=control,
                targets=300,
                rng=np.random.default_rng(seed + 100),
            )
            found.append((r.singling_out.excess, *r.singling_out.ci))
        draws = np.array(found)
        expected = draws[:, 0].mean() if truth is None else truth
        covered = int(np.sum((draws[:, 1] <= expected) & (expected <= draws[:, 2])))
        # 95% intervals: 1.5 misses in 30 runs are expected, 6 would be very unlikely
        assert covered >= 25, (covered, expected)
        if truth is None:
            assert expected > 0.01  # the source itself does give predicates away


def test_without_a_control_the_excess_is_not_measured(split):
    source, _ = split
    r = run_attacks(source, source, known=KNOWN, targets=100, rng=np.random.default_rng(0))
    d = r.to_dict()
    assert d["linkage"]["excess"] is None and d["linkage"]["control_rate"] is None
    assert d["membership"]["auc"] is None
    assert d["note"] == NO_CONTROL
    assert "no control" in d["sentences"][0]


def test_released_labels_cover_the_values_they_generalize():
    released = pd.Series(["[20, 30[", "*", "35", "021**", "<18", ">=80", "2020-05", "2010s"])
    true = pd.Series([25, 35, "02139", 12, 85, "2020-05-17", "2014-01-01", 30], dtype=object)
    col = Column("x", released, true, source_range=1.0, tolerance=0.05)
    got = col.covers(np.arange(8)[None, :], np.arange(8)[:, None])
    expected = np.zeros((8, 8), dtype=bool)
    expected[:, 1] = True  # "*" covers everyone
    for person, label in [(0, 0), (1, 2), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7)]:
        expected[person, label] = True
    assert (got == expected).all(), got.astype(int)


def test_the_inputs_are_left_untouched(split):
    source, control = split
    release = k10(source)
    before = (source.copy(), release.copy(), control.copy())
    run_attacks(
        source, release, known=KNOWN, control=control, targets=50, rng=np.random.default_rng(0)
    )
    for a, b in zip((source, release, control), before, strict=True):
        pd.testing.assert_frame_equal(a, b)


def test_bad_input_is_refused_with_a_plain_message(split):
    source, control = split
    with pytest.raises(DataError, match="the source has no column 'salary'"):
        run_attacks(source, source, known=["salary"], rng=np.random.default_rng(0))
    with pytest.raises(ParameterError, match="both known to the attacker and sensitive"):
        run_attacks(source, source, known=["age"], sensitive=["age"], rng=np.random.default_rng(0))
    with pytest.raises(ParameterError, match="positive whole number"):
        run_attacks(source, source, known=["age"], targets=0, rng=np.random.default_rng(0))


def test_a_plan_asks_for_attack_evaluation_and_bad_options_are_refused():
    from anonweb.core.release.plan import plan_from_dict, plan_to_dict, validate_plan

    plan = plan_from_dict({"steps": [], "attacks": {"holdout": 0.15, "known": ["age"]}})
    assert plan_to_dict(plan)["attacks"] == {
        "holdout": 0.15,
        "known": ["age"],
        "sensitive": [],
        "targets": 2000,
    }
    assert plan_from_dict(plan_to_dict(plan)) == plan
    assert "attacks" not in plan_to_dict(plan_from_dict({"steps": []}))
    for bad, message in [
        ({"holdout": 0.9}, "holdout must be between 0 and 0.5"),
        ({"holdout": "some"}, "holdout is a share of the records"),
        ({"targets": 0}, "targets must be a whole number"),
        ({"known": "age"}, "known must be a list of column names"),
        ({"control": "x"}, "unknown field"),
    ]:
        with pytest.raises(ParameterError, match=message):
            plan_from_dict({"steps": [], "attacks": bad})
    with pytest.raises(ParameterError, match="attacks: unknown column"):
        validate_plan(plan, ["sex"])


def test_the_gate_blocks_attacks_past_the_policys_caps(split):
    from anonweb.core.attacks.gate import attack_findings
    from anonweb.core.release.policy import PolicyThresholds, evaluate_release

    source, control = split
    leaky = run_attacks(
        source,
        source.sample(frac=1, random_state=1),
        known=KNOWN,
        sensitive=["disease"],
        control=control,
        targets=500,
        rng=np.random.default_rng(0),
    ).to_dict()
    found = attack_findings(leaky, max_excess=0.05, max_auc=0.8)
    codes = sorted((f.code, f.facts.get("attack", "")) for f in found)
    assert codes == [
        ("attack_excess", "inference of disease"),
        ("attack_excess", "linkage"),
        ("attack_membership", ""),
    ]
    assert all(f.blocks for f in found)
    assert "more often than chance" in found[0].message
    assert attack_findings(leaky, max_excess=None, max_auc=None) == []

    quiet = run_attacks(
        source,
        people(6000, 99),
        known=KNOWN,
        control=control,
        targets=500,
        rng=np.random.default_rng(3),
    ).to_dict()
    assert attack_findings(quiet, max_excess=0.05, max_auc=0.8) == []
    uncontrolled = run_attacks(
        source, source, known=KNOWN, targets=100, rng=np.random.default_rng(0)
    ).to_dict()
    (warning,) = attack_findings(uncontrolled, max_excess=0.05, max_auc=None)
    assert warning.code == "attack_no_control" and not warning.blocks

    # the gate itself: the release's own findings and the attack caps together
    caps = PolicyThresholds(k=1, l=1, max_attack_excess=0.05)
    result = evaluate_release(
        source,
        source,
        plan={"steps": []},
        tags={c: "quasi_identifier" for c in source},
        thresholds=caps,
        attacks=leaky,
    )
    assert {"attack_excess"} <= {f.code for f in result.findings}
    with pytest.raises(ParameterError, match="membership AUC must be in"):
        PolicyThresholds(max_membership_auc=0.3)
