"""The options every command gives for reading its input table, beside ``--sep``."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def add_reading_options(parser: Any) -> None:
    parser.add_argument(
        "--sheet",
        default=None,
        help="the sheet of an Excel input to read (needed when the workbook has several)",
    )
    parser.add_argument(
        "--decimal",
        default=".",
        choices=[".", ","],
        help="decimal mark of text inputs (default: the point; ',' reads 3,5 and 1.234,5)",
    )


def reading(options: dict[str, Any], *, main: bool = True) -> dict[str, Any]:
    """``read_table`` keywords for the command's main input (``main``) or another table: the
    sheet names a sheet of the main input only."""
    return {"sheet": options.get("sheet") if main else None, "decimal": options["decimal"]}


def file_labels(paths: list[str]) -> list[str]:
    """Release files' labels: file names, full paths where two files share a name, numbered if
    given twice."""
    names = [Path(p).name for p in paths]
    labels = [n if names.count(n) == 1 else str(p) for n, p in zip(names, paths, strict=True)]
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        seen[label] = seen.get(label, 0) + 1
        out.append(label if seen[label] == 1 else f"{label} ({seen[label]})")
    return out


def add_engine_options(parser: Any) -> None:
    """Which engine reads the rows (see ``anonweb.core.engine.select``), and DuckDB's memory."""
    parser.add_argument(
        "--engine",
        default=None,
        choices=["auto", "pandas", "duckdb", "spark"],
        help="where the rows are read: in memory (pandas), out of core (duckdb) or on a Spark "
        "cluster (spark); default ANONWEB_ENGINE or auto (by the table's rows)",
    )
    parser.add_argument(
        "--memory-limit",
        default=None,
        metavar="SIZE",
        help="DuckDB's memory ceiling, e.g. 2GB (it spills to disk beyond it)",
    )
