"""The core stays pure (every module imports with Django, Celery and the apps made unimportable)
and laid out by concern: each wing imports only from the wings before it."""

from __future__ import annotations

import ast
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
    return [m.name for m in pkgutil.walk_packages(anonweb.core.__path__, prefix="anonweb.core.")]


# The order data flows through the wings; a module may import from its own wing and earlier ones.
# The step registry (release.steps) sits below the step modules that register into it
# (transforms, dp); the rest of release (the plan's validation and costs, running it, the one
# list of built-in step modules, policy, publication) sits above them, since it looks steps up.
WINGS = [
    "errors",
    "numbers",
    "schema",
    "findings",
    "raw_values",
    "io",
    "risk",
    "models",
    "engine",
    "assessment",
    "search",
    "conflicts",
    "attacks",
    "release.steps",
    "transforms",
    "dp",
    "release",
    "utility",
]


def test_the_main_wings_are_there():
    mods = set(core_modules())
    for name in (
        "io.frame",
        "risk.classes",
        "assessment.profile",
        "search.flash",
        "release.plan",
        "dp.accounting",
        "dp.mechanisms",
        "conflicts.intersection",
    ):
        assert f"anonweb.core.{name}" in mods


def _wing(module: str) -> str:
    parts = module.split(".")
    two = ".".join(parts[2:4])
    return two if two in WINGS else parts[2]


def _imports(path: Path, module: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module
            if node.level:
                base = ".".join(module.split(".")[: -node.level] + [node.module])
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    return {m for m in found if m.startswith("anonweb.core.") and _wing(m) in WINGS}


def test_no_wing_imports_a_later_wing():
    core_dir = Path(anonweb.core.__file__).parent
    wrong = []
    for module in core_modules():
        rel = module.removeprefix("anonweb.core.").replace(".", "/")
        path = core_dir / (rel + ".py")
        if not path.exists():
            path = core_dir / rel / "__init__.py"
        if _wing(module) not in WINGS:
            wrong.append(f"{module} is in no known wing")
            continue
        own = WINGS.index(_wing(module))
        for imported in _imports(path, module):
            if WINGS.index(_wing(imported)) > own:
                wrong.append(f"{module} imports {imported}")
    assert not wrong, "\n".join(sorted(wrong))


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
