"""Release files, in the application's storage (:mod:`anonweb.common.files`) under
``releases/<storage_key>/``: written in a local temporary folder, then each stored once as a
whole object (a second write of the same name is refused), so nothing half-written is ever
visible and a published release cannot be replaced."""

from __future__ import annotations

import io
import json
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from django.conf import settings

from anonweb.common.files import Stored, files
from anonweb.core.conflicts.inference import Aggregate
from anonweb.core.engine.lineage import LINEAGE_COLUMN

# The CSV protections live in the core's release path; imported here for the writers.
from anonweb.core.io.export import (  # noqa: F401
    DEFAULT_FORMAT,
    DERIVED_FROM,
    EXPORT_FORMATS,
    FORMULA_PREFIXES,
    export_format,
    export_parquet_file,
    neutralise_cell,
    neutralise_frame,
    safe_csv_bytes,
)


def parquet_shape(path: Path) -> tuple[int, list[str]]:
    """Rows and column names of a Parquet file (or folder of them), from its metadata."""
    import pyarrow.dataset as ds

    table = ds.dataset(str(path), format="parquet")
    return int(table.count_rows()), [str(c) for c in table.schema.names]


def release_dir(storage_key) -> Path:
    """The release's folder on the local disk (the local backend's layout)."""
    return Path(settings.MEDIA_ROOT) / "releases" / str(storage_key)


def release_prefix(storage_key) -> str:
    """The folder of a release's objects in the storage."""
    return f"releases/{storage_key}"


def release_object(storage_key, name: str) -> str:
    return f"{release_prefix(storage_key)}/{name}"


PRIVATE_DIR = "private"  # never served: how published rows map to source rows
LINEAGE_FILE = "lineage.json"
# The source row of each published row of a release an engine wrote (one Parquet column,
# :data:`~anonweb.core.engine.lineage.LINEAGE_COLUMN`, in data.parquet's row order); a release
# made in memory keeps them as source_rows.npy.
SOURCE_ROWS_PARQUET = "source_rows.parquet"


@dataclass(frozen=True)
class ReleaseObjects:
    """What :func:`write_release_objects` stored: the CSV's SHA-256 (the release's recorded
    hash) and each published object's name (inside the release), SHA-256 and version."""

    sha256: str
    objects: tuple[Stored, ...]

    def to_audit(self) -> list[dict[str, Any]]:
        return [o.to_dict() for o in self.objects]


def write_release_files(
    storage_key,
    df: pd.DataFrame,
    *,
    source_rows: np.ndarray | None = None,
    aggregates: Sequence[Aggregate] = (),
    dp: bool = False,
) -> str:
    """:func:`write_release_objects`, returning the CSV's SHA-256 alone."""
    return write_release_objects(
        storage_key, df, source_rows=source_rows, aggregates=aggregates, dp=dp
    ).sha256


