"""k-map against a population table and δ-presence (anonweb.core.models.k_map,
anonweb.core.models.delta_presence): hand-worked counts, the search's optimum against an
exhaustive one written from the definitions, each model's monotonicity claim on random tables,
the release path's checks and its report of the population used."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pandas as pd
import pytest

from anonweb.core.errors import DataError, ParameterError
from anonweb.core.io.hierarchy import Hierarchy
from anonweb.core.io.hierarchy_builders import interval_hierarchy, mask_hierarchy
from anonweb.core.models import model_from_dict
from anonweb.core.models.delta_presence import DeltaPresence
from anonweb.core.models.k_map import KMap
from anonweb.core.models.population_table import PopulationTable
from anonweb.core.release.plan import plan_from_dict
from anonweb.core.release.run import apply_plan
from anonweb.core.search.flash import optimal_generalization
from tests.core import oracle

# 12 people; the table holds 5 of them (rows 0, 2, 4, 6, 8)
AGE = Hierarchy(tuple((str(a), "20-29" if a < 30 else "30-39", "*") for a in range(20, 40)), "age")
ZIP = Hierarchy(tuple((z, z[:2] + "*", "*") for z in ("1301", "1302", "1401", "1402")), "zip")
POPULATION = pd.DataFrame(
    {
        "age": [21, 21, 22, 25, 31, 31, 33, 35, 21, 22, 31, 33],
        "zip": [
            "1301", "1302", "1301", "1401", "1402", "1402",
            "1301", "1302", "1301", "1401", "1402", "1302",
        ],
    }
)  # fmt: skip
SAMPLE = POPULATION.iloc[[0, 2, 4, 6, 8]].reset_index(drop=True)
HIER = {"age": AGE, "zip": ZIP}
QIS = ["age", "zip"]


def _population() -> PopulationTable:
    return PopulationTable.from_frame(POPULATION, name="people.csv")


def _counts(levels):
    """The population's size of each sample record's class at a node, through the core."""
    from anonweb.core.models.population_table import sample_rows

    pop = _population().bind(QIS, HIER)
    return pop.at(levels, sample_rows(SAMPLE, QIS, HIER)).tolist()


@pytest.mark.parametrize(
    "levels,expected",
    [
        # (21,1301) x2 in the people, (22,1301) x1, (31,1402) x3, (33,1301) x1
        ((0, 0), [2, 1, 3, 1, 2]),
        # 20-29 & 1301: rows 0, 2, 8; 30-39 & 1402: 4, 5, 10; 30-39 & 1301: 6
        ((1, 0), [3, 3, 3, 1, 3]),
        # 20-29 & 13*: 0, 1, 2, 8; 30-39 & 14*: 4, 5, 10; 30-39 & 13*: 6, 7, 11
        ((1, 1), [4, 4, 3, 3, 4]),
        ((1, 2), [6, 6, 6, 6, 6]),
        ((2, 2), [12] * 5),
    ],
)
def test_population_class_sizes_by_hand(levels, expected):
    assert _counts(levels) == expected


def _search(models, suppression=0.0):
    return optimal_generalization(
        SAMPLE, quasi_identifiers=QIS, hierarchies=HIER, models=models, suppression=suppression
    )


def test_k_map_by_hand():
    # 2-map fails at (0,0), (1,0), (0,1) (a class of one person); (1,1) passes with the least
    # loss, ahead of (2,0) and (0,2), which pass too
    result = _search([KMap(2).with_population(_population())])
    assert result.levels == {"age": 1, "zip": 1}
    assert result.suppressed == 0
    assert result.models == ("2-map (population table 'people.csv', 12 people)",)


def test_delta_presence_by_hand():
    # (0, 0.5)-presence: at (1,1) 20-29 & 13* holds 3 of 4 people (0.75); at (1,2) 3 of 6 and
    # 2 of 6 (0.5, 0.33) pass
    result = _search([DeltaPresence(0.0, 0.5).with_population(_population())])
    assert result.levels == {"age": 1, "zip": 2}
    # one record may go: at (1,1) the 20-29 & 13* class (3 records) cannot, the others pass
    # (1/3, 1/3): still (1, 2)
    check = DeltaPresence(0.0, 0.5).with_population(_population())
    assert _search([check], suppression=0.2).levels == {"age": 1, "zip": 2}


def test_delta_presence_is_not_monotonic_and_says_so():
    # people a, b (both in the table) and c, c, c (none): level 1 merges them. (0.5, 1)-presence:
    # level 0 passes (a: 1 of 1, b: 1 of 1); level 1, its generalization, fails (2 of 5 = 0.4)
    x = Hierarchy((("a", "abc", "*"), ("b", "abc", "*"), ("c", "abc", "*")), "x")
    people = PopulationTable.from_frame(pd.DataFrame({"x": list("abccc")}), name="x.csv")
    table = pd.DataFrame({"x": ["a", "b"]})
    model = DeltaPresence(0.5, 1.0).with_population(people)

    def fixed(level):
        return optimal_generalization(
            table, quasi_identifiers=["x"], hierarchies={"x": x}, models=[model],
            levels={"x": level},
        )  # fmt: skip

    assert fixed(0).suppressed == 0
    with pytest.raises(ParameterError, match="no generalization"):
        fixed(1)
    assert DeltaPresence.monotonic is False  # as ARX declares DPresence
    assert KMap.monotonic is True


def test_the_table_must_be_part_of_the_population():
    bigger = pd.concat([SAMPLE, SAMPLE.iloc[[1]]], ignore_index=True)  # (22,1301) twice
    with pytest.raises(DataError, match="not part of the population 'people.csv'"):
        optimal_generalization(
            bigger,
            quasi_identifiers=QIS,
            hierarchies=HIER,
            models=[KMap(2).with_population(_population())],
        )


def test_a_population_table_without_the_quasi_identifiers_is_refused():
    pop = PopulationTable.from_frame(POPULATION[["age"]], name="ages.csv")
    with pytest.raises(Exception, match="zip"):
        _search([KMap(2).with_population(pop)])


def test_delta_presence_needs_a_population_and_sane_bounds():
    with pytest.raises(ParameterError, match="needs a population table"):
        DeltaPresence(0.0, 0.5).with_population(None)
    with pytest.raises(ParameterError):
        DeltaPresence(0.6, 0.5)
    with pytest.raises(ParameterError):
        DeltaPresence(0.0, 1.5)
    spec = {"model": "delta_presence", "min": 0.1, "max": 0.5}
    assert model_from_dict(spec).to_dict() == spec
    assert model_from_dict({"model": "k_map", "k": 5}).to_dict() == {
        "model": "k_map",
        "k": 5,
        "estimator": "poisson",
        "significance": 0.01,
    }


# -- the search's optimum against the exhaustive one ------------------------------------------


def _toy(seed: int, people: int = 160, share: float = 0.5):
    rng = np.random.default_rng(seed)
    pop = pd.DataFrame(
        {
            "age": rng.integers(18, 60, people),
            "zip": rng.choice(["47677", "47602", "47678", "47905", "47909"], people),
            "sex": rng.choice(["F", "M"], people),
        }
    )
    sample = pop.iloc[np.sort(rng.choice(people, int(people * share), replace=False))]
    hierarchies = {
        "age": interval_hierarchy(pop["age"], width=5, fanout=2, attribute="age"),
        "zip": mask_hierarchy(pop["zip"], attribute="zip"),
        "sex": Hierarchy(rows=(("F", "*"), ("M", "*")), attribute="sex"),
    }
    return pop, sample.reset_index(drop=True), hierarchies


CASES = [
    (1, {"model": "k_map", "k": 3}, 0.0),
    (2, {"model": "k_map", "k": 5}, 0.05),
    (3, {"model": "k_map", "k": 8}, 0.1),
    (4, {"model": "delta_presence", "min": 0.0, "max": 0.6}, 0.0),
    (5, {"model": "delta_presence", "min": 0.2, "max": 0.8}, 0.05),
    (6, {"model": "delta_presence", "min": 0.3, "max": 0.7}, 0.1),
    (7, {"model": "delta_presence", "min": 0.1, "max": 0.9}, 0.02),
]


@pytest.mark.parametrize("seed,spec,suppression", CASES)
def test_search_matches_brute_force(seed, spec, suppression):
    pop, sample, hierarchies = _toy(seed)
    qis = ["age", "zip", "sex"]
    table = PopulationTable.from_frame(pop, name="pop")
    model = model_from_dict(spec).with_population(table)
    rows = {q: [list(r) for r in hierarchies[q].rows] for q in qis}
    best = oracle.brute_force(sample, rows, qis, [spec], suppression, population=pop)
    if best is None:
        with pytest.raises(ParameterError, match="no generalization"):
            optimal_generalization(
                sample,
                quasi_identifiers=qis,
                hierarchies=hierarchies,
                models=[model],
                suppression=suppression,
            )
        return
    result = optimal_generalization(
        sample,
        quasi_identifiers=qis,
        hierarchies=hierarchies,
        models=[model],
        suppression=suppression,
    )
    assert tuple(result.levels[q] for q in qis) == best[1]
    assert result.suppressed == best[3]
    assert result.information_loss == pytest.approx(best[0][0], abs=1e-9)


# -- monotonicity claims ----------------------------------------------------------------------


def _node_passes(sample, pop, hierarchies, qis, spec, levels, suppression):
    rows = {q: [list(r) for r in hierarchies[q].rows] for q in qis}
    node = dict(zip(qis, levels))
    gen = oracle.generalize(sample, rows, node)
    ok = oracle.population_class_ok(gen, oracle.generalize(pop, rows, node), qis, spec)
    keys = [tuple(r) for r in gen[qis].itertuples(False)]
    bad = sum(not ok[k] for k in keys)
    return bad <= int(suppression * len(sample) + 1e-9)


def _violations(spec, seeds, suppression):
    """Pairs (node, a direct generalization) where the node passes and the generalization
    fails: what a monotonic claim rules out."""
    found = 0
    qis = ["age", "zip", "sex"]
    for seed in seeds:
        pop, sample, hierarchies = _toy(seed, people=80)
        heights = [hierarchies[q].height for q in qis]
        memo = {}
        for levels in itertools.product(*[range(h) for h in heights]):
            memo[levels] = _node_passes(sample, pop, hierarchies, qis, spec, levels, suppression)
        for levels, ok in memo.items():
            for i in range(len(qis)):
                up = tuple(lv + (j == i) for j, lv in enumerate(levels))
                if ok and up in memo and not memo[up]:
                    found += 1
    return found


def test_k_map_is_monotonic_as_it_claims():
    for spec in ({"model": "k_map", "k": 3}, {"model": "k_map", "k": 6}):
        assert KMap.monotonic
        assert _violations(spec, seeds=range(3), suppression=0.05) == 0


def test_delta_presence_breaks_a_monotonic_claim():
    # the property the search would rely on fails for δ-presence on random tables: a model
    # declared monotonic with this behaviour would make the search skip better nodes
    for spec in (
        {"model": "delta_presence", "min": 0.4, "max": 1.0},  # δmin: merging dilutes
        {"model": "delta_presence", "min": 0.0, "max": 0.6},  # δmax: merging concentrates
    ):
        assert _violations(spec, seeds=range(3), suppression=0.05) > 0
    assert not DeltaPresence.monotonic


class _ClaimedMonotonic(DeltaPresence):
    monotonic = True  # the wrong claim


def test_a_wrong_monotonic_claim_makes_the_search_miss_the_optimum():
    qis = ["age", "zip", "sex"]
    missed = 0
    for seed in range(6):
        pop, sample, hierarchies = _toy(seed, people=80)
        spec = {"model": "delta_presence", "min": 0.4, "max": 1.0}
        rows = {q: [list(r) for r in hierarchies[q].rows] for q in qis}
        best = oracle.brute_force(sample, rows, qis, [spec], 0.05, population=pop)
        wrong = _ClaimedMonotonic(0.4, 1.0).with_population(PopulationTable.from_frame(pop))
        try:
            got = optimal_generalization(
                sample, quasi_identifiers=qis, hierarchies=hierarchies, models=[wrong],
                suppression=0.05,
            )  # fmt: skip
            found = tuple(got.levels[q] for q in qis)
        except ParameterError:
            found = None
        missed += best is not None and found != best[1]
    assert missed > 0


# -- the release path -------------------------------------------------------------------------


def _plan(models):
    return plan_from_dict(
        {
            "quasi_identifiers": QIS,
            "hierarchies": {q: {"rows": [list(r) for r in HIER[q].rows]} for q in QIS},
            "steps": [{"kind": "optimal_generalization", "params": {"k": 1, "models": models}}],
        }
    )


def test_a_plan_judges_k_map_and_delta_presence_against_the_population():
    plan = _plan([{"model": "k_map", "k": 2}, {"model": "delta_presence", "min": 0.0, "max": 0.5}])
    out, report = apply_plan(SAMPLE, plan, rng=np.random.default_rng(0), population=_population())
    step = report.to_dict()["steps"][0]
    assert step["levels"] == {"age": 1, "zip": 2}
    assert step["population"] == {"name": "people.csv", "rows": 12}
    checks = {c["model"]["model"]: c for c in step["model_checks"]}
    assert checks["k_map"]["satisfied"] and checks["k_map"]["value"] == 6
    assert checks["delta_presence"]["satisfied"]
    assert checks["delta_presence"]["value"] == pytest.approx(0.5)
    after = report.to_dict()["risk_after"]
    assert after["population_table"] == {"name": "people.csv", "rows": 12}
    assert {c["model"]["model"] for c in after["population_models"]} == {
        "k_map",
        "delta_presence",
    }


def test_the_published_report_leaves_out_the_population_tables_figures():
    """The population is another dataset of the team (raw data): analysts read each check's
    verdict and the released records that fail, not the population's counts, name or size."""
    from anonweb.core.release.report import published_report

    plan = _plan([{"model": "k_map", "k": 2}, {"model": "delta_presence", "min": 0.0, "max": 0.5}])
    _, report = apply_plan(SAMPLE, plan, rng=np.random.default_rng(0), population=_population())
    internal = report.to_dict()
    public = published_report(internal, plan)
    step = public["steps"][0]
    assert "population" not in step
    by_model = {c["model"]["model"]: c for c in step["model_checks"]}
    assert "value" not in by_model["k_map"] and "value" not in by_model["delta_presence"]
    assert by_model["k_map"]["satisfied"] and by_model["delta_presence"]["satisfied"]
    assert by_model["k_anonymity"]["value"] == internal["steps"][0]["model_checks"][0]["value"]
    after = public["risk_after"]
    assert "population_table" not in after
    assert all("value" not in c for c in after["population_models"])
    assert "people.csv" not in json.dumps(public)
    # the internal report keeps them for the officers
    assert internal["risk_after"]["population_table"] == {"name": "people.csv", "rows": 12}


def test_a_plan_without_the_population_is_refused_with_a_reason():
    plan = _plan([{"model": "delta_presence", "min": 0.0, "max": 0.5}])
    with pytest.raises(ParameterError, match="needs a population table"):
        apply_plan(SAMPLE, plan, rng=np.random.default_rng(0))
