"""Small files that decode to gigabytes are refused in bounded memory, and a cancel is heard
while a workbook is still being checked.

Each hostile file is generated here (a few MB at most, the xlsx streamed into its zip) and read
by ``convert_to_parquet`` with the default limits in a fresh process, whose peak resident
memory (VmHWM) must stay under PEAK_BOUND. Before these checks the Parquet file (one 10 KB
string dictionary-encoded over a million rows) drove a worker past 7.4 GB, and a workbook of 20
million two-character shared strings took 3.7 GB and 11 minutes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from anonweb.core.errors import DataError
from anonweb.core.io.ingest import convert_to_parquet
from anonweb.core.io.sources import Limits
from tests.core.io.test_ingest import _sheet_xml, _workbook

ROOT = Path(__file__).resolve().parents[3]
PEAK_BOUND = 600 * 1024**2  # bytes: the README's stated bound for reading any upload

_READ = """
import json, sys
from anonweb.core.io.ingest import convert_to_parquet
try:
    info = convert_to_parquet(sys.argv[1], sys.argv[2])
    outcome = f"read {info.rows} rows"
except Exception as exc:
    outcome = f"{type(exc).__name__}: {exc}"
peak = next(int(l.split()[1]) * 1024 for l in open("/proc/self/status") if l.startswith("VmHWM"))
print(json.dumps({"outcome": outcome, "peak": peak}))
"""


def read_in_a_fresh_process(path: Path) -> tuple[str, int]:
    """What reading the file ends with, and the reading process's peak memory in bytes."""
    done = subprocess.run(
        [sys.executable, "-c", _READ, str(path), str(path.parent / "out" / "t.parquet")],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    return answer["outcome"], answer["peak"]


def dictionary_bomb(path: Path, *, rows: int = 1_000_000, value_bytes: int = 10_000) -> Path:
    """One long string, stored once in the column's dictionary, indexed by every row."""
    values = pa.DictionaryArray.from_arrays(
        pa.array(np.zeros(rows, dtype=np.int32)), pa.array(["x" * value_bytes])
    )
    pq.write_table(pa.table({"note": values}), path)
    return path


def shared_strings_workbook(
    path: Path, *, entries: int, text: bytes | None = None, rows: int = 2
) -> Path:
    """A workbook whose shared-string table holds ``entries`` texts (two-character ones, or
    ``text`` every time), streamed into the zip (a few hundred KB for millions of entries),
    and whose sheet has a header and ``rows - 1`` rows, each cell naming text 1."""
    sheet = _sheet_xml(
        '<row r="1"><c r="A1" t="s"><v>0</v></c></row>'
        + "".join(f'<row r="{r}"><c r="A{r}" t="s"><v>1</v></c></row>' for r in range(2, rows + 1))
    )
    rel = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/sharedStrings"
    ctype = "application/vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"
    with (
        zipfile.ZipFile(io.BytesIO(_workbook(sheet))) as base,
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as book,
    ):
        for item in base.infolist():
            data = base.read(item)
            if item.filename == "[Content_Types].xml":
                override = f'<Override PartName="/xl/sharedStrings.xml" ContentType="{ctype}"/>'
                data = data.replace(b"</Types>", override.encode() + b"</Types>")
            if item.filename == "xl/_rels/workbook.xml.rels":
                link = f'<Relationship Id="rId2" Type="{rel}" Target="sharedStrings.xml"/>'
                data = data.replace(b"</Relationships>", link.encode() + b"</Relationships>")
            book.writestr(item, data)
        with book.open("xl/sharedStrings.xml", "w", force_zip64=True) as part:
            part.write(b'<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main">')
            per_block = min(entries, 100_000)
            block = b"".join(
                b"<si><t>%s</t></si>" % (text or b"%02d" % (i % 100)) for i in range(per_block)
            )
            for _ in range(entries // per_block):
                part.write(block)
            part.write(b"</sst>")
    return path


@pytest.mark.slow
def test_a_small_parquet_file_decoding_to_gigabytes_is_refused_in_bounded_memory(tmp_path):
    path = dictionary_bomb(tmp_path / "bomb.parquet")
    assert path.stat().st_size < 100_000
    outcome, peak = read_in_a_fresh_process(path)
    assert outcome == (
        "DataError: bomb.parquet: holds more than 2.0 GB of text once decoded (values repeated "
        "over many rows count each time); split the table or shorten its longest values"
    )
    assert peak < PEAK_BOUND, f"peak {peak / 1024**2:.0f} MB"


def test_a_parquet_file_under_the_decoded_limit_is_read_in_slices(tmp_path):
    """The same shape, within a lower limit: read whole, every row, each handed on in slices
    of bounded decoded size."""
    path = dictionary_bomb(tmp_path / "ok.parquet", rows=50_000, value_bytes=1_000)
    info = convert_to_parquet(path, tmp_path / "out.parquet", limits=Limits())
    assert info.rows == 50_000 and info.columns[0].distinct == 1
    with pytest.raises(DataError, match="more than 10.0 MB of text once decoded"):
        convert_to_parquet(
            path, tmp_path / "out2.parquet", limits=Limits(max_decoded_bytes=10 * 1024**2)
        )


@pytest.mark.slow
def test_a_workbook_of_millions_of_shared_strings_is_refused_before_loading(tmp_path):
    path = shared_strings_workbook(tmp_path / "texts.xlsx", entries=3_000_000)
    assert path.stat().st_size < 1_000_000
    outcome, peak = read_in_a_fresh_process(path)
    assert outcome == (
        "DataError: texts.xlsx: the workbook's table of texts holds more than 2,000,000 "
        "entries, the most that can be read from an Excel file; save the sheet as CSV instead"
    )
    assert peak < PEAK_BOUND, f"peak {peak / 1024**2:.0f} MB"


def test_cancelling_is_heard_while_the_shared_strings_are_checked(tmp_path):
    """The progress callback (the job's, which raises on cancel) is called while the
    shared-string table is scanned, before openpyxl loads anything."""
    path = shared_strings_workbook(tmp_path / "texts.xlsx", entries=1_500_000)
    messages: list[str] = []

    class Cancelled(Exception):
        pass

    def progress(fraction: float, message: str) -> None:
        messages.append(message)
        if "texts of the workbook" in message:
            raise Cancelled

    with pytest.raises(Cancelled):
        convert_to_parquet(path, tmp_path / "out" / "t.parquet", progress=progress)
    assert messages[-1].startswith("checked ") and "texts of the workbook" in messages[-1]
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []


def test_a_workbook_under_the_shared_string_limit_reads(tmp_path):
    path = shared_strings_workbook(tmp_path / "texts.xlsx", entries=100_000)
    info = convert_to_parquet(path, tmp_path / "t.parquet")
    assert info.rows == 1 and info.columns[0].name == "00"


def test_one_shared_string_referenced_by_every_cell_counts_each_time(tmp_path):
    """A workbook's text is bounded as it decodes, not as it is stored: one 10 KB text,
    stored once, named by 3,000 cells is 30 MB of text."""
    path = shared_strings_workbook(tmp_path / "t.xlsx", entries=2, text=b"y" * 10_000, rows=3001)
    limits = Limits(max_name_length=20_000)
    assert convert_to_parquet(path, tmp_path / "a.parquet", limits=limits).rows == 3000
    with pytest.raises(DataError, match=r"more than 1.0 MB of text once decoded"):
        convert_to_parquet(
            path,
            tmp_path / "b.parquet",
            limits=Limits(max_name_length=20_000, max_decoded_bytes=1024**2),
        )
