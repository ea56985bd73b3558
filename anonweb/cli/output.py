"""Writing a command's output files: all of them or none.

Each file is written to a temporary beside its target and renamed only once every file is
complete, so a failed run never leaves a partial output or a report without its data.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO

from django.core.management.base import CommandError

Writer = Callable[[IO[str]], object]


def write_all(outputs: Iterable[tuple[str | Path, Writer | bytes | Path]]) -> None:
    """Write every ``(target, writer)`` pair or none; a problem is one CommandError line.
    ``writer`` writes text, or is the file's bytes (a binary format), or the path of a file
    already written on the target's file system (moved into place)."""
    pending: list[tuple[str, Path]] = []
    current: Path | None = None
    try:
        for target, writer in outputs:
            current = Path(target)
            if not current.resolve().parent.is_dir():
                raise CommandError(
                    f"cannot write {current}: its directory does not exist", returncode=2
                )
            fd, tmp = tempfile.mkstemp(
                prefix=f".{current.name}.", suffix=".tmp", dir=current.resolve().parent
            )
            if isinstance(writer, Path):
                # a file written already (beside the target): moved into place with the others
                os.close(fd)
                os.replace(writer, tmp)
                pending.append((tmp, current))
                continue
            pending.append((tmp, current))
            if isinstance(writer, bytes):
                with os.fdopen(fd, "wb") as raw:
                    raw.write(writer)
                continue
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
                writer(fh)
        for tmp, final in pending:
            os.replace(tmp, final)
    except OSError as exc:
        raise CommandError(f"cannot write {current}: {exc.strerror or exc}", returncode=2) from None
    finally:
        for tmp, _ in pending:
            if os.path.exists(tmp):
                os.unlink(tmp)
