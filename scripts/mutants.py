"""A small mutation run: does a test selection notice when one module's logic changes?

For one module, every site of these changes is a mutant:

* comparisons flipped: ``<`` and ``<=``, ``>`` and ``>=``, ``==`` and ``!=`` (and ``is`` and
  ``is not``, ``in`` and ``not in``);
* numeric constants changed: 0 becomes 1, 1 becomes 0, any other c becomes c + 1;
* ``and`` and ``or`` swapped, ``not x`` becomes ``x``;
* ``+`` and ``-`` swapped (``+=`` and ``-=`` too).

Each mutant runs the pytest selection in its own process, with a per-mutant timeout. The
working tree is never edited: the process gets a ``sitecustomize`` on its PYTHONPATH that
installs an import hook compiling the mutated syntax tree in place of the module's file (the
module's cached bytecode is bypassed). A mutant is *killed* when the selection fails, *survives*
when it passes, *timeout* when it runs past the limit (counted as detected: a loop the change
made endless).

A surviving mutant either shows a test that is missing or is *equivalent*: no input can tell
it apart from the module (``0 <= t`` against ``0 < t`` where the other branch gives the same
answer at the boundary). :data:`EQUIVALENT` lists the ones judged equivalent, keyed by the
stripped line text and the change, with the reason; they are printed apart and not counted as
survivors.

    python scripts/mutants.py anonweb/core/risk/reidentification.py -- tests/core -q -x
    python scripts/mutants.py anonweb/core/models/recursive_l.py --list
"""

from __future__ import annotations

import argparse
import ast
import importlib.abc
import importlib.machinery
import importlib.util
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

# (stripped line text, change) -> why no test can kill it.
EQUIVALENT: dict[tuple[str, str], str] = {
    (
        'threshold_key(t): {"count": c, "share": c / self.rows if self.rows else 0.0}',
        "0.0 -> 1.0",
    ): "no risk has zero rows: an empty table is refused before its classes are formed"
    " ('the table has no rows'), so the else branch is never taken",
    (
        "return np.asarray(self.measure(data) * 2.0**self.delta > 1.0 - COVERAGE_MARGIN)",
        "> -> >=",
    ): "differs only when Q * 2**delta is exactly 1 - 1e-9 in floating point: there the"
    " class's largest ratio is within float error of 2**delta, so neither answer is wrong,"
    " which is why the margin is there",
    (
        """value = _AFTER_LINE_BREAK.sub(lambda m: m.group(1) + "'", value)""",
        "1 -> 0",
    ): "the pattern's whole match is its one group (the rest is a lookahead), so group(0) and"
    " group(1) are the same text",
}

_COMPARE_FLIP: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
_OP_TEXT = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.In: "in",
    ast.NotIn: "not in",
    ast.And: "and",
    ast.Or: "or",
    ast.Add: "+",
    ast.Sub: "-",
}


@dataclass(frozen=True)
class Mutant:
    index: int  # position in :func:`mutants` order, stable for one source text
    line: int
    change: str  # "< -> <=", "0.2 -> 1.2", "and -> or", "drop not", "+ -> -"
    text: str  # the stripped source line


