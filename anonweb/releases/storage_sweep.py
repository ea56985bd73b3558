"""Removing what interrupted writes leave on disk.

Dataset and release files are written to ``.tmp-*`` names and renamed into place, and the
database row is written after the files; a process killed in between (SIGKILL, a lost machine)
leaves a temporary folder, or a folder that no row points to. Nothing reads those, but they can
hold raw or released rows, so they are removed once they are old enough that no write can still
be under way."""

from __future__ import annotations

import shutil
import time
import uuid
from datetime import timedelta
from pathlib import Path

from django.conf import settings

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
    doomed += _orphans(
        releases,
        lambda keys: Release.objects.filter(storage_key__in=keys).values_list(
            "storage_key", flat=True
        ),
        cutoff,
    )
    # A dataset whose upload could not be read keeps its row (with the reason), not its files.
    doomed += _orphans(
        datasets,
        lambda keys: (
            Dataset.objects.filter(storage_key__in=keys)
            .exclude(status=DatasetStatus.FAILED)
            .values_list("storage_key", flat=True)
        ),
        cutoff,
    )
    for path in doomed:
        _remove(path)
    return sorted(str(p.relative_to(media)) for p in doomed)
