"""The encoded table's distinct rows, weights and per-record hierarchy rows, against a plain
reference: each record's hierarchy row looked up one by one, then ``np.unique`` over the rows."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anonweb.core.errors import HierarchyError
from anonweb.core.io.hierarchy import parse_hierarchy
from anonweb.core.risk.classes import code_dtype
from anonweb.core.search import lattice
from anonweb.core.search.lattice import EncodedTable, factorize_values

AGE = parse_hierarchy(
    "\n".join(f"{a};{a // 10 * 10}-{a // 10 * 10 + 9};*" for a in range(0, 100)), attribute="age"
)
CITY = parse_hierarchy("a;ab;*\nb;ab;*\nc;cd;*\nd;cd;*\n39;num;*", attribute="city")
TOWN = parse_hierarchy("ab;abcd;*\ncd;abcd;*\nef;ef;*\n39;num;*", attribute="town")
SEX = parse_hierarchy("f;*\nm;*", attribute="sex")


def _reference(df, qis, hierarchies, sensitive):
    cols = []
    for q in qis:
        h = hierarchies[q]
        rows = np.array([h.row_of(v) for v in df[q].tolist()])
        rows[rows == -2] = len(h.rows)  # a missing value: the row past the hierarchy's
        cols.append(rows)
    for s in sensitive:
        cols.append(pd.factorize(df[s], use_na_sentinel=False)[0])
    matrix = np.column_stack(cols)
    base, inverse, counts = np.unique(matrix, axis=0, return_inverse=True, return_counts=True)
    return cols, base, inverse.ravel(), counts


def _table(rng, n, missing):
    age = rng.integers(17, 91, n)
    city = rng.choice(np.array(["a", "b", "c", "d", "39", 39, 39.0], dtype=object), n)
    df = pd.DataFrame(
        {
            "age": age,
            "city": pd.Series(city, dtype=object),
            "sex": rng.choice(["f", "m"], n),
            "job": rng.choice(["x", "y", "z"], n),
        }
    )
    if missing:
        df.loc[rng.random(n) < 0.1, "city"] = None
        df.loc[rng.random(n) < 0.1, "job"] = np.nan
        df["age"] = df["age"].astype(float)
        df.loc[rng.random(n) < 0.05, "age"] = np.nan
    return df


@pytest.mark.parametrize("n", [50, 5_000, 60_000])
@pytest.mark.parametrize("missing", [False, True])
@pytest.mark.parametrize("limit", [1 << 4, 1 << 17])
@pytest.mark.parametrize("fold", [False, True])
def test_distinct_rows_match_a_plain_reference(n, missing, limit, fold, monkeypatch):
    # a small limit renumbers the key after every column: the folding's every branch runs
    monkeypatch.setattr(lattice, "LIMIT", limit)
    if fold:  # a large table's path: codes folded fewest first, the distinct rows sorted after
        monkeypatch.setattr(lattice, "_HASHED_RECORDS", 0)
        monkeypatch.setattr(lattice, "_SMALL_TABLE", 0)
    rng = np.random.default_rng(n + missing)
    df = _table(rng, n, missing)
    # equal texts held by distinct objects (as a file read in chunks may hold them): numbered
    # by object, they are still one value
    df["city"] = pd.Series(
        [("_" + v)[1:] if isinstance(v, str) else v for v in df["city"]], dtype=object
    )
    qis, hier = ["age", "city", "sex"], {"age": AGE, "city": CITY, "sex": SEX}
    table = EncodedTable(df, qis, hier, ["job"])
    cols, base, inverse, counts = _reference(df, qis, hier, ["job"])
    # 39, 39.0 and '39' are one hierarchy row: one distinct row, not three
    assert table.m == len(base)
    assert (table.weights == counts).all()
    assert (table.row_to_base == inverse).all()
    assert table.weights.sum() == n
    for i, q in enumerate(table.qis):
        assert (q.row_index == cols[i]).all()
        for level, codes in enumerate(q.level_codes):
            # read through the compacted codes, for some rows and as the per-level copy
            expected = codes[base[:, i]]
            rows = np.arange(0, table.m, 3)
            assert (table.level_codes(i, level, rows) == expected[rows]).all()
            assert (table.full_codes[i][level] == expected).all()
    assert (table.sa_codes[0] == base[:, 3]).all()


@pytest.mark.parametrize("n", [300, 5_000])
def test_codes_are_numbered_in_the_order_of_the_hierarchy_rows(n):
    # numbers, texts and floats of one line share a code; codes rise with the rows they find
    rng = np.random.default_rng(n)
    pool = np.array(["d", "39", 39, 39.0, "a", None, "c", np.nan], dtype=object)
    values = pd.Series(pool.take(rng.integers(0, len(pool), n)), dtype=object)
    values[:8] = pool  # every value present
    codes, rows = lattice.hierarchy_rows(values, CITY)
    want = np.array([CITY.row_of(v) for v in values.tolist()])
    want[want == -2] = len(CITY.rows)
    assert rows.tolist() == [0, 2, 3, 4, 5]  # a, c, d, 39, missing: ascending, each once
    assert (rows.take(codes) == want).all()
    assert codes.dtype == code_dtype(len(rows))


@pytest.mark.parametrize("small", [True, False])
def test_key_spaces_too_large_to_count_over_are_hashed(monkeypatch, small):
    # two quasi-identifiers of thousands of values each: the keys' space passes what a flag
    # per key could hold, and the records are renumbered by hashing instead
    if not small:
        monkeypatch.setattr(lattice, "_SMALL_TABLE", 0)
        monkeypatch.setattr(lattice, "LIMIT", 1 << 10)
    wide = parse_hierarchy("\n".join(f"{v};{v // 100};*" for v in range(3000)), attribute="wide")
    rng = np.random.default_rng(9)
    n = 2_000
    df = pd.DataFrame(
        {
            "a": rng.integers(0, 3000, n),
            "b": rng.integers(0, 3000, n),
            "sex": rng.choice(["f", "m"], n),
        }
    )
    qis, hier = ["a", "b", "sex"], {"a": wide, "b": wide, "sex": SEX}
    table = EncodedTable(df, qis, hier)
    cols, base, inverse, counts = _reference(df, qis, hier, [])
    assert table.m == len(base)
    assert (table.weights == counts).all()
    assert (table.row_to_base == inverse).all()
    assert np.array_equal(table.qi_rows, base)


def test_an_integer_column_is_numbered_by_value_without_hashing():
    values = pd.Series(np.array([40, 17, 40, 90, 17] * 300), name="age")
    codes, uniques = lattice._value_codes(values)
    assert (uniques[codes] == values.to_numpy()).all()
    assert sorted(uniques.tolist()) == [17, 40, 90]


@pytest.mark.parametrize("few", [1 << 16, 0])
def test_object_columns_factorize_exactly_as_pandas(monkeypatch, few):
    # the distinct objects read at their addresses, or (more of them than ``few``) found by
    # their first cells
    monkeypatch.setattr(lattice, "_FEW_OBJECTS", few)
    rng = np.random.default_rng(1)
    pool = [f"v{i}" for i in range(30)] + [None, np.nan]
    # equal texts held by distinct objects: merged by value
    values = pd.Series(
        [("v" + str(i))[:9] if i < 30 else pool[i] for i in rng.integers(0, 32, 5000)]
    )
    for sentinel in (True, False):
        codes, uniques = factorize_values(values, use_na_sentinel=sentinel)
        ref_codes, ref_uniques = pd.factorize(values, use_na_sentinel=sentinel)
        assert (codes == ref_codes).all()
        assert list(uniques.astype(str)) == list(pd.Index(ref_uniques).astype(str))


def test_a_value_outside_the_hierarchy_is_refused():
    df = pd.DataFrame({"sex": ["f", "m", "x"] * 500})
    with pytest.raises(HierarchyError):
        EncodedTable(df, ["sex"], {"sex": SEX})


def test_distinct_rows_in_key_order_are_read_as_runs():
    """Rows that come sorted on their key are numbered by runs, without hashing: the same
    distinct rows, counts and row-to-distinct map as from the rows shuffled."""
    rng = np.random.default_rng(5)
    cols = [rng.integers(0, r, 5000) for r in (7, 3, 11)]
    radices = [7, 3, 11]
    order = np.lexsort(cols[::-1])
    sorted_cols = [c[order] for c in cols]
    base_s, inv_s, counts_s = lattice._distinct_rows(sorted_cols, radices)
    base_h, inv_h, counts_h = lattice._distinct_rows(cols, radices)
    assert np.array_equal(base_s, base_h) and np.array_equal(counts_s, counts_h)
    assert np.array_equal(inv_s, inv_h[order])
    assert inv_s.dtype == np.int64 and bool((np.diff(inv_s) >= 0).all())
    want = np.unique(np.column_stack(cols), axis=0)
    assert np.array_equal(base_s, want)


def _cells(seed, n, fresh, pool):
    """``n`` cells drawn from ``pool``, each value a tenth as frequent as the one before it
    (rare values are what a sample of the cells misses); a text drawn is, with probability
    ``fresh``, a new object holding the same text (as cells parsed apart hold them), else the
    pool's own object."""
    rng = np.random.default_rng(seed)
    weights = 0.1 ** np.arange(len(pool))
    picks = rng.choice(len(pool), n, p=weights / weights.sum())
    new = rng.random(n) < fresh
    out = np.empty(n, dtype=object)
    out[:] = [
        ("_" + pool[i])[1:] if isinstance(pool[i], str) and f else pool[i]
        for i, f in zip(picks.tolist(), new.tolist())
    ]
    return out