def write_release_objects(
    storage_key,
    df: pd.DataFrame | Path,
    *,
    source_rows: np.ndarray | None = None,
    aggregates: Sequence[Aggregate] = (),
    dp: bool = False,
    lineage_file: Path | None = None,
) -> ReleaseObjects:
    """Write the release in every stored format of
    :data:`~anonweb.core.io.export.EXPORT_FORMATS` (data.parquet, data.csv) and the lineage,
    each object once (ObjectExists if one of
    them is already stored: nothing of the stored release is touched).

    The release's lineage is kept privately so that later releases can be checked for
    conflicts with this one: ``source_rows[j]`` is the source row of published row ``j``;
    ``aggregates`` what it published about numeric columns over groups of source records (their
    members and figures); ``dp`` marks a differentially private output; ``lineage_file`` is
    the source rows of an engine's release as it wrote them (:data:`SOURCE_ROWS_PARQUET`).

    The published files go last, the CSV at the very end: a release whose CSV is stored has
    every other file. ``df`` may be the Parquet file (or folder) an engine wrote the release
    to: each format is then written from it batch by batch, by the format's same writer."""
    scratch = Path(settings.MEDIA_ROOT) / "releases"
    scratch.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=scratch, prefix=".tmp-"))
    written: list[str] = []
    try:
        (tmp / PRIVATE_DIR).mkdir()
        _write_lineage(tmp / PRIVATE_DIR, source_rows, aggregates, dp)
        if lineage_file is not None:
            shutil.copyfile(lineage_file, tmp / PRIVATE_DIR / SOURCE_ROWS_PARQUET)
            meta = json.loads((tmp / PRIVATE_DIR / LINEAGE_FILE).read_text())
            (tmp / PRIVATE_DIR / LINEAGE_FILE).write_text(json.dumps(meta | {"record_level": True}))
        for fmt in EXPORT_FORMATS.values():
            if fmt.stored and isinstance(df, Path):
                export_parquet_file(df, fmt, tmp / fmt.file_name)
            elif fmt.stored:
                (tmp / fmt.file_name).write_bytes(fmt.to_bytes(df))
        private = sorted(p.name for p in (tmp / PRIVATE_DIR).iterdir())
        order = [f"{PRIVATE_DIR}/{n}" for n in private] + _published_order()
        stored = {}
        for name in order:
            stored[name] = files().put(release_object(storage_key, name), tmp / name, once=True)
            written.append(name)
    except BaseException as exc:
        if not isinstance(exc, FileExistsError):
            for name in written:
                files().delete(release_object(storage_key, name))
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return ReleaseObjects(
        stored[EXPORT_FORMATS[DEFAULT_FORMAT].file_name].sha256,
        tuple(
            Stored(name, stored[name].sha256, stored[name].version) for name in _published_order()
        ),
    )


def _published_order() -> list[str]:
    """The stored formats' files, the default format's (the CSV, whose hash is the release's)
    last: a release whose CSV is stored has every other file."""
    names = [f.file_name for f in EXPORT_FORMATS.values() if f.stored]
    default = EXPORT_FORMATS[DEFAULT_FORMAT].file_name
    return [n for n in names if n != default] + [default]


# The formats not stored are written on each request from this stored file.
DERIVED_SOURCE = EXPORT_FORMATS[DERIVED_FROM].file_name


def formats_offered(rows: int) -> list[str]:
    """The formats a release of ``rows`` rows can be downloaded in."""
    return [f.name for f in EXPORT_FORMATS.values() if f.offered(rows)]


def release_file(storage_key, fmt: str) -> Any:
    """A release's published table as a file: a stored format's object (open for reading), or a
    format written on request from :data:`DERIVED_SOURCE` by its writer (its bytes; the writer
    neutralises text cells where the format is opened by spreadsheets). Raises Http404 when the
    files are missing, a DataError when the table does not fit the format."""
    from django.http import Http404

    export = export_format(fmt)
    source = release_object(storage_key, export.file_name if export.stored else DERIVED_SOURCE)
    if not files().exists(source):
        raise Http404("The release file is missing.")
    if export.stored:
        return files().open(source, "rb")
    return export.to_bytes(_read_parquet(source))


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
    table_file: str | None = None  # data.parquet on the local disk, when left unread
    rows_file: str | None = None  # source_rows.parquet on the local disk, when left unread


