"""What-if: one node by hand, against a hand-worked table, the risk profile of the generalized
table computed the long way, and the search's own optimum."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from anonweb.core.assessment.profile import assess_risk
from anonweb.core.errors import ParameterError
from anonweb.core.io.frame import read_table
from anonweb.core.io.hierarchy import Hierarchy, read_hierarchy
from anonweb.core.io.hierarchy_builders import interval_hierarchy, mask_hierarchy
from anonweb.core.models import AverageRisk, DistinctL, KAnonymity, TCloseness
from anonweb.core.models.population_uniqueness import PopulationUniqueness
from anonweb.core.search.flash import optimal_generalization
from anonweb.core.search.whatif import WhatIfTable

QI8 = [
    "age",
    "education",
    "marital-status",
    "native-country",
    "race",
    "salary-class",
    "sex",
    "workclass",
]


@pytest.fixture
def small():
    df = pd.DataFrame(
        {
            "age": [21, 22, 23, 24, 35, 36, 37, 51, 52, 70],
            "zip": ["1301", "1302", "1301", "1302", "1401", "1402", "1401", "1501", "1502", "1601"],
            "disease": ["flu", "flu", "cold", "flu", "hiv", "hiv", "hiv", "flu", "cold", "flu"],
        }
    )
    hierarchies = {
        "age": interval_hierarchy(df["age"], width=10, start=20, attribute="age"),
        "zip": mask_hierarchy(df["zip"], attribute="zip"),
    }
    return df, hierarchies


def test_hand_worked_node(small):
    df, hierarchies = small
    w = WhatIfTable(
        df, quasi_identifiers=["age", "zip"], hierarchies=hierarchies, sensitive=["disease"]
    )
    before = w.table.n
    # age in decades, zip to 3 digits: classes {20s,130*}=4, {30s,140*}=3, {50s,150*}=2, {70s,160*}=1
    r = w.evaluate({"age": 1, "zip": 1}, suppression=0.0)
    assert (r.profile.k, r.profile.anonymity.classes, r.suppressed) == (1, 4, 0)
    assert r.profile.risk.prosecutor_max == 1.0
    assert r.profile.sensitive["disease"].diversity.l_distinct == 1  # {30s,140*} all hiv
    # 10% suppression (1 record): the unique 70-year-old goes, k becomes 2
    r = w.evaluate({"age": 1, "zip": 1}, suppression=0.1)
    assert (r.profile.k, r.profile.anonymity.classes, r.suppressed) == (2, 3, 1)
    assert r.profile.anonymity.rows == 9 and r.rows == 10
    assert r.profile.risk.prosecutor_max == 0.5
    # 20%: still 2 records at most; the class of 2 cannot go with the unique (3 records)
    assert w.evaluate({"age": 1, "zip": 1}, suppression=0.2).suppressed == 1
    # 30%: the classes of 1 and 2 go, k = 3
    r = w.evaluate({"age": 1, "zip": 1}, suppression=0.3)
    assert (r.profile.k, r.suppressed) == (3, 3)
    # a model: 3-anonymity needs 3 records suppressed; with a 20% limit it fails
    r = w.evaluate({"age": 1, "zip": 1}, suppression=0.2, k=3)
    assert (r.satisfied, r.required, r.suppressed, r.profile.k) == (False, 3, 0, 1)
    r = w.evaluate({"age": 1, "zip": 1}, suppression=0.3, models=[DistinctL("disease", 2)])
    assert (r.satisfied, r.required) == (False, 4)
    assert w.table.n == before


def test_table_wide_models_suppress_the_smallest_classes(small):
    df, hierarchies = small
    w = WhatIfTable(df, quasi_identifiers=["age", "zip"], hierarchies=hierarchies)
    node = {"age": 1, "zip": 1}  # classes of 4, 3, 2 and 1: average risk 4/10
    # the unique goes (3/9 = 0.333), within a 10% limit
    r = w.evaluate(node, suppression=0.1, models=[AverageRisk(0.35)])
    assert (r.satisfied, r.required, r.suppressed, r.profile.k) == (True, 1, 1, 2)
    # 0.3 needs the class of 2 too (2/7 = 0.286): 3 records, more than 20% allows
    r = w.evaluate(node, suppression=0.2, models=[AverageRisk(0.3)])
    assert (r.satisfied, r.required, r.suppressed, r.profile.k) == (False, 3, 0, 1)
    r = w.evaluate(node, suppression=0.3, models=[AverageRisk(0.3)])
    assert (r.satisfied, r.required, r.suppressed, r.profile.k) == (True, 3, 3, 3)
    assert r.profile.anonymity.classes == 2
    # with k = 2 the unique goes for k, the class of 2 for the average risk
    r = w.evaluate(node, suppression=0.3, k=2, models=[AverageRisk(0.3)])
    assert (r.satisfied, r.required, r.suppressed) == (True, 3, 3)
    # nothing to suppress where the ceiling holds already
    r = w.evaluate(node, suppression=0.3, models=[AverageRisk(0.4)])
    assert (r.satisfied, r.required, r.suppressed) == (True, 0, 0)


def test_top_node_is_one_class(small):
    df, hierarchies = small
    w = WhatIfTable(df, quasi_identifiers=["age", "zip"], hierarchies=hierarchies)
    top = {q: h - 1 for q, h in w.heights.items()}
    r = w.evaluate(top)
    assert (r.profile.k, r.profile.anonymity.classes, r.suppressed) == (10, 1, 0)
    assert r.information_loss == pytest.approx(1.0)
    assert w.evaluate({}).information_loss == 0.0


def test_refuses_bad_levels(small):
    df, hierarchies = small
    w = WhatIfTable(df, quasi_identifiers=["age", "zip"], hierarchies=hierarchies)
    with pytest.raises(ParameterError, match="out of range"):
        w.evaluate({"age": 9})
    with pytest.raises(ParameterError, match="not a quasi-identifier"):
        w.evaluate({"disease": 1})
    with pytest.raises(ParameterError, match=r"\[0, 1\)"):
        w.evaluate({}, suppression=1.0)


def _generalized(df, hierarchies, levels):
    out = df.copy()
    for col, lv in levels.items():
        out[col] = hierarchies[col].generalize(df[col], lv)
    return out


@pytest.fixture(scope="module")
def adult(datasets_dir):
    arx = datasets_dir / "arx"
    df = read_table(arx / "adult.csv", sep=";")
    hierarchies = {q: read_hierarchy(arx / f"adult_hierarchy_{q}.csv", attribute=q) for q in QI8}
    return df, hierarchies


@pytest.mark.shared_data
@pytest.mark.parametrize(
    "levels",
    [(0, 0, 0, 0, 0, 0, 0, 0), (2, 1, 1, 1, 0, 0, 0, 1), (4, 3, 2, 2, 1, 1, 1, 2)],
)
def test_profile_equals_the_generalized_table_assessed(adult, levels):
    """No suppression: the profile of the node is the risk profile of the table generalized by
    the hierarchies and assessed from scratch (grouping the records, not the lattice)."""
    df, hierarchies = adult
    lv = dict(zip(QI8, levels))
    w = WhatIfTable(df, quasi_identifiers=QI8, hierarchies=hierarchies, sensitive=["occupation"])
    got = w.evaluate(lv).to_dict()
    want = assess_risk(
        _generalized(df, hierarchies, lv), quasi_identifiers=QI8, sensitive=["occupation"]
    ).to_dict()
    for key in ("k", "classes", "uniques", "class_sizes", "prosecutor_risk", "records_at_risk"):
        assert got[key] == want[key], key
    g, e = got["sensitive"]["occupation"], want["sensitive"]["occupation"]
    for key in (
        "l_distinct",
        "l_recursive",
        "homogeneous_classes",
        "homogeneous_records",
        "t_distance",
    ):
        assert g[key] == e[key], key
    for key in ("l_entropy", "t_closeness", "delta_disclosure"):
        assert g[key] == pytest.approx(e[key], abs=1e-12), key


@pytest.mark.shared_data
@pytest.mark.parametrize(
    "k, s, models",
    [
        (5, 0.02, []),
        (10, 0.02, []),
        (5, 0.02, [TCloseness("occupation", 0.2)]),
        (1, 0.02, [AverageRisk(0.05)]),
        (1, 0.02, [PopulationUniqueness(0.001, 300_000, "zayatz")]),
        (2, 0.02, [AverageRisk(0.05), DistinctL("occupation", 2)]),
    ],
)
def test_the_search_optimum_seen_through_what_if(adult, k, s, models):
    """The node the search picks, evaluated by hand with the same models: the same records
    suppressed, the same k and classes, the same information loss to the last digit."""
    df, hierarchies = adult
    found = optimal_generalization(
        df, quasi_identifiers=QI8, hierarchies=hierarchies, models=models, k=k, suppression=s
    )
    w = WhatIfTable(df, quasi_identifiers=QI8, hierarchies=hierarchies, sensitive=["occupation"])
    r = w.evaluate(found.levels, suppression=s, models=[KAnonymity(k), *models])
    assert r.satisfied is True
    assert (r.suppressed, r.profile.k, r.profile.anonymity.classes) == (
        found.suppressed,
        found.k,
        found.classes,
    )
    assert r.information_loss == found.information_loss
    assert r.loss_per_qi == found.loss_per_qi
    # the kept records, checked by the models' own checks on the generalized table
    out = found.apply(df)
    kept = out[~found.row_suppressed]
    want = assess_risk(kept, quasi_identifiers=QI8, sensitive=["occupation"]).to_dict()
    got = r.to_dict()
    assert got["prosecutor_risk"] == want["prosecutor_risk"]
    assert (
        got["sensitive"]["occupation"]["l_distinct"]
        == want["sensitive"]["occupation"]["l_distinct"]
    )


def test_missing_values_and_population(small):
    df, hierarchies = small
    df = df.assign(age=df["age"].astype("Int64"))
    df.loc[[0, 9], "age"] = pd.NA
    h = dict(hierarchies, age=interval_hierarchy(df["age"], width=10, start=20, attribute="age"))
    w = WhatIfTable(df, quasi_identifiers=["age", "zip"], hierarchies=h, population_size=1000)
    r = w.evaluate({"age": 1, "zip": 3})
    want = assess_risk(_generalized(df, h, {"age": 1, "zip": 3}), quasi_identifiers=["age", "zip"])
    assert r.profile.k == want.k
    assert r.profile.anonymity.classes == want.anonymity.classes
    assert r.to_dict()["population"] is not None
    assert np.isfinite(r.information_loss)


def test_hierarchy_objects_only(small):
    df, _ = small
    with pytest.raises(ParameterError):
        WhatIfTable(df, quasi_identifiers=["age"], hierarchies={})
    h = Hierarchy(rows=tuple((str(a), "*") for a in df["age"]), attribute="age")
    assert WhatIfTable(df, quasi_identifiers=["age"], hierarchies={"age": h}).heights == {"age": 2}


@pytest.mark.shared_data
def test_alternatives_are_a_pareto_front_of_accepted_nodes(adult):
    df, hierarchies = adult
    found = optimal_generalization(
        df, quasi_identifiers=QI8, hierarchies=hierarchies, k=5, suppression=0.02, alternatives=30
    )
    alts = found.alternatives
    assert alts and sum(a["optimal"] for a in alts) == 1
    (opt,) = [a for a in alts if a["optimal"]]
    assert opt["levels"] == found.levels and opt["information_loss"] == found.information_loss
    # sorted by loss, risk falling: nothing on the front is dominated
    losses = [a["information_loss"] for a in alts]
    assert losses == sorted(losses) and losses[0] == found.information_loss
    w = WhatIfTable(df, quasi_identifiers=QI8, hierarchies=hierarchies)
    for a in alts:
        r = w.evaluate(a["levels"], suppression=0.02, k=5)
        assert r.satisfied and r.suppressed == a["suppressed"] and r.profile.k == a["k"]
        assert r.information_loss == a["information_loss"]
    # a node picked from them runs as fixed levels: the same figures, no search
    pick = alts[-1]
    fixed = optimal_generalization(
        df,
        quasi_identifiers=QI8,
        hierarchies=hierarchies,
        k=5,
        suppression=0.02,
        levels=pick["levels"],
    )
    assert fixed.levels == pick["levels"] and fixed.suppressed == pick["suppressed"]
    assert fixed.search["algorithm"] == "fixed levels"
    with pytest.raises(ParameterError, match="no generalization satisfies"):
        optimal_generalization(
            df, quasi_identifiers=QI8, hierarchies=hierarchies, k=5, levels={"age": 0}
        )


def _random_table(seed, rows, cards, sensitive_card):
    """A table of string quasi-identifiers q0.. with three-level hierarchies (value, value // 7,
    ``*``) and a sensitive column."""
    rng = np.random.default_rng(seed)
    cols = {f"q{i}": rng.integers(0, c, rows) for i, c in enumerate(cards)}
    df = pd.DataFrame({q: [f"v{x}" for x in v] for q, v in cols.items()})
    df["s"] = [f"s{x}" for x in rng.integers(0, sensitive_card, rows)]
    hierarchies = {
        q: Hierarchy(rows=tuple((f"v{x}", f"g{x // 7}", "*") for x in range(c)), attribute=q)
        for q, c in zip(cols, cards)
    }
    return df, hierarchies


def _fresh(df, hierarchies, levels, **kw):
    qis = list(hierarchies)
    w = WhatIfTable(df, quasi_identifiers=qis, hierarchies=hierarchies, sensitive=["s"])
    return w.evaluate(levels, **kw).to_dict()


def _rolled_up_calls(monkeypatch):
    calls = []
    real = WhatIfTable._rolled_up

    def counting(self, node, parent):
        calls.append(tuple(node))
        return real(self, node, parent)

    monkeypatch.setattr(WhatIfTable, "_rolled_up", counting)
    return calls


def test_repeats_and_roll_ups_answer_as_a_fresh_table(monkeypatch):
    """Nodes asked one after the other (a repeat, coarser nodes rolled up from kept ones, a
    node beside them) give exactly what a table asked for that node alone gives."""
    df, hierarchies = _random_table(1, 3000, [30, 12, 9, 5], 6)
    qis = list(hierarchies)
    w = WhatIfTable(df, quasi_identifiers=qis, hierarchies=hierarchies, sensitive=["s"])
    rolled = _rolled_up_calls(monkeypatch)
    asks = [
        ((0, 0, 0, 0), {"suppression": 0.05, "k": 3}),
        ((1, 0, 1, 0), {"suppression": 0.05, "k": 3}),
        ((1, 0, 1, 0), {"suppression": 0.0}),  # a repeat
        ((1, 1, 1, 0), {"suppression": 0.05, "models": [DistinctL("s", 2)]}),
        ((2, 1, 1, 1), {"suppression": 0.02, "k": 5}),
        ((0, 1, 0, 1), {"suppression": 0.05, "k": 2}),  # coarser than the first node only
        ((1, 1, 1, 0), {"suppression": 0.05, "models": [DistinctL("s", 2)]}),
    ]
    for levels, kw in asks:
        got = w.evaluate(dict(zip(qis, levels)), **kw).to_dict()
        assert got == _fresh(df, hierarchies, dict(zip(qis, levels)), **kw), levels
    assert (1, 1, 1, 0) in rolled and (2, 1, 1, 1) in rolled
    # and one rolled-up node against the generalized table assessed from scratch
    lv = dict(zip(qis, (2, 1, 1, 1)))
    got = w.evaluate(lv).to_dict()
    want = assess_risk(_generalized(df, hierarchies, lv), quasi_identifiers=qis, sensitive=["s"])
    want = want.to_dict()
    for key in ("k", "classes", "uniques", "class_sizes", "prosecutor_risk"):
        assert got[key] == want[key], key
    for key in (
        "l_distinct",
        "l_recursive",
        "homogeneous_classes",
        "homogeneous_records",
        "t_distance",
    ):
        assert got["sensitive"]["s"][key] == want["sensitive"]["s"][key], key


def test_sparse_counts_when_the_class_matrix_would_outgrow_the_rows(monkeypatch):
    """With more (class, value) pairs than distinct rows the counts are built sparse, from
    the distinct rows of the classes kept: the same figures as the matrix gives."""
    import anonweb.core.search.whatif as whatif

    df, hierarchies = _random_table(2, 2000, [12, 10, 6], 25)
    qis = list(hierarchies)
    assert df[qis].drop_duplicates().shape[0] < df.drop_duplicates().shape[0]
    asks = [
        ((0, 0, 0), {"suppression": 0.3}),
        ((0, 0, 0), {"suppression": 0.0, "models": [DistinctL("s", 2)]}),
        ((1, 0, 0), {"suppression": 0.2, "k": 2}),
    ]
    dense = [_fresh(df, hierarchies, dict(zip(qis, lv)), **kw) for lv, kw in asks]
    monkeypatch.setattr(whatif, "DENSE_MIN", 0)
    w = WhatIfTable(df, quasi_identifiers=qis, hierarchies=hierarchies, sensitive=["s"])
    for (lv, kw), want in zip(asks, dense):
        g = w._node(list(lv))
        assert w._matrix(g, "s") is None  # the sparse path is the one taken
        assert w.evaluate(dict(zip(qis, lv)), **kw).to_dict() == want
    # and against the table assessed from scratch
    got = w.evaluate(dict.fromkeys(qis, 0)).to_dict()["sensitive"]["s"]
    want = assess_risk(df, quasi_identifiers=qis, sensitive=["s"]).to_dict()["sensitive"]["s"]
    for key in (
        "l_distinct",
        "l_recursive",
        "homogeneous_classes",
        "homogeneous_records",
        "t_distance",
    ):
        assert got[key] == want[key], key
    assert got["l_entropy"] == pytest.approx(want["l_entropy"], abs=1e-12)


def test_roll_up_when_the_key_space_overflows_int64(monkeypatch):
    """Eight quasi-identifiers of 300 values: a node's generalized combinations do not fit
    one int64 key, and the roll-up combines them column by column."""
    cards = [300] * 8
    df, hierarchies = _random_table(3, 1500, cards, 4)
    qis = list(hierarchies)
    w = WhatIfTable(df, quasi_identifiers=qis, hierarchies=hierarchies, sensitive=["s"])
    rolled = _rolled_up_calls(monkeypatch)
    w.evaluate(dict.fromkeys(qis, 0))
    coarser = dict(dict.fromkeys(qis, 0), q7=1)
    present = [df[q].nunique() for q in qis[:7]] + [
        df["q7"].str[1:].astype(int).floordiv(7).nunique()
    ]
    assert math.prod(present) >= 2**62
    for kw in ({"suppression": 0.0}, {"suppression": 0.1, "k": 2}):
        assert w.evaluate(coarser, **kw).to_dict() == _fresh(df, hierarchies, coarser, **kw)
    assert rolled == [tuple(coarser.values())]


def test_entries_out_of_row_order_give_the_same_figures():
    """The sensitive counts read each value's (row, count) entries in any order (a merge of
    two spellings of a value leaves them out of order): the same figures as entries in row
    order, dense or sparse."""
    import anonweb.core.search.whatif as whatif
    from anonweb.core.engine.value_cells import ValueCells

    df, hierarchies = _random_table(4, 2500, [9, 8, 5], 7)
    qis = list(hierarchies)
    asks = [((0, 0, 0), {"suppression": 0.05, "k": 3}), ((1, 0, 1), {"suppression": 0.02})]
    ordered = WhatIfTable(df, quasi_identifiers=qis, hierarchies=hierarchies, sensitive=["s"])
    cells = ordered._cells[0]
    assert all(bool((np.diff(cells.value(v)[0]) >= 0).all()) for v in range(cells.n_values))
    shuffled = WhatIfTable(df, quasi_identifiers=qis, hierarchies=hierarchies, sensitive=["s"])
    rng = np.random.default_rng(0)
    order = np.concatenate(
        [s + rng.permutation(e - s) for s, e in zip(cells.starts[:-1], cells.starts[1:])]
    )
    shuffled._cells = [ValueCells(cells.rows[order], cells.counts[order], cells.starts)]
    for dense_min in (whatif.DENSE_MIN, 0):
        whatif.DENSE_MIN, kept = dense_min, whatif.DENSE_MIN
        try:
            for lv, kw in asks:
                levels = dict(zip(qis, lv))
                ordered._nodes.clear()
                shuffled._nodes.clear()
                want = ordered.evaluate(levels, **kw).to_dict()
                assert shuffled.evaluate(levels, **kw).to_dict() == want
        finally:
            whatif.DENSE_MIN = kept
