"""The tree is formatted and linted the way CI expects (ruff is a development dependency)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


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
