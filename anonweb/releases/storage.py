"""Release files: written to a hidden temporary folder and renamed into place, so nothing
half-written is ever visible as a release."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from django.conf import settings

from anonweb.core.conflicts.inference import Aggregate
from anonweb.core.errors import DataError

# The CSV protections live in the core's release path; imported here for the writers.
from anonweb.core.io.export import (  # noqa: F401
    FORMULA_PREFIXES,
    download_format,
    neutralise_cell,
    neutralise_frame,
    safe_csv_bytes,
    safe_xlsx_bytes,
)


def release_dir(storage_key) -> Path:
    return Path(settings.MEDIA_ROOT) / "releases" / str(storage_key)


PRIVATE_DIR = "private"  # never served: how published rows map to source rows
LINEAGE_FILE = "lineage.json"


def write_release_files(
    storage_key,
    df: pd.DataFrame,
    *,
    source_rows: np.ndarray | None = None,
    aggregates: Sequence[Aggregate] = (),
    dp: bool = False,
) -> str:
    """Write data.parquet and data.csv atomically; return the CSV's SHA-256.

    The release's lineage is kept privately so that later releases can be checked for
    conflicts with this one: ``source_rows[j]`` is the source row of published row ``j``;
    ``aggregates`` what it published about numeric columns over groups of source records (their
    members and figures); ``dp`` marks a differentially private output."""
    final = release_dir(storage_key)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=".tmp-"))
    try:
        (tmp / PRIVATE_DIR).mkdir()
        _write_lineage(tmp / PRIVATE_DIR, source_rows, aggregates, dp)
        df.to_parquet(tmp / "data.parquet", index=False)
        data = safe_csv_bytes(df)
        (tmp / "data.csv").write_bytes(data)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return hashlib.sha256(data).hexdigest()


XLSX_MAX_ROWS = 1_048_575  # one row of the sheet holds the header
# The xlsx download is not stored: it is written on each request from this stored file (its
# bytes carry the time they were written, so they have no fixed hash).
XLSX_SOURCE = "data.parquet"


def xlsx_offered(rows: int) -> bool:
    """Whether a release of ``rows`` rows can be downloaded as xlsx (a sheet's size)."""
    return rows <= XLSX_MAX_ROWS


def release_file(storage_key, fmt: str) -> Path | bytes:
    """A release's published table as a file: ``csv`` and ``parquet`` are stored (their path),
    ``xlsx`` is written from :data:`XLSX_SOURCE` with every text cell neutralised as in the CSV
    (its bytes). Raises Http404 when the files are missing."""
    from django.http import Http404

    fmt = download_format(fmt)
    folder = release_dir(storage_key)
    stored = {"csv": folder / "data.csv", "parquet": folder / "data.parquet"}
    source = stored.get(fmt, folder / XLSX_SOURCE)
    if not source.exists():
        raise Http404("The release file is missing.")
    if fmt in stored:
        return source
    df = pd.read_parquet(source)
    if not xlsx_offered(len(df)):
        raise DataError(
            f"the release has {len(df):,} rows, more than a spreadsheet holds "
            f"({XLSX_MAX_ROWS:,}); download it as csv or parquet"
        )
    return safe_xlsx_bytes(df)


def _write_lineage(folder: Path, source_rows, aggregates, dp: bool) -> None:
    if source_rows is not None:
        np.save(folder / "source_rows.npy", np.asarray(source_rows, dtype=np.int64))
    arrays = {}
    for i, a in enumerate(aggregates):
        arrays[f"groups_{i}"] = np.asarray(a.groups, dtype=np.int64)
        arrays[f"figures_{i}"] = np.asarray(a.figures, dtype=float)
    if arrays:
        np.savez(folder / "aggregates.npz", **arrays)
    meta = {
        "dp": bool(dp),
        "record_level": source_rows is not None,
        "aggregates": [
            {
                "column": str(a.column),
                "statistic": a.statistic,
                "table": bool(a.table),
                "precision": float(a.precision),
            }
            for a in aggregates
        ],
    }
    (folder / LINEAGE_FILE).write_text(json.dumps(meta))


@dataclass(frozen=True)
class Lineage:
    """A release as the conflict check reads it: published rows, their source rows, the
    aggregates it published (labelled with ``label``) and whether it is DP."""

    frame: pd.DataFrame | None
    rows: np.ndarray | None
    aggregates: tuple[Aggregate, ...]
    dp: bool


def load_lineage(storage_key, *, label: str) -> Lineage:
    folder = release_dir(storage_key)
    private = folder / PRIVATE_DIR
    meta_path = private / LINEAGE_FILE
    meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
    rows = None
    frame = None
    if (private / "source_rows.npy").exists():
        rows = np.load(private / "source_rows.npy")
        frame = pd.read_parquet(folder / "data.parquet")
    aggregates: list[Aggregate] = []
    if meta.get("aggregates"):
        with np.load(private / "aggregates.npz") as arrays:
            for i, spec in enumerate(meta["aggregates"]):
                aggregates.append(
                    Aggregate(
                        label,
                        spec["column"],
                        arrays[f"groups_{i}"],
                        arrays[f"figures_{i}"],
                        spec.get("statistic", "mean"),
                        bool(spec.get("table", False)),
                        float(spec.get("precision", 0.0)),
                    )
                )
    return Lineage(frame, rows, tuple(aggregates), bool(meta.get("dp", False)))


def write_private_json(storage_key, name: str, data) -> None:
    """A private file beside the lineage (written to a temporary name and renamed)."""
    private = release_dir(storage_key) / PRIVATE_DIR
    private.mkdir(parents=True, exist_ok=True)
    tmp = private / f".{name}.tmp"
    try:
        tmp.write_text(json.dumps(data))
        os.replace(tmp, private / name)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def read_private_json(storage_key, name: str):
    path = release_dir(storage_key) / PRIVATE_DIR / name
    return json.loads(path.read_text()) if path.exists() else None


def remove_release_files(storage_key) -> None:
    shutil.rmtree(release_dir(storage_key), ignore_errors=True)


def load_aligned(storage_key) -> pd.DataFrame | None:
    """The release's rows in source order, or None if it is not a row-per-source-row release."""
    folder = release_dir(storage_key)
    index_path = folder / PRIVATE_DIR / "source_rows.npy"
    if not index_path.exists():
        return None
    source_rows = np.load(index_path)
    published = pd.read_parquet(folder / "data.parquet")
    aligned = published.iloc[np.argsort(source_rows, kind="stable")]
    return aligned.reset_index(drop=True)
