"""Writing a released table (anonweb/core/io/export.py) without a database: the download formats
and how a request names one, every format written and read back, and spreadsheet formulas
neutralised in CSV and XLSX (at the start of a cell, after a line break inside it, in column
names) while numbers and missing values stay what they are."""

from __future__ import annotations

import csv
import io

import numpy as np
import openpyxl
import pandas as pd
import pytest

from anonweb.core.errors import ParameterError
from anonweb.core.io.export import (
    DOWNLOAD_FORMATS,
    download_format,
    neutralise_cell,
    neutralise_frame,
    safe_csv_bytes,
    safe_xlsx_bytes,
)

RELEASE = pd.DataFrame(
    {
        "age": [34, -2, 51],
        "score": [0.5, np.nan, -1.25],
        "note": ["=1+2", "plain", None],
    }
)


def test_the_download_formats_and_their_media_types():
    assert DOWNLOAD_FORMATS == {
        "csv": "text/csv",
        "parquet": "application/vnd.apache.parquet",
        "xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    }


@pytest.mark.parametrize(
    "asked, fmt",
    [
        (None, "csv"),
        ("", "csv"),
        ("  ", "csv"),
        ("CSV", "csv"),
        (" parquet ", "parquet"),
        ("xlsx", "xlsx"),
    ],
)
def test_a_request_names_a_format_or_gets_csv(asked, fmt):
    assert download_format(asked) == fmt


def test_an_unknown_format_is_refused_with_the_choices():
    with pytest.raises(
        ParameterError, match=r"unknown download format 'pdf': choose one of csv, parquet, xlsx"
    ):
        download_format("pdf")


@pytest.mark.parametrize(
    "cell, safe",
    [
        ("=SUM(A1:A2)", "'=SUM(A1:A2)"),
        ("+1", "'+1"),
        ("-1", "'-1"),
        ("@cmd", "'@cmd"),
        ("\tx", "'\tx"),
        ("\rx", "'\rx"),
        ("\nx", "'\nx"),
        ("a\n=B1", "a\n'=B1"),
        ("a\r\n+1", "a\r\n'+1"),
        ("a\r-1", "a\r'-1"),
        ("a\nb", "a\nb"),
        ("x=1", "x=1"),
        ("", ""),
    ],
)
def test_text_a_spreadsheet_would_evaluate_is_quoted(cell, safe):
    assert neutralise_cell(cell) == safe


@pytest.mark.parametrize("value", [-5, 2.5, None])
def test_numbers_and_missing_values_are_left_alone(value):
    assert neutralise_cell(value) is value


def test_neutralise_frame_quotes_text_and_names_but_not_numbers_and_leaves_the_input():
    df = RELEASE.rename(columns={"note": "=note"})
    before = df.copy()
    out = neutralise_frame(df)
    pd.testing.assert_frame_equal(df, before)
    assert out.columns.tolist() == ["age", "score", "'=note"]
    assert out["age"].tolist() == [34, -2, 51]
    assert out["'=note"].tolist() == ["'=1+2", "plain", None]


def test_csv_rows_end_with_crlf_and_a_cell_with_a_line_break_is_quoted():
    df = pd.DataFrame({"a": ["one\rtwo", "x"], "b": [1, 2]})
    assert safe_csv_bytes(df) == b'a,b\r\n"one\rtwo",1\r\nx,2\r\n'
    rows = list(csv.reader(io.StringIO(safe_csv_bytes(df).decode(), newline="")))
    assert rows == [["a", "b"], ["one\rtwo", "1"], ["x", "2"]]


def write_csv(df: pd.DataFrame) -> bytes:
    return safe_csv_bytes(df)


def read_csv(data: bytes) -> pd.DataFrame:
    return pd.read_csv(io.BytesIO(data))


def write_parquet(df: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


def read_parquet(data: bytes) -> pd.DataFrame:
    return pd.read_parquet(io.BytesIO(data))


def write_xlsx(df: pd.DataFrame) -> bytes:
    return safe_xlsx_bytes(df)


def read_xlsx(data: bytes) -> pd.DataFrame:
    return pd.read_excel(io.BytesIO(data), engine="openpyxl")


FORMATS = {
    "csv": (write_csv, read_csv, "'=1+2"),
    "parquet": (write_parquet, read_parquet, "=1+2"),  # not a spreadsheet: kept as is
    "xlsx": (write_xlsx, read_xlsx, "'=1+2"),
}


def test_every_download_format_is_tested():
    assert set(FORMATS) == set(DOWNLOAD_FORMATS)


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_every_format_is_written_and_read_back(fmt):
    write, read, note = FORMATS[fmt]
    back = read(write(RELEASE))
    assert back.columns.tolist() == ["age", "score", "note"]
    assert back["age"].tolist() == [34, -2, 51]
    assert back["score"].tolist()[0::2] == [0.5, -1.25]
    assert back["score"].isna().tolist() == [False, True, False]
    assert back["note"].tolist()[:2] == [note, "plain"]
    assert pd.isna(back["note"].iloc[2])


def test_xlsx_holds_no_formula_cell():
    sheet = openpyxl.load_workbook(io.BytesIO(write_xlsx(RELEASE))).active
    cells = [c for row in sheet.iter_rows() for c in row if c.value is not None]
    assert all(c.data_type != "f" for c in cells)
    assert sheet["C2"].value == "'=1+2"
    assert sheet["A3"].value == -2  # a negative number stays a number


def test_a_text_cell_with_a_control_character_can_be_written_to_xlsx():
    df = pd.DataFrame({"note": ["bell\x07here", "ok"]})
    back = read_xlsx(write_xlsx(df))
    assert back["note"].tolist()[1] == "ok"
    assert back["note"].iloc[0] == "bellhere"
