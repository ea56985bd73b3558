"""Every engine gives the same figures for a Parquet table of every column type: sub-second
timestamps, timestamps with a time zone (UTC and another), dates, float32 and float64, small
and large integers with blanks, booleans with blanks, text with blanks and a dictionary
(categorical) column. ``assess`` and ``anonymize`` on ``--engine pandas``, ``duckdb`` and
``spark`` give the same JSON report, numbers to 1e-9, and releases whose cells read the same.

The values are chosen where a reading that loses a type shows: timestamps apart by a fraction
of a second only, a float32 whose float64 widening has another text (``0.1``), hierarchies
listing the values by their text."""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import math
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from anonweb.core.io.arrow_cells import read_parquet
from tests.cli.test_anonymize_engines import FIGURES as ENGINE_FIGURES
from tests.cli.test_engine_option import run
from tests.core.release.test_engine_release import DISCLOSING_LIMIT

N = 48
UTC = dt.UTC
STAMPS = [dt.datetime(2021, 3, 4, 10, 0, 0, 250_000), dt.datetime(2021, 3, 4, 10, 0, 0, 750_000)]
ZONED = [
    dt.datetime(2021, 3, 4, 23, 30, 0, 500_000, tzinfo=UTC),
    dt.datetime(2021, 3, 4, 23, 30, 0, 0, tzinfo=UTC),
    None,
]
FLOAT32 = [0.1, 0.2, 0.30000001]


