"""The core stays pure: every module imports with Django, Celery and the apps made unimportable."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

import anonweb.core

ROOT = Path(__file__).resolve().parents[2]

BLOCKER = """
import importlib.abc, sys

class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.split(".")[0]
        if top in ("django", "celery", "kombu"):
            raise ImportError(f"blocked: {name}")
        parts = name.split(".")
        if top == "anonweb" and len(parts) > 1 and parts[1] != "core":
            raise ImportError(f"blocked: {name}")
        return None

sys.meta_path.insert(0, Block())
import importlib
for name in sys.argv[1:]:
    importlib.import_module(name)
leaked = sorted(m for m in sys.modules if m.split(".")[0] in ("django", "celery"))
assert not leaked, leaked
print("ok", len(sys.argv) - 1)
"""


def core_modules() -> list[str]:
    return [
        m.name
        for m in pkgutil.walk_packages(anonweb.core.__path__, prefix="anonweb.core.")
    ]


def test_risk_modules_are_listed():
    mods = set(core_modules())
    for name in ("classes", "risk", "population", "linkage", "diversity", "closeness", "profile"):
        assert f"anonweb.core.{name}" in mods


def test_every_core_module_imports_without_django_celery_or_apps():
    mods = core_modules()
    proc = subprocess.run(
        [sys.executable, "-c", BLOCKER, *mods],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == f"ok {len(mods)}"
