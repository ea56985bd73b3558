"""δ-disclosure against a plain reading of its definition, one class at a time in Python, on
random tables: the model's check from a table's records (the release's path) and from the
dense histogram the search keeps must both reject exactly the classes in which some value the
class holds has |log2(p(value | class) / p(value))| >= δ, p(value) its
share in the whole table, suppressed records included and left out of every class."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from anonweb.core.models import DeltaDisclosure, class_data
from anonweb.core.models.counts import ClassData
from anonweb.core.models.delta_disclosure import delta_all_values

VALUES = ["a", "b", "c", "d", None]


def _plain(df: pd.DataFrame, keep: np.ndarray, delta: float) -> dict[tuple, bool | None]:
    """Per class of the kept records (keyed by its quasi-identifiers): whether it passes, or
    None where some ratio's logarithm lies within 1e-9 of δ (float rounding decides there:
    the boundaries are worked by hand in test_delta_disclosure_boundaries)."""
    total = len(df)
    in_table: dict[object, int] = {}
    for v in df["S"]:
        in_table[v] = in_table.get(v, 0) + 1
    classes: dict[tuple, list[object]] = {}
    for (q1, q2, s), kept in zip(df[["Q1", "Q2", "S"]].itertuples(index=False), keep):
        if kept:
            classes.setdefault((q1, q2), []).append(s)
    out: dict[tuple, bool | None] = {}
    for key, held in classes.items():
        verdict: bool | None = True
        for v in set(held):  # only the values the class holds (a missing one is left out)
            ratio = Fraction(held.count(v), len(held)) / Fraction(in_table[v], total)
            distance = abs(math.log2(ratio))
            if abs(distance - delta) < 1e-9:
                verdict = None
                break
            if distance >= delta:
                verdict = False
        out[key] = verdict
    return out


@settings(max_examples=150, deadline=None)
@given(
    seed=st.integers(0, 1_000_000),
    rows=st.integers(1, 120),
    q1=st.integers(1, 4),  # 1: a table of one class (with Q2 of one value too)
    q2=st.integers(1, 3),
    delta=st.sampled_from([0.25, 0.5, 1.0, 1.5, 2.0, 3.0]),
    suppressed=st.floats(0.0, 0.6),
)
def test_the_checks_reject_exactly_the_classes_the_definition_rejects(
    seed, rows, q1, q2, delta, suppressed
):
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "Q1": rng.integers(0, q1, rows),
            "Q2": rng.choice(["x", "y", "z"][:q2], rows),
            "S": rng.choice(np.array(VALUES, dtype=object), rows, p=[0.4, 0.3, 0.15, 0.1, 0.05]),
        }
    )
    keep = rng.random(rows) >= suppressed
    model = DeltaDisclosure("S", delta)
    data = class_data(df, quasi_identifiers=["Q1", "Q2"], sensitive=["S"], exclude=~keep)
    sparse = model.passes(data)
    # the search's form: a dense (classes x values) matrix, values the class lacks at 0
    sc = data.sensitive("S")
    hist = np.zeros((sc.n_classes, len(sc.values)))
    hist[sc.cls, sc.val] = sc.cnt
    dense = model.passes(ClassData(data.sizes, histograms=lambda name: (sc.domain, hist)))
    assert sparse.tolist() == dense.tolist()
    expected = _plain(df, keep, delta)
    assert data.record_class is not None
    kept = df[keep].reset_index(drop=True)
    assert len(expected) == len(data)
    for (a, b), cls in zip(kept[["Q1", "Q2"]].itertuples(index=False), data.record_class):
        want = expected[(a, b)]
        if want is not None:
            assert bool(sparse[cls]) is want, ((a, b), delta)


def test_a_value_a_class_lacks_is_left_out_as_arx_does():
    # The table holds x and y half and half; class g holds only x: p(x | g) = 1 against 1/2,
    # log2 2 = 1, and y, absent from g, is not compared (log2 0 would be -inf). So g passes
    # at δ = 1.5, while the stricter reading of the risk profile puts it at infinity.
    df = pd.DataFrame({"G": list("gghhhh"), "S": list("xxxyyy")})
    data = class_data(df, quasi_identifiers=["G"], sensitive=["S"])
    assert DeltaDisclosure("S", 1.5).passes(data).tolist() == [True, True]
    assert delta_all_values(data.sensitive("S")).tolist()[0] == math.inf


def test_suppressed_records_count_in_the_table_but_in_no_class():
    # x is 2 of 8 records in the table (the suppressed ones included): a kept class of 2
    # records holding one x has p(x | class) = 1/2 against 1/4, log2 2 = 1. Without the
    # suppressed records x would be 2 of 4, and the class would match the table exactly.
    df = pd.DataFrame({"G": list("ggsssshh"), "S": list("xyyyyyxy")})
    keep = np.array([True, True, False, False, False, False, True, True])
    data = class_data(df, quasi_identifiers=["G"], sensitive=["S"], exclude=~keep)
    assert len(data) == 2
    assert DeltaDisclosure("S", 1.0).passes(data).tolist() == [False, False]
    assert DeltaDisclosure("S", 1.01).passes(data).tolist() == [True, True]