def _docstring_ids(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _annotation_ids(tree: ast.AST) -> set[int]:
    """Nodes inside annotations: never evaluated under ``from __future__ import annotations``."""
    out: set[int] = set()
    for node in ast.walk(tree):
        roots: list[ast.AST | None] = []
        if isinstance(node, ast.arg):
            roots.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            roots.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            roots.append(node.annotation)
        for r in roots:
            if r is not None:
                out.update(id(n) for n in ast.walk(r))
    return out


def _new_constant(value: float) -> float:
    if value == 0:
        return type(value)(1)
    if value == 1:
        return type(value)(0)
    return value + 1


def _sites(tree: ast.AST) -> Iterator[tuple[ast.AST, int, str, Any]]:
    """(node, line, change, how) for every mutation site, in a fixed order."""
    skip = _docstring_ids(tree) | _annotation_ids(tree)
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                new = _COMPARE_FLIP.get(type(op))
                if new is not None:
                    change = f"{_OP_TEXT[type(op)]} -> {_OP_TEXT[new]}"
                    yield node, node.lineno, change, ("compare", i, new)
        elif isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, int | float) and not isinstance(v, bool):
                new_value = _new_constant(v)
                yield node, node.lineno, f"{v!r} -> {new_value!r}", ("constant", new_value)
        elif isinstance(node, ast.BoolOp):
            new_op = ast.Or if isinstance(node.op, ast.And) else ast.And
            change = f"{_OP_TEXT[type(node.op)]} -> {_OP_TEXT[new_op]}"
            yield node, node.lineno, change, ("boolop", new_op)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield node, node.lineno, "drop not", ("drop_not",)
        elif isinstance(node, ast.BinOp | ast.AugAssign) and isinstance(node.op, ast.Add | ast.Sub):
            new_bin = ast.Sub if isinstance(node.op, ast.Add) else ast.Add
            change = f"{_OP_TEXT[type(node.op)]} -> {_OP_TEXT[new_bin]}"
            yield node, node.lineno, change, ("binop", new_bin)


def mutants(source: str) -> list[Mutant]:
    lines = source.splitlines()
    tree = ast.parse(source)
    return [
        Mutant(i, line, change, lines[line - 1].strip())
        for i, (_, line, change, _) in enumerate(_sites(tree))
    ]


def _replace_child(tree: ast.AST, old: ast.AST, new: ast.AST) -> None:
    for parent in ast.walk(tree):
        for name, value in ast.iter_fields(parent):
            if value is old:
                setattr(parent, name, new)
                return
            if isinstance(value, list):
                for i, item in enumerate(value):
                    if item is old:
                        value[i] = new
                        return
    raise LookupError("mutation site not found")


def mutated_tree(source: str, index: int) -> ast.Module:
    tree = ast.parse(source)
    for i, (node, _, _, how) in enumerate(_sites(tree)):
        if i != index:
            continue
        kind = how[0]
        if kind == "compare":
            assert isinstance(node, ast.Compare)
            node.ops[how[1]] = how[2]()
        elif kind == "constant":
            assert isinstance(node, ast.Constant)
            node.value = how[1]
        elif kind == "boolop":
            assert isinstance(node, ast.BoolOp)
            node.op = how[1]()
        elif kind == "drop_not":
            assert isinstance(node, ast.UnaryOp)
            _replace_child(tree, node, node.operand)
        elif kind == "binop":
            assert isinstance(node, ast.BinOp | ast.AugAssign)
            node.op = how[1]()
        return ast.fix_missing_locations(tree)
    raise IndexError(f"no mutant {index}")


# --- inside the test process ---------------------------------------------------------------


class _MutantLoader(importlib.machinery.SourceFileLoader):
    def __init__(self, fullname: str, path: str, index: int) -> None:
        super().__init__(fullname, path)
        self.index = index

    def get_code(self, fullname: str) -> Any:
        # never the cached bytecode of the unmutated file
        source = Path(self.path).read_text(encoding="utf-8")
        return compile(mutated_tree(source, self.index), self.path, "exec", dont_inherit=True)


class _MutantFinder(importlib.abc.MetaPathFinder):
    def __init__(self, fullname: str, path: str, index: int) -> None:
        self.fullname, self.path, self.index = fullname, path, index

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname != self.fullname:
            return None
        loader = _MutantLoader(fullname, self.path, self.index)
        return importlib.util.spec_from_file_location(fullname, self.path, loader=loader)


def install_from_env() -> None:
    """Called by the generated ``sitecustomize``: ANONWEB_MUTANT is ``module:path:index``."""
    spec = os.environ.get("ANONWEB_MUTANT")
    if not spec:
        return
    fullname, path, index = spec.rsplit(":", 2)
    sys.meta_path.insert(0, _MutantFinder(fullname, path, int(index)))


