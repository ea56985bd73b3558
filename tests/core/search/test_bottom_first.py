"""The bottom node, accepted with nothing suppressed, ends the search: brute force over small
lattices, every metric and aggregate."""

from __future__ import annotations

import itertools

import pandas as pd
import pytest

from anonweb.core.models import AverageRisk, DistinctL, KAnonymity
from anonweb.core.search.flash import _Checker, optimal_generalization
from anonweb.core.search.lattice import EncodedTable
from anonweb.core.search.metrics import AGGREGATES, make_metric
from tests.core.search.test_search import _brute_force, _toy

QIS = ["age", "zip", "sex"]
OBJECTIVES = [
    *((m, a) for m in ("loss", "entropy", "precision", "height") for a in AGGREGATES),
    ("discernibility", None),
    ("aecs", None),
]


def _twice(seed: int, n: int = 50):
    """A toy table with every record twice: each class of the bottom node holds two or more."""
    df, hierarchies = _toy(seed, n)
    return pd.concat([df, df], ignore_index=True), hierarchies


def _exhaustive(df, hierarchies, models, suppression, metric, aggregate):
    """Every node checked and scored: the best key, and the nodes that reach it."""
    table = EncodedTable(df, QIS, hierarchies, sorted({m.sensitive for m in models[1:]}))
    checker = _Checker(table, models, suppression)
    scorer = make_metric(metric, table, aggregate)
    keys = {}
    for node in itertools.product(*[range(h) for h in table.heights]):
        ev = checker.check(node)
        if not ev.ok:
            continue
        if scorer.per_qi:
            values = scorer.actual(node, ev.ct.rep[ev.out_classes], ev.ct.sizes[ev.out_classes])
        else:
            values = scorer.from_classes(ev.ct.sizes, ev.out_classes)
        keys[node] = tuple(scorer.key(values[None, :])[0])
    best = min(keys.values())
    return best, [node for node, key in keys.items() if key == best]


@pytest.mark.parametrize("metric,aggregate", OBJECTIVES)
@pytest.mark.parametrize("seed,k,suppression", [(21, 2, 0.0), (22, 2, 0.05)])
def test_a_bottom_needing_no_suppression_is_the_optimum_under_every_metric(
    metric, aggregate, seed, k, suppression
):
    df, hierarchies = _twice(seed)
    best, winners = _exhaustive(df, hierarchies, [KAnonymity(k)], suppression, metric, aggregate)
    result = optimal_generalization(
        df,
        quasi_identifiers=QIS,
        hierarchies=hierarchies,
        k=k,
        suppression=suppression,
        metric=metric,
        aggregate=aggregate,
    )
    # the exhaustive search agrees: the bottom reaches the least key, and among the nodes that
    # tie with it, it has the least sum of levels
    assert (0, 0, 0) in winners
    assert tuple(result.levels[q] for q in QIS) == (0, 0, 0)
    assert result.suppressed == 0 and result.k >= k
    assert result.search["nodes_checked"] == 1 and result.search["optimal"] is True


@pytest.mark.parametrize("seed", [21, 23])
def test_the_bottom_first_agrees_with_the_independent_brute_force(seed):
    df, hierarchies = _twice(seed)
    score, node, losses, suppressed = _brute_force(df, hierarchies, QIS, 2, 0.0, [])
    result = optimal_generalization(df, quasi_identifiers=QIS, hierarchies=hierarchies, k=2)
    assert node == (0, 0, 0) and suppressed == 0
    assert tuple(result.levels[q] for q in QIS) == node
    assert [result.loss_per_qi[q] for q in QIS] == pytest.approx(losses, abs=1e-12)


ILLNESSES = ["flu", "ulcer", "cancer", "gastritis"]


@pytest.mark.parametrize("seed,same", [(23, 2), (24, 4), (25, 4), (27, 4)])
def test_a_bottom_accepted_only_with_suppression_does_not_end_the_search(seed, same):
    # every record twice, the copy's disease changed except in the first ``same`` records:
    # distinct 2-diversity suppresses the bottom's classes of those, within the 10 % limit, and
    # a coarser node that suppresses less is the optimum (by the independent brute force)
    df, hierarchies = _toy(seed, 50)
    copy = df.copy()
    shifted = dict(zip(ILLNESSES, ILLNESSES[1:] + ILLNESSES[:1]))
    copy.loc[same:, "disease"] = copy.loc[same:, "disease"].map(shifted)
    df = pd.concat([df, copy], ignore_index=True)
    models = [DistinctL("disease", 2)]
    table = EncodedTable(df, QIS, hierarchies, ["disease"])
    bottom = _Checker(table, [KAnonymity(2), *models], 0.1).check((0, 0, 0))
    assert bottom.ok and bottom.out_classes.any()
    score, node, losses, suppressed = _brute_force(df, hierarchies, QIS, 2, 0.1, models)
    assert node != (0, 0, 0)
    result = optimal_generalization(
        df, quasi_identifiers=QIS, hierarchies=hierarchies, k=2, suppression=0.1, models=models
    )
    assert tuple(result.levels[q] for q in QIS) == node
    assert result.suppressed == suppressed
    assert result.information_loss == pytest.approx(score[0], abs=1e-9)


@pytest.mark.parametrize("seed,classes_out", [(20, 2), (24, 1), (25, 3)])
def test_a_bottom_meeting_average_risk_only_by_suppressing_does_not_end_the_search(
    seed, classes_out
):
    # every record twice (no distinct row below 2 records: the bottom is tried first); the
    # ceiling sits just above the bottom's average risk with ``classes_out`` classes of 2
    # suppressed, so the bottom passes only by suppressing them, and a coarser node that
    # suppresses nothing is the optimum (by the independent brute force)
    df, hierarchies = _toy(seed, 50)
    df = pd.concat([df, df], ignore_index=True)
    classes = df.groupby(QIS).ngroups
    models = [AverageRisk((classes - classes_out) / (len(df) - 2 * classes_out) + 1e-9)]
    table = EncodedTable(df, QIS, hierarchies, ["disease"])
    bottom = _Checker(table, [KAnonymity(1), *models], 0.1).check((0, 0, 0))
    assert bottom.ok and int(bottom.ct.sizes[bottom.out_classes].sum()) == 2 * classes_out
    score, node, losses, suppressed = _brute_force(df, hierarchies, QIS, 1, 0.1, models)
    assert node != (0, 0, 0)
    result = optimal_generalization(
        df, quasi_identifiers=QIS, hierarchies=hierarchies, k=1, suppression=0.1, models=models
    )
    assert tuple(result.levels[q] for q in QIS) == node
    assert result.suppressed == suppressed
    assert result.information_loss == pytest.approx(score[0], abs=1e-9)
