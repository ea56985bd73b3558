"""The release path (anonweb/core/release/publish.py) without a database: rows shuffled with the
caller's rng and the way back kept privately, order kept only on request, aggregates marked as
not the source's records, one fresh key per named secret, the internal report scrubbed of the
source's disclosing classes, the published report free of the source's risk, and the CSV
neutralised."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from anonweb.core.release.plan import plan_from_dict
from anonweb.core.release.publish import fresh_secrets, publish, secret_names

# 12 people in 4 age classes; the class of 50-year-olds all have disease "e" (it discloses).
PEOPLE = pd.DataFrame(
    {
        "name": [f"person {i}" for i in range(12)],
        "age": [30, 30, 30, 40, 40, 40, 50, 50, 50, 60, 60, 60],
        "disease": list("abcabceeeabc"),
    }
)
DROP_NAMES = plan_from_dict(
    {
        "quasi_identifiers": ["age"],
        "sensitive": ["disease"],
        "steps": [{"kind": "drop", "params": {"columns": ["name"]}}],
    }
)


def test_rows_are_shuffled_and_the_way_back_is_kept_privately():
    before = PEOPLE.copy()
    out = publish(PEOPLE, DROP_NAMES, rng=np.random.default_rng(1))
    pd.testing.assert_frame_equal(PEOPLE, before)  # the input is left alone
    # aligned: the released rows in source order; frame: the same rows in a random order
    pd.testing.assert_frame_equal(out.aligned, PEOPLE.drop(columns=["name"]))
    assert out.source_rows is not None
    assert sorted(out.source_rows.tolist()) == list(range(12))
    assert out.source_rows.tolist() != list(range(12))
    expected = out.aligned.iloc[out.source_rows].reset_index(drop=True)
    pd.testing.assert_frame_equal(out.frame, expected)
    assert out.published["row_order"] == "shuffled"


def test_the_order_comes_from_the_callers_rng():
    one = publish(PEOPLE, DROP_NAMES, rng=np.random.default_rng(7)).source_rows
    again = publish(PEOPLE, DROP_NAMES, rng=np.random.default_rng(7)).source_rows
    other = publish(PEOPLE, DROP_NAMES, rng=np.random.default_rng(8)).source_rows
    assert one.tolist() == again.tolist()
    assert one.tolist() != other.tolist()


def test_keep_order_publishes_source_order_and_says_so():
    out = publish(PEOPLE, DROP_NAMES, rng=np.random.default_rng(1), keep_order=True)
    pd.testing.assert_frame_equal(out.frame, PEOPLE.drop(columns=["name"]))
    assert out.source_rows is None
    assert out.published["row_order"] == "source order (kept on request)"


@pytest.mark.parametrize("rows", [12, 1])
def test_an_aggregate_is_not_the_sources_records(rows):
    # A count is one row; from a table of one person too, where the lengths agree, it is still
    # not that person's record and has no way back to it.
    plan = plan_from_dict(
        {"steps": [{"kind": "dp_release", "params": {"kind": "count", "epsilon": 0.5}}]}
    )
    out = publish(PEOPLE.head(rows), plan, rng=np.random.default_rng(1))
    assert out.aligned is None and out.source_rows is None
    assert len(out.frame) == 1
    assert out.published["row_order"] == "not the source's records"


def test_the_internal_report_loses_the_disclosing_classes_and_the_published_one_the_source():
    out = publish(PEOPLE, DROP_NAMES, rng=np.random.default_rng(1))
    sensitive = out.report["risk_before"]["sensitive"]["disease"]
    assert sensitive["homogeneous_classes"] == 1  # the count stays
    assert "disclosing_classes" not in sensitive  # the 50-year-olds' "e" does not
    assert "risk_before" not in out.published
    assert out.published["risk_after"]["k"] == 3
    assert set(out.published) == {"steps", "privacy_cost", "rows_out", "risk_after", "row_order"}


def test_the_csv_neutralises_formulas_in_released_text():
    df = pd.DataFrame({"name": ["ann", "bob"], "note": ["=HYPERLINK(1)", "fine"], "n": [-1, 2]})
    plan = plan_from_dict({"steps": [{"kind": "drop", "params": {"columns": ["name"]}}]})
    csv = publish(df, plan, rng=np.random.default_rng(1), keep_order=True).csv_bytes()
    assert csv == b"note,n\r\n'=HYPERLINK(1),-1\r\nfine,2\r\n"


TOKENS = {"steps": [{"kind": "tokenize", "params": {"columns": ["name"], "key": "release-key"}}]}


def test_secret_names_are_read_from_a_plan_or_its_json():
    assert secret_names(TOKENS) == {"release-key"}
    assert secret_names(plan_from_dict(TOKENS)) == {"release-key"}
    assert secret_names({"steps": [{"kind": "drop", "params": {"columns": ["name"]}}]}) == set()


def test_one_fresh_32_byte_key_per_named_secret_not_supplied():
    asked = []

    def random_bytes(n: int) -> bytes:
        asked.append(n)
        return bytes([len(asked)]) * n

    plan = {
        "steps": [
            {"kind": "tokenize", "params": {"columns": ["name"], "key": "b"}},
            {"kind": "tokenize", "params": {"columns": ["age"], "key": "a"}},
            {"kind": "tokenize", "params": {"columns": ["disease"], "key": "given"}},
        ]
    }
    keys = fresh_secrets(plan, random_bytes, supplied={"given": b"kept"})
    assert asked == [32, 32]
    assert keys == {"given": b"kept", "a": b"\x01" * 32, "b": b"\x02" * 32}


def test_fresh_keys_make_tokens_stable_within_a_release_and_unlinkable_across():
    people = pd.DataFrame({"name": ["ann", "bob", "ann"]})
    plan = plan_from_dict(TOKENS)

    def release(key_byte: int) -> pd.Series:
        keys = fresh_secrets(plan, lambda n: bytes([key_byte]) * n)
        return publish(
            people, plan, rng=np.random.default_rng(0), secrets=keys, keep_order=True
        ).frame["name"]

    first, second = release(1), release(2)
    assert first[0] == first[2] != first[1]
    assert not set(first) & set(second)


@pytest.mark.parametrize("sep", [",", "\t"])
def test_csv_bytes_takes_the_separator(sep):
    out = publish(PEOPLE, DROP_NAMES, rng=np.random.default_rng(1), keep_order=True)
    assert out.csv_bytes(sep=sep).split(b"\r\n")[0] == f"age{sep}disease".encode()
