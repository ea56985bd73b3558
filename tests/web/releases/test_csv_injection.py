"""Downloads never hand a spreadsheet a formula: any text, with line breaks anywhere, reads
back as the same rows, and no cell or line inside a cell starts with a formula character."""

import csv
import io

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from anonweb.releases.storage import FORMULA_PREFIXES, neutralise_cell, safe_csv_bytes

TEXT = st.text(
    alphabet=st.sampled_from(list('=+-@\t\r\n",;ab 1'))
    | st.characters(blacklist_categories=("Cs",)),
    max_size=12,
)


@settings(max_examples=300, deadline=None)
@given(cells=st.lists(st.tuples(TEXT, TEXT), min_size=1, max_size=8))
def test_any_text_reads_back_as_its_rows_with_no_formula(cells):
    frame = pd.DataFrame(cells, columns=["a", "b"])
    body = safe_csv_bytes(frame).decode("utf-8")
    rows = list(csv.reader(io.StringIO(body, newline="")))
    assert rows[0] == ["a", "b"]
    assert rows[1:] == [[neutralise_cell(a), neutralise_cell(b)] for a, b in cells]
    for row in rows[1:]:
        for cell in row:
            assert not cell.startswith(FORMULA_PREFIXES)
            for line in cell.replace("\r\n", "\n").replace("\r", "\n").split("\n")[1:]:
                assert not line.startswith(("=", "+", "-", "@", "\t"))
