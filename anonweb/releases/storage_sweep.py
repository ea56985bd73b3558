"""Removing what interrupted writes leave on disk.

Dataset and release files are written to ``.tmp-*`` names and renamed into place, and the
database row is written after the files; a process killed in between (SIGKILL, a lost machine)
leaves a temporary folder, or a folder that no row points to. Nothing reads those, but they can
hold raw or released rows, so they are removed once they are old enough that no write can still
be under way.

With the files in a bucket (``ANONWEB_STORAGE=s3``) an object is complete once visible, so only
row-less folders can be left there; they are found by listing the bucket and aged by their
objects' last-modified times. The local temporaries (``media``) are swept as before."""

from __future__ import annotations

import shutil
import time
import uuid
from datetime import timedelta
from pathlib import Path

from django.conf import settings

from anonweb.common.files import LocalFiles, files
from anonweb.datasets.models import Dataset, DatasetStatus
from anonweb.releases.models import Release

# Far longer than any write of a table's files; a folder this old is no write in progress.
LEFTOVER_AGE = timedelta(hours=6)


def _old(path: Path, cutoff: float) -> bool:
    try:
        return path.lstat().st_mtime < cutoff
    except FileNotFoundError:
        return False


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _orphans(root: Path, known_keys, cutoff: float) -> list[Path]:
    """Folders named by a storage key that no row has, older than the cutoff."""
    folders = {}
    for path in root.iterdir() if root.is_dir() else ():
        try:
            folders[uuid.UUID(path.name)] = path
        except ValueError:
            continue
    if not folders:
        return []
    known = set(known_keys(list(folders)))
    return [p for key, p in folders.items() if key not in known and _old(p, cutoff)]


def _known_releases(keys):
    return Release.objects.filter(storage_key__in=keys).values_list("storage_key", flat=True)


def _known_datasets(keys):
    # A dataset whose upload could not be read keeps its row (with the reason), not its files.
    return (
        Dataset.objects.filter(storage_key__in=keys)
        .exclude(status=DatasetStatus.FAILED)
        .values_list("storage_key", flat=True)
    )


def _bucket_orphans(folder: str, known_keys, cutoff: float) -> list[str]:
    """Folders of the bucket named by a storage key that no row has, whose newest object is
    older than the cutoff."""
    store = files()
    try:
        names, _ = store.listdir(folder)
    except FileNotFoundError:
        return []
    folders = {}
    for name in names:
        try:
            folders[uuid.UUID(name)] = f"{folder}/{name}"
        except ValueError:
            continue
    if not folders:
        return []
    known = set(known_keys(list(folders)))
    doomed = []
    for key, prefix in folders.items():
        if key in known:
            continue
        objects = store.walk(prefix)
        times = [store.get_modified_time(f"{prefix}/{n}").timestamp() for n in objects]
        if times and max(times) < cutoff:
            doomed.append(prefix)
    return doomed


def sweep_storage(*, older_than: timedelta = LEFTOVER_AGE, now: float | None = None) -> list[str]:
    """Remove stale temporaries and row-less folders under MEDIA_ROOT; return what went, as
    paths relative to MEDIA_ROOT (for the log: names only, never content)."""

    media = Path(settings.MEDIA_ROOT)
    cutoff = (time.time() if now is None else now) - older_than.total_seconds()
    releases, datasets = media / "releases", media / "datasets"
    doomed = [p for p in releases.glob(".tmp-*") if _old(p, cutoff)]
    doomed += [p for p in datasets.glob(".tmp-*") if _old(p, cutoff)]
    doomed += [p for p in datasets.glob("*/.tmp-*") if _old(p, cutoff)]
    # Uploads received by a request that died before the dataset service moved them.
    doomed += [p for p in (media / "incoming").glob("*") if _old(p, cutoff)]
    doomed += _orphans(releases, _known_releases, cutoff)
    doomed += _orphans(datasets, _known_datasets, cutoff)
    for path in doomed:
        _remove(path)
    swept = [str(p.relative_to(media)) for p in doomed]
    if not isinstance(files(), LocalFiles):
        in_bucket = _bucket_orphans("releases", _known_releases, cutoff)
        in_bucket += _bucket_orphans("datasets", _known_datasets, cutoff)
        for prefix in in_bucket:
            files().delete_prefix(prefix)
        swept += in_bucket
    return sorted(swept)
