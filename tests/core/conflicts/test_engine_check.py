"""The conflict check out of core (DuckDB joins the releases by their lineage) gives the
in-memory check's findings, in the same order and with the same figures, on hand-worked cases
and on random releases; releases held as Parquet files with a lineage file read alike."""

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anonweb.core.conflicts.engine_check import (
    LINEAGE_COLUMN,
    NotOutOfCore,
    TableRelease,
    engine_release_conflicts,
)
from anonweb.core.conflicts.inference import Aggregate
from anonweb.core.conflicts.release import NEW_LABEL, EarlierRelease, release_conflicts

AGES = [31, 32, 33, 34, 31, 32, 33, 34, 31, 32, 36, 36, 41, 42, 43, 44, 41, 42, 43, 44, 41, 42]
PEOPLE = pd.DataFrame(
    {
        "ssn": [f"{100 + i:03d}-55-{1000 + 7 * i}" for i in range(len(AGES))],
        "age": AGES,
        "disease": ["flu", "asthma"] * (len(AGES) // 2),
    }
)
TWINS = (10, 11)  # the only two people in A's [30, 40) and B's [35, 45) both


def bins(ages: pd.Series, start: int) -> pd.Series:
    lo = (ages - start) // 10 * 10 + start
    return lo.astype(str) + "-" + (lo + 9).astype(str)


def shuffled(frame: pd.DataFrame, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    order = np.random.default_rng(seed).permutation(len(frame))
    return frame.iloc[order].reset_index(drop=True), order


def both(source, new_frame, new_rows, earlier, *, tmp_path=None, qis=("age",), **kw):
    """The in-memory check and the one out of core (from Parquet files when ``tmp_path``)."""
    memory = release_conflicts(
        source,
        frame=new_frame,
        rows=new_rows,
        earlier=earlier,
        quasi_identifiers=list(qis),
        plan_quasi_identifiers=list(kw.get("plan_qis", ())),
        sensitive=kw.get("sensitive", ()),
        k=kw.get("k"),
        l=kw.get("l"),
    )
    table, rows = new_frame, np.asarray(new_rows)
    files = []
    if tmp_path is not None:
        table, rows = write(tmp_path, "new", new_frame, new_rows)
        for i, e in enumerate(earlier):
            if e.frame is None:
                files.append(e)
                continue
            t, r = write(tmp_path, f"e{i}", e.frame, e.rows)
            files.append(
                EarlierRelease(
                    e.label,
                    e.status,
                    e.id,
                    quasi_identifiers=e.quasi_identifiers,
                    table_file=t,
                    rows_file=r,
                )  # fmt: skip
            )
    con = duckdb.connect()
    out_of_core = engine_release_conflicts(
        con,
        TableRelease(NEW_LABEL, table, rows, tuple(kw.get("plan_qis", ()))),
        earlier=files or earlier,
        source_rows=len(source),
        source_columns=[str(c) for c in source.columns],
        quasi_identifiers=list(qis),
        sensitive=kw.get("sensitive", ()),
        k=kw.get("k"),
        l=kw.get("l"),
    )
    # every table it made is gone
    assert not [t for t in con.execute("SHOW TABLES").fetchall() if "conflict" in t[0]]
    return memory, out_of_core


def write(tmp_path, name, frame, rows):
    table, lineage = tmp_path / f"{name}.parquet", tmp_path / f"{name}.rows.parquet"
    frame.to_parquet(table, index=False)
    pq.write_table(pa.table({LINEAGE_COLUMN: np.asarray(rows, dtype=np.int64)}), lineage)
    return str(table), str(lineage)


def same(memory, out_of_core):
    assert out_of_core.private == memory.private
    assert out_of_core.public == memory.public
    assert out_of_core.checked == memory.checked and out_of_core.notes == memory.notes
    assert out_of_core.statuses == memory.statuses
    assert [f.to_dict() for f in out_of_core.gate_findings()] == [
        f.to_dict() for f in memory.gate_findings()
    ]


def earlier(label, frame, rows, qis=("age",), **kw):
    return EarlierRelease(
        label, "approved", 7, frame, np.asarray(rows), quasi_identifiers=qis, **kw
    )


@pytest.mark.parametrize("on_disk", [False, True])
def test_tokens_under_one_key_join_the_releases_and_expose_the_twins(tmp_path, on_disk):
    # Hand-worked: the two 36-year-olds are alone in A's [30, 40) and B's [35, 45) together,
    # though each release keeps everyone among at least 10; the token joins them one to one.
    token = PEOPLE["ssn"].map(lambda s: f"t{hash(s) % 10**8}")
    a, ra = shuffled(pd.DataFrame({"ssn": token, "age": bins(PEOPLE["age"], 0)}), 1)
    b, rb = shuffled(pd.DataFrame({"ssn": token, "age": bins(PEOPLE["age"], 5)}), 2)
    memory, engine = both(
        PEOPLE, a, ra, [earlier("release 1", b, rb)], tmp_path=tmp_path if on_disk else None, k=5
    )
    (finding,) = engine.report.findings
    assert finding.type == "linkage" and finding.records == TWINS
    assert finding.facts == {"k": 5, "k_joined": 2, "link": "columns", "link_columns": ["ssn"]}
    assert engine.checked == [7]
    same(memory, engine)


def test_the_same_row_order_joins_and_discloses_the_disease(tmp_path):
    # Kept in source order, A (ages by tens from 30) and B (from 35) join row by row; the
    # twins' joined class holds one disease each... no: they hold flu and asthma (rows 10, 11):
    # l is 2 joined. Give them the same disease so the join discloses it.
    source = PEOPLE.assign(disease=["flu", "asthma"] * 5 + ["hiv", "hiv"] + ["flu", "asthma"] * 5)
    rows = np.arange(len(source))
    a = pd.DataFrame({"age": bins(source["age"], 0), "disease": source["disease"]})
    b = pd.DataFrame({"age": bins(source["age"], 5)})
    memory, engine = both(
        source, a, rows, [earlier("release 1", b, rows)], tmp_path=tmp_path, k=5,
        sensitive=["disease"],
    )  # fmt: skip
    kinds = [(f.type, f.records, f.facts.get("link")) for f in engine.report.findings]
    assert kinds == [("linkage", TWINS, "row order"), ("linkage", TWINS, "row order")]
    assert engine.report.findings[1].facts["l_joined"] == 1
    same(memory, engine)


def test_the_composition_attack_without_a_join():
    # Release A groups rows {0,1} {2,3} {4,5}, B {0,5} {1,2} {3,4}: each class holds two
    # diseases, yet every pair of classes a person falls in shares exactly one.
    source = pd.DataFrame({"disease": ["flu", "hiv", "cancer", "flu", "hiv", "cancer"]})
    a = pd.DataFrame({"h": list("PPQQRR"), "disease": source["disease"]})
    b = pd.DataFrame({"g": ["X", "Y", "Y", "Z", "Z", "X"], "disease": source["disease"]})
    a, ra = shuffled(a, 3)
    b, rb = shuffled(b, 4)
    memory, engine = both(
        source, a, ra, [earlier("release 1", b, rb, qis=("g",))], qis=(), plan_qis=("h",),
        sensitive=["disease"], k=2,
    )  # fmt: skip
    (finding,) = engine.report.findings
    assert finding.type == "intersection" and finding.records == tuple(range(6))
    assert finding.facts == {"l": 2, "l_combined": 1}
    same(memory, engine)


def test_dp_releases_are_left_out_and_aggregates_are_not_counted_out_of_core():
    frame = pd.DataFrame({"age": bins(PEOPLE["age"], 0)})
    rows = np.arange(len(PEOPLE))
    dp = EarlierRelease("release 1", "approved", 3, dp=True)
    memory, engine = both(PEOPLE, frame, rows, [dp])
    assert engine.notes and engine.checked == [3]
    same(memory, engine)
    means = Aggregate("release 2", "age", np.zeros(len(PEOPLE), dtype=np.int64), np.array([37.0]))
    with pytest.raises(NotOutOfCore, match="exact inference and differencing.*release 2"):
        engine_release_conflicts(
            duckdb.connect(),
            TableRelease(NEW_LABEL, frame, rows),
            earlier=[EarlierRelease("release 2", "pending", 4, aggregates=(means,))],
            source_rows=len(PEOPLE),
            source_columns=list(PEOPLE.columns),
        )
    broken = EarlierRelease("release 3", "pending", 5, error="no such file")
    with pytest.raises(NotOutOfCore, match="lineage of release 3 cannot be read"):
        engine_release_conflicts(
            duckdb.connect(),
            TableRelease(NEW_LABEL, frame, rows),
            earlier=[broken],
            source_rows=len(PEOPLE),
            source_columns=list(PEOPLE.columns),
        )


@pytest.mark.parametrize("name", ["__row", "__pos", "__c", "__n", "file_row_number", "filename"])
@pytest.mark.parametrize("on_disk", [False, True])
def test_a_column_named_as_the_checks_own_is_counted_as_itself(tmp_path, name, on_disk):
    # A disease column called __c would be read as the class number (and the twins' disclosed
    # disease missed): the check names its own columns apart, and finds what it finds in memory.
    source = PEOPLE.assign(disease=["flu", "asthma"] * 5 + ["hiv", "hiv"] + ["flu", "asthma"] * 5)
    source = source.rename(columns={"disease": name})
    rows = np.arange(len(source))
    a = pd.DataFrame({"age": bins(source["age"], 0), name: source[name]})
    b = pd.DataFrame({"age": bins(source["age"], 5), name: source[name]})
    memory, engine = both(
        source, a, rows, [earlier("release 1", b, rows)], tmp_path=tmp_path if on_disk else None,
        k=5, sensitive=[name],
    )  # fmt: skip
    kinds = [(f.type, f.records, f.columns) for f in engine.report.findings]
    assert kinds == [("linkage", TWINS, ()), ("linkage", TWINS, (name,))]
    assert engine.report.findings[1].facts["l_joined"] == 1
    same(memory, engine)


def test_another_upload_is_left_out():
    frame = pd.DataFrame({"age": bins(PEOPLE["age"], 0)})
    rows = np.arange(len(PEOPLE))
    other = earlier("release 1", frame, rows + 100)
    memory, engine = both(PEOPLE, frame, rows, [other], k=5)
    assert engine.checked == [] and not engine.public
    same(memory, engine)


CELL = st.tuples(st.integers(0, 3), st.integers(0, 3), st.sampled_from(["x", "y", "z", None]))


@settings(max_examples=40, deadline=None)
@given(
    st.lists(CELL, min_size=2, max_size=40),
    st.booleans(),
    st.booleans(),
    st.integers(0, 2**16),
    st.sampled_from([2, 3]),
)
def test_random_releases_give_the_in_memory_findings(cells, keep_order, subset, seed, k):
    arr = pd.DataFrame(cells, columns=["qa", "qb", "s"])
    source = pd.DataFrame({"age": arr["qa"], "zip": arr["qb"], "s": arr["s"]})
    rng = np.random.default_rng(seed)
    n = len(source)
    ra = np.arange(n) if keep_order else rng.permutation(n)
    rb = np.arange(n) if keep_order else rng.permutation(n)
    if subset:
        rb = np.sort(rng.choice(n, size=max(1, n // 2), replace=False))
    # a missing age is a class of its own in each release
    age = np.where(source["age"] == 3, np.nan, source["age"] // 2)
    a = pd.DataFrame({"age": age[ra], "s": source["s"].iloc[ra].to_numpy()})
    b = pd.DataFrame(
        {
            "zip": source["zip"].iloc[rb].to_numpy(),
            "age": source["age"].iloc[rb].to_numpy() % 2,
            "s": source["s"].iloc[rb].to_numpy(),
        }
    )
    memory, engine = both(
        source, a.reset_index(drop=True), ra, [earlier("release 1", b, rb, qis=("zip",))],
        qis=("age",), sensitive=["s"], k=k, l=2,
    )  # fmt: skip
    same(memory, engine)


# Cells the out-of-core join must compare as the in-memory check does: as pandas reads each
# release's file and writes its cells (astype(str)), or both missing. Each case gives the
# column ``v`` of releases A and B per record (None: missing), their Arrow types, and whether
# the in-memory check joins A and B on it (joined, the twins are alone: a linkage finding).
N_PEOPLE = len(PEOPLE)
BIG = 2**53


def _floats(values, missing_at=(), nan=False):
    out = [float(v) for v in values]
    return [(float("nan") if nan else None) if i in missing_at else v for i, v in enumerate(out)]


# timestamps of each person (nanoseconds): to the microsecond, midnights, and microseconds in
# winter and summer (two offsets)
STAMPS = [1_700_000_000 * 10**9 + i * 10**9 + 123_450_000 + i * 10_000 for i in range(N_PEOPLE)]
MIDNIGHTS = [(19_000 + i) * 86_400 * 10**6 for i in range(N_PEOPLE)]
ZONED = [(1_700_000_000 + i * 10_000_000) * 10**6 + i for i in range(N_PEOPLE)]


def _texts(values, unit="ns", zone=None):
    """pandas' text of a column of timestamps (``values`` in ``unit`` since the epoch)."""
    stamps = pd.Series(pd.to_datetime(values, unit=unit))
    return list((stamps.dt.tz_localize("UTC").dt.tz_convert(zone) if zone else stamps).astype(str))


EDGE_CASES = {
    # a NaN in one file and a null in the other: pandas reads both as NaN, both missing
    "nan and null": (
        pa.array(_floats([i + 0.5 for i in range(N_PEOPLE)], {0}, nan=True), pa.float64()),
        pa.array(_floats([i + 0.5 for i in range(N_PEOPLE)], {0}), pa.float64()),
        True,
    ),
    # integers with a gap are read as floats (1001.0), never equal to integers (1001)
    "integers with and without a gap": (
        pa.array([None] + [1000 + i for i in range(1, N_PEOPLE)], pa.int64()),
        pa.array([1000 + i for i in range(N_PEOPLE)], pa.int64()),
        False,
    ),
    # ... and as floats, 2**53 + 4i + 1 and 2**53 + 4i are the same float
    "integers read as the same float": (
        pa.array([None] + [BIG + 4 * i + 1 for i in range(1, N_PEOPLE)], pa.int64()),
        pa.array([None] + [BIG + 4 * i for i in range(1, N_PEOPLE)], pa.int64()),
        True,
    ),
    # a missing text is written None, and so is the text "None"
    "missing text and the text None": (
        pa.array([None] + [f"p{i}" for i in range(1, N_PEOPLE)]),
        pa.array(["None"] + [f"p{i}" for i in range(1, N_PEOPLE)]),
        True,
    ),
    # a missing float is written nan, and so is the text "nan"; floats as Python writes them
    "missing float and the text nan": (
        pa.array(_floats([1e16 + 2 * i for i in range(N_PEOPLE)], {0}), pa.float64()),
        pa.array(["nan"] + [repr(1e16 + 2 * i) for i in range(1, N_PEOPLE)]),
        True,
    ),
    "floats and their texts": (
        pa.array(
            [0.1 + 0.2, -0.0, float("inf"), 1e-05, 5e-324] + [i / 3 for i in range(5, N_PEOPLE)]
        ),
        pa.array(
            ["0.30000000000000004", "-0.0", "inf", "1e-05", "5e-324"]
            + [repr(i / 3) for i in range(5, N_PEOPLE)]
        ),
        True,
    ),
    "zero and negative zero": (
        pa.array([-0.0] + [float(i) for i in range(1, N_PEOPLE)]),
        pa.array([float(i) for i in range(N_PEOPLE)]),
        False,
    ),
    # float32 0.1 is written 0.1 alone, but beside float64 it is 0.10000000149011612
    "float32 and float64": (
        pa.array([0.1 * (i + 1) for i in range(N_PEOPLE)], pa.float32()),
        pa.array([float(str(np.float32(0.1 * (i + 1)))) for i in range(N_PEOPLE)], pa.float64()),
        False,
    ),
    "integers and floats": (
        pa.array(list(range(N_PEOPLE)), pa.int64()),
        pa.array([float(i) for i in range(N_PEOPLE)], pa.float64()),
        False,
    ),
    # a column of timestamps is written in the format its values need: to the microsecond
    # here (".123450", as Python writes it too), NaT when missing
    "timestamps and their texts": (
        pa.array(STAMPS, pa.timestamp("ns")),
        pa.array(_texts(STAMPS)),
        True,
    ),
    "a missing timestamp and the text NaT": (
        pa.array([None, *STAMPS[1:]], pa.timestamp("ns")),
        pa.array(["NaT", *_texts(STAMPS)[1:]]),
        True,
    ),
    # ... and as dates alone when all are at midnight: not Python's text of them
    "timestamps at midnight and Python's texts": (
        pa.array(MIDNIGHTS, pa.timestamp("us")),
        pa.array([str(pd.Timestamp(v, unit="us")) for v in MIDNIGHTS]),
        False,
    ),
    # with a time zone, each as Python writes it, its offset after it
    "timestamps with a zone and their texts": (
        pa.array(ZONED, pa.timestamp("us", tz="Europe/Paris")),
        pa.array(_texts(ZONED, "us", "Europe/Paris")),
        True,
    ),
    # a categorical (a dictionary column) writes a missing value as nan
    "a missing category and the text nan": (
        pa.array([None] + [f"p{i}" for i in range(1, N_PEOPLE)]).dictionary_encode(),
        pa.array(["nan"] + [f"p{i}" for i in range(1, N_PEOPLE)]),
        True,
    ),
    "booleans and their texts beside a reading": (
        pa.array([i % 2 == 0 for i in range(N_PEOPLE)]),
        pa.array(["True" if i % 2 == 0 else "False" for i in range(N_PEOPLE)]),
        None,  # not unique: whether it joins depends on the reading beside it
    ),
}


def _release_file(tmp_path, name, age, v, order, extra=None):
    columns = {"age": pa.array(age.to_numpy()[order]), "v": v.take(pa.array(order))}
    if extra is not None:
        columns["w"] = extra.take(pa.array(order))
    table, lineage = tmp_path / f"{name}.parquet", tmp_path / f"{name}.rows.parquet"
    pq.write_table(pa.table(columns), table)
    pq.write_table(pa.table({LINEAGE_COLUMN: np.asarray(order, dtype=np.int64)}), lineage)
    return str(table), str(lineage)


@pytest.mark.parametrize("case", list(EDGE_CASES))
def test_the_join_compares_cells_as_the_in_memory_check(tmp_path, case):
    va, vb, joins = EDGE_CASES[case]
    extra = None
    if joins is None:  # booleans joined beside a reading the twins do not share... in pairs
        extra = pa.array([f"r{i // 2}" for i in range(N_PEOPLE)])
        joins = True
    ra = np.random.default_rng(1).permutation(N_PEOPLE)
    rb = np.random.default_rng(2).permutation(N_PEOPLE)
    if case == "integers with and without a gap":  # B leaves out the record A lacks
        rb = rb[rb != 0]
    ta, la = _release_file(tmp_path, "a", bins(PEOPLE["age"], 0), va, ra, extra)
    tb, lb = _release_file(tmp_path, "b", bins(PEOPLE["age"], 5), vb, rb, extra)
    # the in-memory check reads the releases' files as pandas does
    fa, fb = pd.read_parquet(ta), pd.read_parquet(tb)
    memory = release_conflicts(
        PEOPLE, frame=fa, rows=ra, earlier=[earlier("release 1", fb, rb)],
        quasi_identifiers=["age"], k=5,
    )  # fmt: skip
    found = [(f.type, f.records, f.facts.get("link")) for f in memory.report.findings]
    assert found == ([("linkage", TWINS, "columns")] if joins else []), found
    for table_a, rows_a, table_b, rows_b in ((ta, la, tb, lb), (fa, ra, fb, rb)):
        other = EarlierRelease(
            "release 1", "approved", 7, quasi_identifiers=("age",),
            table_file=table_b if isinstance(table_b, str) else None,
            rows_file=rows_b if isinstance(rows_b, str) else None,
            frame=None if isinstance(table_b, str) else table_b,
            rows=None if isinstance(rows_b, str) else np.asarray(rows_b),
        )  # fmt: skip
        out_of_core = engine_release_conflicts(
            duckdb.connect(),
            TableRelease(NEW_LABEL, table_a, rows_a),
            earlier=[other],
            source_rows=N_PEOPLE,
            source_columns=list(PEOPLE.columns),
            quasi_identifiers=["age"],
            k=5,
        )
        same(memory, out_of_core)


# A sensitive value as each release writes it: the composition attack's three values (flu,
# hiv, cancer in the hand-worked case above) in A's and B's column types. The in-memory check
# codes them as Python values once the two columns are put together: 1, 1.0 and True are one,
# 0.0 and -0.0 too, a NaN and a null (both missing) too, the number 1 is not the text "1", and
# an integer column with a gap is floats (2**53 + 1 is the float 2**53).
VALUE_CASES = {
    "integers and floats": (pa.array([1, 2, 3]), pa.array([1.0, 2.0, 3.0])),
    "numbers and texts": (pa.array([1, 2, 3]), pa.array(["1", "2", "3"])),
    "booleans and integers": (pa.array([True, False, None]), pa.array([1, 0, None])),
    "zero and negative zero": (pa.array([0.0, 2.5, 3.5]), pa.array([-0.0, 2.5, 3.5])),
    "a NaN and a null": (
        pa.array([float("nan"), 2.5, 3.5]),
        pa.array([None, 2.5, 3.5], pa.float64()),
    ),
    "integers with a gap": (
        pa.array([BIG + 1, BIG + 3, None], pa.int64()),
        pa.array([BIG, BIG + 4, None], pa.int64()),
    ),
    "missing texts": (pa.array([None, "hiv", "cancer"]), pa.array(["None", "hiv", "cancer"])),
}


@pytest.mark.parametrize("case", list(VALUE_CASES))
def test_sensitive_values_are_compared_as_the_in_memory_check(tmp_path, case):
    # Release A groups rows {0,1} {2,3} {4,5}, B {0,5} {1,2} {3,4}, each row's value the same
    # in both: joined by no column, the composition attack counts the values both classes of
    # a person hold, which depends on which written values are the same value.
    codes = np.array([0, 1, 2, 0, 1, 2])
    va, vb = VALUE_CASES[case]
    source = pd.DataFrame({"s": codes})
    ra = np.random.default_rng(3).permutation(6)
    rb = np.random.default_rng(4).permutation(6)
    files = []
    for name, qi, values, order in (
        ("a", ["P", "P", "Q", "Q", "R", "R"], va, ra),
        ("b", ["X", "Y", "Y", "Z", "Z", "X"], vb, rb),
    ):
        table = pa.table(
            {"h": pa.array(qi).take(pa.array(order)), "s": values.take(pa.array(codes[order]))}
        )
        path = tmp_path / f"{name}.parquet"
        pq.write_table(table, path)
        lineage = tmp_path / f"{name}.rows.parquet"
        pq.write_table(pa.table({LINEAGE_COLUMN: np.asarray(order, dtype=np.int64)}), lineage)
        files.append((str(path), str(lineage), pd.read_parquet(path), order))
    (ta, la, fa, _), (tb, lb, fb, _) = files
    memory = release_conflicts(
        source, frame=fa, rows=ra, earlier=[earlier("release 1", fb, rb, qis=("h",))],
        quasi_identifiers=[], plan_quasi_identifiers=["h"], sensitive=["s"], k=2,
    )  # fmt: skip
    for table_a, rows_a, other in (
        (ta, la, EarlierRelease("release 1", "approved", 7, quasi_identifiers=("h",),
                                table_file=tb, rows_file=lb)),
        (fa, ra, earlier("release 1", fb, rb, qis=("h",))),
    ):  # fmt: skip
        out_of_core = engine_release_conflicts(
            duckdb.connect(),
            TableRelease(NEW_LABEL, table_a, rows_a, ("h",)),
            earlier=[other],
            source_rows=6,
            source_columns=["s"],
            quasi_identifiers=[],
            sensitive=["s"],
            k=2,
        )
        same(memory, out_of_core)


DAY = 86_400 * 10**9  # nanoseconds
START = 1_700_000_000 * 10**9 - 1_700_000_000 * 10**9 % DAY  # a midnight, in nanoseconds


def _ns(offset):
    return START + int(offset)


def _us(offset_ns):
    return (START + int(offset_ns)) // 1000


# Values of one kind each, by a code 0..5 (None: missing): a column of a release is one kind.
KINDS = {
    "int": (pa.int64(), [0, 1, 2, BIG, BIG + 1, 3]),
    "int with gaps": (pa.int64(), [0, 1, None, BIG, BIG + 1, 3]),
    "float": (pa.float64(), [0.0, 1.0, float("nan"), float(BIG), -0.0, 0.1 + 0.2]),
    "float with nulls": (pa.float64(), [0.0, 1.0, None, 1e16, 0.5, 0.3]),
    "float32": (pa.float32(), [0.0, 1.0, None, 0.1, 0.5, 0.3]),
    "bool": (pa.bool_(), [False, True, None, True, False, True]),
    "text": (pa.string(), ["0", "1", None, "nan", "None", "0.30000000000000004"]),
    # pandas writes a column of timestamps in the format its values need (the dates alone, to
    # the second, or 3, 6 or 9 digits of it), as Python does beside another kind or with a
    # time zone, and a missing one as NaT
    "timestamp": (pa.timestamp("ns"), [_ns(0), _ns(500_000_000), None, _ns(1), _ns(DAY), _ns(1e6)]),
    "timestamp at midnight": (
        pa.timestamp("us"),
        [_us(0), _us(DAY), None, _us(DAY), _us(0), _us(-DAY)],
    ),
    "timestamp with a zone": (
        pa.timestamp("us", tz="Europe/Paris"),
        [_us(0), _us(500_000), None, _us(1), _us(DAY), _us(1_000)],
    ),
    "timestamp texts": (
        pa.string(),
        [str(pd.Timestamp(_ns(x))) for x in (0, 5e8)]
        + ["NaT"]
        + [str(pd.Timestamp(_ns(x))) for x in (1, DAY, 1e6)],
    ),
    # a dictionary column, which pandas reads as a categorical: a missing value is nan
    "category": (pa.dictionary(pa.int8(), pa.string()), ["a", "b", None, "nan", "None", "c"]),
    "category texts": (pa.string(), ["a", "b", "nan", "nan", "None", "c"]),
}


def _kind_column(kind, codes):
    arrow_type, values = KINDS[kind]
    if pa.types.is_dictionary(arrow_type):
        return pa.array([values[c] for c in codes], arrow_type.value_type).dictionary_encode()
    return pa.array([values[c] for c in codes], arrow_type)


def _unique_column(kind, codes):
    """A value per code, unique but for booleans (code 0 missing where the kind has gaps):
    readings that may single records out and join the releases."""
    arrow_type, _ = KINDS[kind]
    made = {
        "int": lambda i: BIG + i,
        "int with gaps": lambda i: None if i == 0 else BIG + 2 * i + 1,
        "float": lambda i: i + 0.5,
        "float with nulls": lambda i: None if i == 0 else float(BIG + 2 * i + 2),
        "float32": lambda i: 0.1 * (i + 1),
        "bool": lambda i: i % 2 == 0,
        "text": lambda i: repr(i + 0.5),
        "timestamp": lambda i: _ns(i * 250_000_000 + i % 2),
        "timestamp at midnight": lambda i: _us(i * DAY),
        "timestamp with a zone": lambda i: _us(i * 1_500_000_000),
        "timestamp texts": lambda i: str(pd.Timestamp(_ns(i * 250_000_000 + i % 2))),
        "category": lambda i: None if i == 0 else f"c{i}",
        "category texts": lambda i: "nan" if i == 0 else f"c{i}",
    }[kind]
    if pa.types.is_dictionary(arrow_type):
        return pa.array([made(int(c)) for c in codes], arrow_type.value_type).dictionary_encode()
    return pa.array([made(int(c)) for c in codes], arrow_type)


# A's class label by a code 0..2: a text, or a float whose codes 1 and 2 are a NaN and a
# null, both missing to pandas: one class.
CLASS_KINDS = {
    "text": lambda codes: pa.array([f"c{x}" for x in codes]),
    "float with NaN and null": lambda codes: pa.array(
        [[0.5, float("nan"), None][x] for x in codes], pa.float64()
    ),
}


@settings(max_examples=40, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(0, 2), st.integers(0, 5), st.integers(0, 5)), min_size=4, max_size=30
    ),
    st.sampled_from(sorted(KINDS)),
    st.sampled_from(sorted(KINDS)),
    st.sampled_from(sorted(KINDS)),
    st.sampled_from(sorted(KINDS)),
    st.booleans(),
    st.booleans(),
    st.integers(0, 2**16),
    st.sampled_from(sorted(CLASS_KINDS)),
)
def test_random_columns_of_any_kind_give_the_in_memory_findings(
    cells, kind_va, kind_vb, kind_sa, kind_sb, same_v, unique_v, seed, kind_h
):
    # Each release publishes a class label, a reading v (the same codes in both, or B's
    # shifted) and a sensitive s, each column of a kind drawn apart: whether v joins the
    # releases and which values of s are one value are the in-memory check's decisions.
    import tempfile
    from pathlib import Path

    n = len(cells)
    group, v, s = (np.array(x) for x in zip(*cells, strict=True))
    rng = np.random.default_rng(seed)
    ra, rb = rng.permutation(n), rng.permutation(n)
    if unique_v:
        v = np.arange(n)
    vb_codes = v if same_v else (v + 1) % (n if unique_v else 6)
    column = _unique_column if unique_v else _kind_column
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for name, order, columns in (
            ("a", ra, {"h": group, "v": (kind_va, v), "s": (kind_sa, s)}),
            (
                "b",
                rb,
                {"g": (group + np.arange(n)) % 3, "v": (kind_vb, vb_codes), "s": (kind_sb, s)},
            ),
        ):
            arrays = {}
            for c, spec in columns.items():
                if isinstance(spec, tuple):
                    make = column if c == "v" else _kind_column
                    arrays[c] = make(spec[0], spec[1][order])
                else:
                    arrays[c] = CLASS_KINDS[kind_h if c == "h" else "text"](spec[order])
            path, lineage = Path(tmp) / f"{name}.parquet", Path(tmp) / f"{name}.rows.parquet"
            pq.write_table(pa.table(arrays), path)
            pq.write_table(pa.table({LINEAGE_COLUMN: np.asarray(order, dtype=np.int64)}), lineage)
            paths.append((str(path), str(lineage), pd.read_parquet(path)))
        (ta, la, fa), (tb, lb, fb) = paths
        source = pd.DataFrame({"s": s})
        memory = release_conflicts(
            source, frame=fa, rows=ra, earlier=[earlier("release 1", fb, rb, qis=("g",))],
            quasi_identifiers=[], plan_quasi_identifiers=["h"], sensitive=["s"], k=2, l=2,
        )  # fmt: skip
        for table_a, rows_a, other in (
            (ta, la, EarlierRelease("release 1", "approved", 7, quasi_identifiers=("g",),
                                    table_file=tb, rows_file=lb)),
            (fa, ra, earlier("release 1", fb, rb, qis=("g",))),
        ):  # fmt: skip
            out_of_core = engine_release_conflicts(
                duckdb.connect(),
                TableRelease(NEW_LABEL, table_a, rows_a, ("h",)),
                earlier=[other],
                source_rows=n,
                source_columns=["s"],
                quasi_identifiers=[],
                sensitive=["s"],
                k=2,
                l=2,
            )
            same(memory, out_of_core)