# texts, missing values of each kind, numbers that equal texts' hierarchy rows, other objects
# (texts of two or more characters: a one-character text is one object whatever makes it)
_POOL = ["ab", "cd", "39", 39, None, "ef", 39.0, np.nan, float("nan"), True, (1, 2), b"ab"]
_PATHS = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@_PATHS
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1024, 12_000),
    fresh=st.sampled_from([0.0, 0.001, 0.05, 1.0]),
    distinct=st.integers(1, len(_POOL)),
    sampled=st.sampled_from([1, 3, 64, 4096]),
    slots=st.sampled_from([2, 64, 1 << 22]),
    block=st.sampled_from([1000, 1 << 16]),
)
def test_object_cells_are_numbered_by_the_object_they_hold(
    monkeypatch, seed, n, fresh, distinct, sampled, slots, block
):
    # few cells sampled: the objects not sampled are found by hashing the cells they miss; many
    # new objects, or a table of few slots: every cell hashed. Whatever the way, each cell's
    # code names the very object it holds, and no object twice
    monkeypatch.setattr(lattice, "_SAMPLED_CELLS", sampled)
    monkeypatch.setattr(lattice, "_SLOTS", slots)
    monkeypatch.setattr(lattice, "_SLOT_BLOCK", block)  # a thousand: blocks and a last part
    values = _cells(seed, n, fresh, _POOL[:distinct])
    codes, objects = lattice._value_codes(pd.Series(values))
    objects = objects.to_numpy()
    assert codes.dtype == code_dtype(len(objects))
    assert all(o is v for o, v in zip(objects.take(codes).tolist(), values.tolist()))
    assert len({id(o) for o in objects}) == len(objects) == len(np.unique(codes))


