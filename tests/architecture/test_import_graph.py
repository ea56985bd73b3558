"""No two files of the package import each other, directly or round a circle, and no import is
guarded so that a failure could go unnoticed.

Every import statement counts, those inside functions and under ``TYPE_CHECKING`` too: an
import moved into a function to dodge a circle is still a dependency. ``from . import x`` is
resolved; ``import a.b.c`` and ``from a.b import c`` depend on ``a.b.c`` and also run the
``__init__`` of each package the importer is not already inside.

An ``except ImportError`` (or ``ModuleNotFoundError``) would turn a broken module into missing
steps or missing risk figures in a report, so the package has none."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "anonweb"


def _modules(package: Path) -> dict[str, Path]:
    found = {}
    for path in sorted(package.rglob("*.py")):
        parts = path.relative_to(package.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def _targets(tree: ast.AST, module: str, is_package: bool) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of every module an import statement names; relative ones resolved."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            yield node.lineno, target
            for alias in node.names:
                yield node.lineno, f"{target}.{alias.name}"


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """File-level import graph of ``package``: module name -> the package's modules it imports."""
    modules = _modules(package)
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        is_package = path.name == "__init__.py"
        own = module if is_package else module.rpartition(".")[0]
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for _, target in _targets(tree, module, is_package):
            parts = target.split(".")
            for i in range(1, len(parts) + 1):
                name = ".".join(parts[:i])
                if name not in modules or name == module:
                    continue
                # importing a.b.c runs a/__init__ and a/b/__init__, unless already inside them
                if own == name or own.startswith(name + "."):
                    continue
                graph[module].add(name)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def test_the_graph_sees_imports_inside_functions_relative_ones_and_package_inits(tmp_path):
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from pkg.sub import a\n")
    (pkg / "sub" / "a.py").write_text("def f():\n    from .. import b\n")
    (pkg / "sub" / "c.py").write_text("")
    (pkg / "b.py").write_text("from pkg.sub import c\n")
    graph = import_graph(pkg)
    assert graph["pkg.sub.a"] == {"pkg.b"}
    assert graph["pkg.b"] == {"pkg.sub", "pkg.sub.c"}  # importing pkg.sub.c runs pkg/sub/__init__
    assert graph["pkg.sub"] == {"pkg.sub.a"}  # not its own __init__
    assert circles(graph) == [["pkg.b", "pkg.sub", "pkg.sub.a"]]
    (pkg / "sub" / "a.py").write_text("")
    assert circles(import_graph(pkg)) == []


def test_no_import_circles_in_the_package():
    found = circles(import_graph())
    assert not found, "import circles:\n" + "\n".join(", ".join(c) for c in found)


def _guards(path: Path) -> Iterator[int]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ExceptHandler) and node.type is not None:
            types = node.type.elts if isinstance(node.type, ast.Tuple) else [node.type]
            names = {t.id if isinstance(t, ast.Name) else getattr(t, "attr", "") for t in types}
            if names & {"ImportError", "ModuleNotFoundError"}:
                yield node.lineno


def test_no_import_is_guarded():
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line in _guards(path)
    ]
    assert not found, "except ImportError at " + ", ".join(found)
