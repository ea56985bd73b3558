"""scripts/mutants.py: which changes it makes, that each mutant changes one site only, and that
a run reports a killed and a surviving mutant from a real pytest selection without editing the
module on disk."""

from __future__ import annotations

import ast
import importlib.util
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
_spec = importlib.util.spec_from_file_location("mutants", ROOT / "scripts" / "mutants.py")
assert _spec is not None and _spec.loader is not None
mutants = importlib.util.module_from_spec(_spec)
sys.modules["mutants"] = mutants
_spec.loader.exec_module(mutants)

SOURCE = textwrap.dedent(
    '''
    """Docstring 1 is not a number to change."""
    LIMIT: int = 5


    def check(x: float, flag: bool) -> bool:
        """Neither is 2."""
        if not flag and x >= 0:
            return x + 1 < LIMIT
        return x is None or x == 0
    '''
)


def test_the_changes_listed_for_a_small_module():
    found = [(m.line, m.change) for m in mutants.mutants(SOURCE)]
    assert sorted(found) == sorted(
        [
            (3, "5 -> 6"),
            (8, "drop not"),
            (8, "and -> or"),
            (8, ">= -> >"),
            (8, "0 -> 1"),
            (9, "< -> <="),
            (9, "+ -> -"),
            (9, "1 -> 0"),
            (10, "or -> and"),
            (10, "is -> is not"),
            (10, "== -> !="),
            (10, "0 -> 1"),
        ]
    )


@pytest.mark.parametrize("index", range(12))
def test_each_mutant_changes_exactly_one_line(index):
    original = ast.unparse(ast.parse(SOURCE)).splitlines()
    mutated = ast.unparse(mutants.mutated_tree(SOURCE, index)).splitlines()
    assert len(original) == len(mutated)
    assert sum(a != b for a, b in zip(original, mutated, strict=True)) == 1


@pytest.mark.slow
def test_a_run_reports_killed_and_surviving_mutants_and_leaves_the_file(capsys):
    # A module under the repository, a test pinning only part of it: "x > 0" is pinned at 5,
    # so flipping the comparison survives (x = 0 is not tested) and changing 0 to 1 survives,
    # but the 10 is pinned.
    package = ROOT / "var" / "mutants_selftest"
    package.mkdir(parents=True, exist_ok=True)
    module = package / "sample.py"
    module.write_text("def f(x):\n    return x > 0 and x < 10\n", encoding="utf-8")
    test = package / "test_sample.py"
    test.write_text(
        "from var.mutants_selftest.sample import f\n\n"
        "def test_f():\n    assert f(5) and not f(10)\n",
        encoding="utf-8",
    )
    before = module.read_text(encoding="utf-8")
    try:
        code = mutants.main([str(module), "--", str(test), "-q", "-x"])
    finally:
        after = module.read_text(encoding="utf-8")
        module.unlink()
        test.unlink()
        package.rmdir()
    out = capsys.readouterr().out
    assert after == before
    assert code == 1
    assert "5 mutants, 3 killed, 0 timeout, 2 survived, 0 equivalent" in out
    assert "survived    line    2  > -> >=" in out
    assert "survived    line    2  0 -> 1" in out