@_PATHS
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1024, 6_000),
    fresh=st.sampled_from([0.0, 0.01, 1.0]),
    sampled=st.sampled_from([1, 64, 4096]),
    fold=st.booleans(),
)
def test_tables_of_shared_and_new_objects_match_the_plain_reference(
    monkeypatch, seed, n, fresh, sampled, fold
):
    monkeypatch.setattr(lattice, "_SAMPLED_CELLS", sampled)
    if fold:
        monkeypatch.setattr(lattice, "_HASHED_RECORDS", 0)
        monkeypatch.setattr(lattice, "_SMALL_TABLE", 0)
    rng = np.random.default_rng(seed)
    df = pd.DataFrame(
        {
            "town": _cells(seed, n, fresh, ["ab", "cd", "39", 39, "ef", 39.0, None, np.nan]),
            "sex": _cells(seed + 1, n, fresh, ["f", "m", None]),
            "age": rng.integers(17, 91, n),
            "job": _cells(seed + 2, n, fresh, ["xy", None, "zz", 3]),
        }
    )
    qis, hier = ["town", "sex", "age"], {"age": AGE, "town": TOWN, "sex": SEX}
    table = EncodedTable(df, qis, hier, ["job"])
    cols, base, inverse, counts = _reference(df, qis, hier, ["job"])
    assert table.m == len(base)
    assert (table.weights == counts).all()
    assert (table.row_to_base == inverse).all()
    for i, q in enumerate(table.qis):
        assert (q.row_index == cols[i]).all()