# --- the run -------------------------------------------------------------------------------


def module_name(path: Path) -> str:
    rel = path.resolve().relative_to(ROOT).with_suffix("")
    return ".".join(rel.parts)


def run_selection(
    pytest_args: Sequence[str], env: dict[str, str], timeout: float
) -> tuple[str, float]:
    """("passed" | "failed" | "timeout", seconds) of one pytest run in its own process group."""
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *pytest_args]
    start = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        return "timeout", time.monotonic() - start
    return ("passed" if rc == 0 else "failed"), time.monotonic() - start


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("module", type=Path, help="the module to mutate, a path under the repo")
    parser.add_argument("--list", action="store_true", help="list the mutants and stop")
    parser.add_argument(
        "--timeout", type=float, help="seconds per mutant (default: 5 x the clean run + 10)"
    )
    parser.add_argument(
        "--only", type=int, nargs="*", help="run only these mutant indexes (from --list)"
    )
    parser.add_argument(
        "pytest_args", nargs="*", help="the selection, after --  (default: tests/core -q -x)"
    )
    args = parser.parse_args(argv)
    path = args.module.resolve()
    source = path.read_text(encoding="utf-8")
    all_mutants = mutants(source)
    if args.list:
        for m in all_mutants:
            print(f"{m.index:4d}  line {m.line:4d}  {m.change:14s}  {m.text}")
        return 0
    selection = args.pytest_args or ["tests/core", "-q", "-x"]
    chosen = [m for m in all_mutants if args.only is None or m.index in args.only]

    with tempfile.TemporaryDirectory(prefix="mutants-") as hook_dir:
        Path(hook_dir, "sitecustomize.py").write_text(
            "import mutants\nmutants.install_from_env()\n", encoding="utf-8"
        )
        base_env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        base_env["PYTHONPATH"] = os.pathsep.join(
            [hook_dir, str(ROOT / "scripts"), str(ROOT), base_env.get("PYTHONPATH", "")]
        ).rstrip(os.pathsep)
        base_env.pop("ANONWEB_MUTANT", None)

        outcome, clean_seconds = run_selection(selection, base_env, timeout=3600)
        if outcome != "passed":
            print(f"the selection fails without any mutant ({outcome}): fix it first")
            return 2
        timeout = args.timeout or 5 * clean_seconds + 10
        print(
            f"{module_name(path)}: {len(chosen)} mutants; selection {' '.join(selection)} "
            f"passes clean in {clean_seconds:.1f}s; timeout {timeout:.0f}s per mutant"
        )
        results: dict[str, list[Mutant]] = {"killed": [], "survived": [], "timeout": []}
        for m in chosen:
            env = dict(base_env, ANONWEB_MUTANT=f"{module_name(path)}:{path}:{m.index}")
            outcome, seconds = run_selection(selection, env, timeout)
            key = {"failed": "killed", "passed": "survived", "timeout": "timeout"}[outcome]
            results[key].append(m)
            print(f"  {m.index:4d}  line {m.line:4d}  {m.change:14s}  {key:8s} {seconds:5.1f}s")
            sys.stdout.flush()

    equivalent = [m for m in results["survived"] if (m.text, m.change) in EQUIVALENT]
    survived = [m for m in results["survived"] if (m.text, m.change) not in EQUIVALENT]
    print()
    print(
        f"{module_name(path)}: {len(chosen)} mutants, {len(results['killed'])} killed, "
        f"{len(results['timeout'])} timeout, {len(survived)} survived, "
        f"{len(equivalent)} equivalent"
    )
    for m in survived:
        print(f"  survived    line {m.line:4d}  {m.change:14s}  {m.text}")
    for m in equivalent:
        print(f"  equivalent  line {m.line:4d}  {m.change:14s}  {m.text}")
        print(f"              {EQUIVALENT[(m.text, m.change)]}")
    return 1 if survived else 0


if __name__ == "__main__":
    sys.exit(main())