def _cycle(values: list, step: int = 1) -> list:
    return [values[(i // step) % len(values)] for i in range(N)]


def _table() -> pa.Table:
    return pa.table(
        {
            "g": pa.array(_cycle(["A", "B", "C", "D"]), pa.string()),
            "ts": pa.array(_cycle(STAMPS + [None], 2), pa.timestamp("us")),
            "tsutc": pa.array(_cycle(ZONED, 3), pa.timestamp("us", tz="UTC")),
            "tsparis": pa.array(_cycle(ZONED), pa.timestamp("us", tz="Europe/Paris")),
            "day": pa.array(
                _cycle([dt.date(2021, 1, 1), dt.date(2021, 1, 2), None], 4), pa.date32()
            ),
            "f32": pa.array(_cycle(FLOAT32, 5), pa.float32()),
            "f64": pa.array(_cycle([0.1, 2.5, None]), pa.float64()),
            "i8": pa.array(_cycle([1, None, 3], 2), pa.int8()),
            "i64": pa.array(_cycle([10, 20, None, 40], 3), pa.int64()),
            "flag": pa.array(_cycle([True, False, None], 7), pa.bool_()),
            "s": pa.array(_cycle(["a", None, "b"], 5), pa.string()),
            "cat": pa.array(_cycle(["x", "y", None], 2), pa.string()).dictionary_encode(),
        }
    )


def _rows(pairs: dict[str, str]) -> dict:
    """An inline hierarchy: each value's text, its group, then ``*``."""
    return {"rows": [[value, group, "*"] for value, group in pairs.items()]}


# Each value as its text (what a hierarchy file lists), for the columns generalized.
HIERARCHIES = {
    "ts": _rows({"2021-03-04 10:00:00.250000": "morning", "2021-03-04 10:00:00.750000": "morning"}),
    "tsutc": _rows(
        {"2021-03-04 23:30:00.500000+00:00": "late", "2021-03-04 23:30:00+00:00": "late"}
    ),
    "tsparis": {"builder": "date", "levels": ["month", "year"]},
    "day": _rows({"2021-01-01": "2021-01", "2021-01-02": "2021-01"}),
    "f32": _rows({"0.1": "low", "0.2": "low", "0.3": "high"}),
    "f64": {"builder": "interval", "breaks": [0, 1, 5]},
    "i8": _rows({"1": "odd", "3": "odd"}),
    "flag": _rows({"True": "yes or no", "False": "yes or no"}),
    "s": _rows({"a": "a or b", "b": "a or b"}),
    "cat": _rows({"x": "x or y", "y": "x or y"}),
}
# Plans of a few quasi-identifiers each (a small lattice), with a sensitive column.
PLANS = {
    "stamps": (["ts", "tsutc", "tsparis"], ["i64"]),
    "numbers": (["f32", "f64", "i8"], ["cat"]),
    "kinds": (["day", "flag", "s", "cat"], ["f32"]),
}
ENGINES = ("pandas", "duckdb")
# the release's figures (the steps' timings and the like differ by engine)
FIGURES = (*ENGINE_FIGURES, "gate")


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("column-types")
    table = _table()
    pq.write_table(table, folder / "t.parquet")
    for name, (qis, sensitive) in PLANS.items():
        # only the columns the policy reads on every engine go out (the gate's findings alike)
        others = [c for c in table.column_names if c not in qis + sensitive]
        plan = {
            "quasi_identifiers": qis,
            "sensitive": sensitive,
            "hierarchies": {q: HIERARCHIES[q] for q in qis},
            "steps": [
                {"kind": "drop", "params": {"columns": others}},
                {"kind": "optimal_generalization", "params": {"k": 6, "suppression": 0.1}},
            ],
        }
        (folder / f"plan_{name}.json").write_text(json.dumps(plan))
    (folder / "c.csv").write_text(CSV + "\n")
    (folder / "plan_csv.json").write_text(json.dumps(CSV_PLAN))
    return folder


# A CSV file with what each engine's own CSV reader would read its own way: codes with a
# leading zero, true/false, "?" for a missing value, dates and times, numbers as 1e3.
CSV = "\n".join(
    ["code,flag,day,num,f,g"]
    + [
        ",".join(
            [
                ["02138", "02139", "10001"][i % 3],
                ["true", "false", ""][(i // 2) % 3],
                ["2021-01-01", "2021-01-02 10:00:00.25", ""][(i // 3) % 3],
                ["1", "2", "?", ""][i % 4],
                ["0.1", "1e3", "2.50"][(i // 4) % 3],
                ["A", "B", "C", "D", "E"][i % 5],
            ]
        )
        for i in range(N)
    ]
)
CSV_PLAN = {
    "quasi_identifiers": ["code", "flag", "num"],
    "sensitive": ["f"],
    "hierarchies": {
        "code": _rows({"02138": "021**", "02139": "021**", "10001": "100**"}),
        "flag": _rows({"true": "true or false", "false": "true or false"}),
        "num": _rows({"1": "1-2", "2": "1-2"}),
    },
    "steps": [
        {"kind": "drop", "params": {"columns": ["day", "g"]}},
        {"kind": "optimal_generalization", "params": {"k": 6, "suppression": 0.1}},
    ],
}


def same(a, b, path: str = "") -> None:
    """Equal JSON: the same keys, lists and types (an integer is not a float), floats to
    1e-9; a profile's disclosing classes as a set (their order among classes of equal size
    follows the class numbering)."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert set(a) == set(b), (path, sorted(set(a) ^ set(b)))
        for key in a:
            x, y = a[key], b[key]
            if key == "disclosing_classes":
                assert len(x) < DISCLOSING_LIMIT, path  # the whole list, not its first ones
                x, y = (sorted(v, key=lambda c: json.dumps(c, sort_keys=True)) for v in (x, y))
            same(x, y, f"{path}.{key}")
    elif isinstance(a, list) and isinstance(b, list):
        assert len(a) == len(b), (path, a, b)
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=0, abs_tol=1e-9), (path, a, b)
    else:
        assert type(a) is type(b) and a == b, (path, a, b)


def _own(report: dict, engine: str) -> dict:
    """The report without what differs by engine by design (its name, the process's memory)."""
    assert report.pop("engine") == engine
    assert report.pop("peak_memory_bytes") > 0
    published = report.get("published")
    if published is not None:
        assert published.pop("engine") == engine
    return report


def assess(folder: Path, engine: str, *args: str, table: str = "t.parquet") -> dict:
    p = run("assess", str(folder / table), *args, "--format", "json", "--engine", engine)
    assert p.returncode == 0, p.stderr[-3000:]
    return _own(json.loads(p.stdout), engine)


def anonymize(
    folder: Path, engine: str, plan: str, table: str = "t.parquet"
) -> tuple[dict, list[tuple]]:
    out, report = folder / f"{engine}-{plan}.parquet", folder / f"{engine}-{plan}.json"
    p = run(
        "anonymize", str(folder / table), "--plan", str(folder / f"plan_{plan}.json"),
        "--out", str(out), "--report", str(report), "--purpose", "tests", "--recipient", "us",
        "--engine", engine, "--seed", "3",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr[-3000:]
    released = read_parquet(out)
    cells = sorted(map(tuple, released.astype(str).to_numpy().tolist()))
    return _own(json.loads(report.read_text()), engine), cells


ASSESS = {
    "typed quasi-identifiers": ["--qi", "ts,tsutc,tsparis,day,f32,flag"],
    "numbers as quasi-identifiers": ["--qi", "f64,i8", "--sensitive", "g"],
    "text as quasi-identifiers": ["--qi", "i64,s,cat", "--sensitive", "g"],
    "typed sensitive columns": [
        "--qi", "g", "--sensitive", "ts,tsutc,tsparis,day,f32,f64,i8,i64,flag,s,cat",
    ],
}  # fmt: skip


def _check_assess(folder: Path, engines: tuple[str, ...]) -> None:
    for name, args in ASSESS.items():
        reports = {e: assess(folder, e, *args) for e in engines}
        for e in engines[1:]:
            same(reports[engines[0]], reports[e], f"{name}: {e}")
    # the values read apart on every engine: half a second, float32's own values
    typed = reports[engines[0]]
    assert typed["sensitive"]["ts"]["distinct_values"] == 3
    assert typed["sensitive"]["f32"]["distinct_values"] == 3


def _check_csv(folder: Path, engines: tuple[str, ...]) -> None:
    args = ["--qi", "code,flag,day", "--sensitive", "num,f,g"]
    reports = {e: assess(folder, e, *args, table="c.csv") for e in engines}
    for e in engines[1:]:
        same(reports[engines[0]], reports[e], f"csv: {e}")
    # "?" is a missing value, as the upload reads it: 1, 2 and the blank
    assert reports[engines[0]]["sensitive"]["num"]["distinct_values"] == 3
    _check_anonymize(folder, engines, ["csv"], table="c.csv")


def _check_anonymize(
    folder: Path, engines: tuple[str, ...], plans=tuple(PLANS), table: str = "t.parquet"
) -> None:
    for plan in plans:
        made = {e: anonymize(folder, e, plan, table) for e in engines}
        report, cells = made[engines[0]]
        assert report["rows_in"] == N
        for e in engines[1:]:
            for key in FIGURES:
                same(report[key], made[e][0][key], f"{plan}: {e}: {key}")
            assert cells == made[e][1], (plan, e)


def test_assess_gives_the_same_figures_on_pandas_and_duckdb(folder):
    _check_assess(folder, ENGINES)


def test_anonymize_gives_the_same_report_and_cells_on_pandas_and_duckdb(folder):
    _check_anonymize(folder, ENGINES)


def test_a_csv_gives_the_same_figures_and_cells_on_pandas_and_duckdb(folder):
    _check_csv(folder, ENGINES)


def _spark_ready() -> bool:
    return importlib.util.find_spec("pyspark") is not None and shutil.which("java") is not None


@pytest.mark.slow
@pytest.mark.skipif(not _spark_ready(), reason="Spark needs pyspark and a Java runtime")
def test_spark_gives_the_figures_of_pandas_for_every_column_type(folder, monkeypatch):
    monkeypatch.setenv("SPARK_LOCAL_IP", "127.0.0.1")
    monkeypatch.setenv("ANONWEB_SPARK_MASTER", "local[2]")
    _check_assess(folder, ("pandas", "spark"))
    _check_anonymize(folder, ("pandas", "spark"))
    _check_csv(folder, ("pandas", "spark"))