def load_lineage(storage_key, *, label: str, in_memory: bool = True) -> Lineage:
    """A release's lineage. ``in_memory``: its published rows and source rows read; otherwise,
    for the check out of core on a local disk, where its published rows and an engine's
    source rows are (``table_file``, ``rows_file``), unread."""
    meta = read_private_json(storage_key, LINEAGE_FILE) or {}
    rows = read_private_array(storage_key, "source_rows.npy")
    rows_file = None
    parquet_rows = private_name(storage_key, SOURCE_ROWS_PARQUET)
    if rows is None and files().exists(parquet_rows):
        path, fs = files().arrow_location(parquet_rows)
        if in_memory or fs is not None:
            rows = _read_parquet(parquet_rows)[LINEAGE_COLUMN].to_numpy(dtype=np.int64)
        else:
            rows_file = path
    table_file = None
    if not in_memory and (rows is not None or rows_file is not None):
        path, fs = files().arrow_location(release_object(storage_key, "data.parquet"))
        table_file = path if fs is None else None
    if rows_file is not None and table_file is None:
        rows = _read_parquet(parquet_rows)[LINEAGE_COLUMN].to_numpy(dtype=np.int64)
        rows_file = None
    frame = None if rows is None or table_file is not None else read_release_table(storage_key)
    aggregates: list[Aggregate] = []
    if meta.get("aggregates"):
        raw = _read_bytes(release_object(storage_key, f"{PRIVATE_DIR}/aggregates.npz"))
        with np.load(io.BytesIO(raw)) as arrays:
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
    return Lineage(
        frame, rows, tuple(aggregates), bool(meta.get("dp", False)), table_file, rows_file
    )


def _read_bytes(name: str) -> bytes:
    with files().open(name, "rb") as fh:
        return bytes(fh.read())


def _read_parquet(name: str) -> pd.DataFrame:
    path, fs = files().arrow_location(name)
    return pd.read_parquet(path, filesystem=fs)


def read_release_table(storage_key) -> pd.DataFrame | None:
    """The published table (data.parquet), or None when it is not stored."""
    name = release_object(storage_key, "data.parquet")
    return _read_parquet(name) if files().exists(name) else None


def private_name(storage_key, name: str) -> str:
    return release_object(storage_key, f"{PRIVATE_DIR}/{name}")


def write_private_json(storage_key, name: str, data) -> None:
    """A private file beside the lineage (replaced as a whole; it may be written again)."""
    files().put(private_name(storage_key, name), json.dumps(data).encode())


def read_private_json(storage_key, name: str):
    stored = private_name(storage_key, name)
    return json.loads(_read_bytes(stored)) if files().exists(stored) else None


def write_private_array(storage_key, name: str, values: np.ndarray) -> None:
    buffer = io.BytesIO()
    np.save(buffer, values)
    files().put(private_name(storage_key, name), buffer.getvalue())


def read_private_array(storage_key, name: str) -> np.ndarray | None:
    stored = private_name(storage_key, name)
    if not files().exists(stored):
        return None
    return np.load(io.BytesIO(_read_bytes(stored)))


def read_source_rows(storage_key) -> np.ndarray | None:
    """The source row of each released row, kept privately: as the in-memory job keeps it
    (``source_rows.npy``) or as an engine wrote it (:data:`SOURCE_ROWS_PARQUET`); None when
    the release has none."""
    rows = read_private_array(storage_key, "source_rows.npy")
    parquet_rows = private_name(storage_key, SOURCE_ROWS_PARQUET)
    if rows is None and files().exists(parquet_rows):
        rows = _read_parquet(parquet_rows)[LINEAGE_COLUMN].to_numpy(dtype=np.int64)
    return rows


def remove_private_file(storage_key, name: str) -> bool:
    """Delete a private file; whether there was one."""
    stored = private_name(storage_key, name)
    if not files().exists(stored):
        return False
    files().delete(stored)
    return True


def remove_release_files(storage_key) -> None:
    files().delete_prefix(release_prefix(storage_key))


def load_aligned(storage_key) -> pd.DataFrame | None:
    """The release's rows in source order, or None if it is not a row-per-source-row release."""
    source_rows = read_private_array(storage_key, "source_rows.npy")
    if source_rows is None:
        return None
    published = read_release_table(storage_key)
    assert published is not None
    aligned = published.iloc[np.argsort(source_rows, kind="stable")]
    return aligned.reset_index(drop=True)
