"""The search judges the models that are not monotonic on the largest classes first and stops
judging a node once its failing records pass the suppression limit
(``_Checker._judge_others``): every node must get the verdict that judging each of its classes
gives, and a node accepted must suppress exactly the classes that fail, whether it is checked
on its own or in a batch rolled up from finer nodes."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anonweb.core.models import KAnonymity
from anonweb.core.models.beta_likeness import BetaLikeness
from anonweb.core.models.counts import ClassData
from anonweb.core.models.criteria import DeltaDisclosure, TCloseness
from anonweb.core.search import flash
from anonweb.core.search.flash import _Checker
from anonweb.core.search.lattice import EncodedTable
from tests.core.search.test_suppression_bounds import TREE, _table

QIS = ["age", "zip", "sex"]
MODELS = {
    "delta": lambda: DeltaDisclosure("disease", 1.2),
    "beta": lambda: BetaLikeness("disease", 0.8),
    "t_equal": lambda: TCloseness("disease", 0.2),
    "t_hier": lambda: TCloseness("disease", 0.15, "hierarchical", TREE),
}


def _plain(checker: _Checker, table: EncodedTable, model, k: int, node) -> tuple[bool, np.ndarray]:
    """Every class of the node judged: the classes failing k or the model, and whether the
    records in them are within the limit."""
    ct = table.classes(node, None, [0])
    domain = checker.domains["disease"]
    data = ClassData(ct.sizes, histograms=lambda name: (domain, ct.hists[0]))
    fail = (ct.sizes < k) | ~model.passes(data)
    return bool(ct.sizes[fail].sum() <= checker.max_out), fail


def _same_classes(ev, fail: np.ndarray, table: EncodedTable, node) -> bool:
    """The accepted node suppresses the classes ``fail`` marks (compared by their
    representative distinct row: a roll-up may number the classes otherwise)."""
    direct = table.classes(node, None, [0])
    inv, _ = table.group(node)
    mine = sorted(inv[ev.ct.rep[ev.out_classes]].tolist())
    theirs = sorted(inv[direct.rep[fail]].tolist())
    return mine == theirs


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    name=st.sampled_from(sorted(MODELS)),
    k=st.integers(1, 4),
    suppression=st.sampled_from([0.0, 0.02, 0.05, 0.15]),
)
def test_every_node_gets_the_verdict_of_judging_each_class(seed, name, k, suppression):
    df, hierarchies = _table(seed, 260)
    model = MODELS[name]()
    table = EncodedTable(df, QIS, hierarchies, ["disease"])
    checker = _Checker(table, [KAnonymity(k), model], suppression)
    nodes = list(itertools.product(*[range(h) for h in table.heights]))
    bottom = table.classes((0, 0, 0), None, [0])
    batched = checker.check_many(np.array(nodes), [bottom] * len(nodes))
    for node, many in zip(nodes, batched):
        ok, fail = _plain(checker, table, model, k, node)
        for ev in (checker.check(node), many):
            assert ev.ok == ok, (node, ev.mono_ok)
            if ev.ok:
                assert _same_classes(ev, fail, table, node), node


@pytest.mark.parametrize("large", [0, 1, 2, 8])
def test_the_share_of_the_limit_judged_first_changes_no_verdict(large, monkeypatch):
    # 0: every class judged in one go, as before the classes were ordered by size
    df, hierarchies = _table(5, 400)
    table = EncodedTable(df, QIS, hierarchies, ["disease"])
    monkeypatch.setattr(flash, "LARGE_CLASS", large)
    checker = _Checker(table, [KAnonymity(2), DeltaDisclosure("disease", 1.0)], 0.05)
    for node in itertools.product(*[range(h) for h in table.heights]):
        ok, fail = _plain(checker, table, DeltaDisclosure("disease", 1.0), 2, node)
        ev = checker.check(node)
        assert ev.ok == ok
        if ok:
            assert _same_classes(ev, fail, table, node)


def test_a_node_rejected_on_its_largest_classes_is_rejected_without_the_rest(monkeypatch):
    # the limit is 20 records; the node's one large class fails δ-disclosure on its own, so
    # its small classes are never judged (and a node that passes has every class judged)
    df, hierarchies = _table(5, 400)
    table = EncodedTable(df, QIS, hierarchies, ["disease"])
    model = DeltaDisclosure("disease", 1.0)
    checker = _Checker(table, [model], 0.05)
    judged: list[int] = []
    passes = DeltaDisclosure.passes

    def counting(self, data):
        judged.append(len(data))
        return passes(self, data)

    monkeypatch.setattr(DeltaDisclosure, "passes", counting)
    node = (4, 0, 1)  # age in wide bands, zip as it is, sex hidden: a few large classes
    ct = table.classes(node, None, [0])
    assert (ct.sizes * flash.LARGE_CLASS > checker.max_out).any()
    ev = checker.check(node)
    ok, _ = _plain(checker, table, model, 1, node)
    assert ev.ok == ok and not ok
    assert sum(judged[:-1]) < len(ct.sizes)  # the last call is _plain's, on every class
    assert math.isclose(checker.max_out, 20)
