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

# The CSV protections live in the core's release path; imported here for the writers.
from anonweb.core.io.export import (  # noqa: F401
    DEFAULT_FORMAT,
    DERIVED_FROM,
    EXPORT_FORMATS,
    FORMULA_PREFIXES,
    export_format,
    neutralise_cell,
    neutralise_frame,
    safe_csv_bytes,
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
    """Write the release's file in every stored format of
    :data:`~anonweb.core.io.export.EXPORT_FORMATS` (data.csv, data.parquet) atomically; return
    the CSV's SHA-256.

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
        hashed = b""
        for fmt in EXPORT_FORMATS.values():
            if fmt.stored:
                data = fmt.to_bytes(df)
                (tmp / fmt.file_name).write_bytes(data)
                hashed = data if fmt.name == DEFAULT_FORMAT else hashed
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return hashlib.sha256(hashed).hexdigest()


# The formats not stored are written on each request from this stored file.
DERIVED_SOURCE = EXPORT_FORMATS[DERIVED_FROM].file_name


def formats_offered(rows: int) -> list[str]:
    """The formats a release of ``rows`` rows can be downloaded in."""
    return [f.name for f in EXPORT_FORMATS.values() if f.offered(rows)]


def release_file(storage_key, fmt: str) -> Path | bytes:
    """A release's published table as a file: a stored format's file (its path), or a format
    written on request from :data:`DERIVED_SOURCE` by its writer (its bytes; the writer
    neutralises text cells where the format is opened by spreadsheets). Raises Http404 when the
    files are missing, a DataError when the table does not fit the format."""
    from django.http import Http404

    export = export_format(fmt)
    folder = release_dir(storage_key)
    source = folder / (export.file_name if export.stored else DERIVED_SOURCE)
    if not source.exists():
        raise Http404("The release file is missing.")
    if export.stored:
        return source
    return export.to_bytes(pd.read_parquet(source))


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