def test_objects_a_sample_misses_are_numbered_by_the_cells_holding_them(monkeypatch):
    monkeypatch.setattr(lattice, "_SAMPLED_CELLS", 64)
    values = np.array(["ab", "cd"], dtype=object).take(
        np.random.default_rng(3).integers(0, 2, 10_000)
    )
    rare = [("_" + t)[1:] for t in ["ab", "ef", "gh", "ef"]] + [None, 7]
    at = [3, 999, 4321, 5000, 7777, 9999]
    values[at] = np.array(rare, dtype=object)
    assert lattice._slot_codes(values) is not None  # numbered by slot, not every cell hashed
    codes, objects = lattice._value_codes(pd.Series(values))
    objects = objects.to_numpy()
    assert len(objects) == 8  # 'ab' and 'cd', and the six rare objects (equal texts apart)
    assert all(o is v for o, v in zip(objects.take(codes).tolist(), values.tolist()))


def test_objects_below_and_above_the_sampled_ones_are_found(monkeypatch):
    # the rare objects lie below, between and above the two frequent ones in memory: a cell
    # outside the table's slots is clipped to a slot of no object, then hashed
    monkeypatch.setattr(lattice, "_SAMPLED_CELLS", 64)
    texts = sorted([("_" + f"t{i}")[1:] for i in range(40)], key=id)
    common, rare = texts[19:21], texts[:3] + texts[25:26] + texts[-3:]
    values = np.array(common, dtype=object).take(np.random.default_rng(4).integers(0, 2, 10_000))
    at = [1, 2, 4000, 5001, 9997, 9998, 9999]  # none on the sampled cells (every 156th)
    values[at] = np.array(rare, dtype=object)
    assert lattice._slot_codes(values) is not None
    codes, objects = lattice._value_codes(pd.Series(values))
    objects = objects.to_numpy()
    assert len(objects) == 9
    assert all(o is v for o, v in zip(objects.take(codes).tolist(), values.tolist()))


@pytest.mark.parametrize("far", [[None], [None, np.nan], [None, np.nan, True, False]])
def test_frequent_objects_far_from_the_texts_are_compared_with_every_cell(monkeypatch, far):
    # None lies with the interpreter's own objects, far from texts made since: up to
    # ``_FAR_OBJECTS`` such objects are matched by address (more may leave the column to
    # hashing, as where they lie decides)
    monkeypatch.setattr(lattice, "_SLOT_BLOCK", 1000)
    rng = np.random.default_rng(6)
    texts = [("_" + t)[1:] for t in ["ab", "cd", "ef"]]
    values = np.array(texts + far, dtype=object).take(rng.integers(0, 3 + len(far), 10_000))
    if len(far) <= lattice._FAR_OBJECTS:
        assert lattice._slot_codes(values) is not None
    codes, objects = lattice._value_codes(pd.Series(values))
    objects = objects.to_numpy()
    assert len(objects) == 3 + len(far)
    assert all(o is v for o, v in zip(objects.take(codes).tolist(), values.tolist()))
