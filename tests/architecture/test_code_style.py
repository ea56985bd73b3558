"""The tree is formatted and linted the way CI expects (ruff and mypy are development
dependencies); the package type-checks as pyproject.toml's [tool.mypy] says: the pure core under
--strict, the Django apps with the Django and DRF plugins (function bodies checked, services and
selectors fully annotated)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _ruff() -> list[str]:
    exe = Path(sys.executable).with_name("ruff")
    if exe.exists():
        return [str(exe)]
    found = shutil.which("ruff")
    if found is None:
        pytest.fail("ruff is not installed: run ./test.sh, which installs the dev dependencies")
    return [found]


@pytest.mark.parametrize(
    "args", [["format", "--check", "."], ["check", "."]], ids=["format", "lint"]
)
def test_ruff(args):
    proc = subprocess.run([*_ruff(), *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]


def test_mypy_strict_core_and_checked_apps():
    exe = Path(sys.executable).with_name("mypy")
    if not exe.exists():
        pytest.fail("mypy is not installed: run ./test.sh, which installs the dev dependencies")
    # no cache: a stale one would hide errors in files edited since
    proc = subprocess.run(
        [str(exe), "--no-incremental", "--cache-dir", "/dev/null"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
