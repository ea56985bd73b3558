"""The computation commands run with no settings at all: no SECRET_KEY, no DEBUG, no database,
through the ``anonweb`` console script and through ``manage.py``; the web keeps its strict
check."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "fixtures"
BARE = {
    k: v
    for k, v in os.environ.items()
    if k not in ("SECRET_KEY", "DEBUG", "DJANGO_SETTINGS_MODULE", "DATABASE_URL")
}


def _run(cmd: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, env=BARE, capture_output=True, text=True, timeout=180)


def _script() -> list[str]:
    exe = Path(sys.executable).with_name("anonweb")
    if not exe.exists():
        pytest.fail("the anonweb console script is not installed: run ./test.sh (pip install -e .)")
    return [str(exe)]


def test_assess_runs_from_the_console_script_with_no_settings(tmp_path):
    p = _run(
        [*_script(), "assess", str(FIX / "test2.csv"), "--qi", "ZIPCode,Age", "--format", "json"],
        cwd=tmp_path,  # not the project folder: an installed package, nothing else
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["k"] == 1


def test_anonymize_runs_from_the_console_script_with_no_settings(tmp_path):
    out = tmp_path / "out.csv"
    p = _run(
        [
            *_script(),
            "anonymize",
            str(FIX / "test2.csv"),
            "--qi",
            "ZIPCode,Age",
            "--hierarchy",
            f"ZIPCode={FIX / 'test2_hierarchy_ZIPCode.csv'}",
            "--hierarchy",
            f"Age={FIX / 'test2_hierarchy_Age.csv'}",
            "--k",
            "3",
            "--out",
            str(out),
            "--purpose",
            "smoke test",
            "--recipient",
            "test suite",
        ],
        cwd=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    assert "information loss" in p.stdout and out.exists()


def test_bad_input_and_unknown_commands_exit_2(tmp_path):
    p = _run([*_script(), "assess", str(tmp_path / "nope.csv"), "--qi", "a"], cwd=tmp_path)
    assert p.returncode == 2 and "no such file" in p.stderr
    p = _run([*_script(), "migrate"], cwd=tmp_path)
    assert p.returncode == 2 and "unknown command" in p.stderr
    p = _run([*_script(), "--help"], cwd=tmp_path)
    assert p.returncode == 0 and "assess" in p.stdout


def test_manage_py_runs_the_computation_commands_with_no_settings():
    p = _run(
        [sys.executable, "manage.py", "assess", str(FIX / "test2.csv"), "--qi", "ZIPCode,Age"],
        cwd=ROOT,
    )
    assert p.returncode == 0, p.stderr
    assert "k = 1" in p.stdout


def test_the_web_still_refuses_to_start_without_a_secret():
    p = _run([sys.executable, "manage.py", "check"], cwd=ROOT)
    assert p.returncode != 0 and "SECRET_KEY is not set" in p.stderr


def test_the_script_lists_the_commands_that_need_no_settings():
    from anonweb.cli.main import COMMANDS

    commands = Path(ROOT / "anonweb" / "cli" / "management" / "commands")
    assert set(COMMANDS) == {p.stem for p in commands.glob("*.py") if p.stem != "__init__"}


_FINISH = """
import atexit, sys, tempfile, pathlib
from anonweb.cli.main import finish
folder = tempfile.TemporaryDirectory()
pathlib.Path(sys.argv[1]).write_text(folder.name)
atexit.register(lambda: sys.stdout.write(" cleaned"))
sys.stdout.write("report")
finish(int(sys.argv[2]))
"""


@pytest.mark.parametrize("status", [0, 3])
def test_finish_keeps_the_status_output_and_python_clean_up(tmp_path, status):
    # The commands leave through finish(), which skips the native teardown where pyarrow's
    # thread pools can abort a finished run; what Python cleans up at exit must still happen.
    where = tmp_path / "where"
    p = _run([sys.executable, "-c", _FINISH, str(where), str(status)], cwd=ROOT)
    assert p.returncode == status, p.stderr
    assert p.stdout == "report cleaned"
    assert not Path(where.read_text()).exists()  # the temporary directory was removed


def test_commands_leave_through_finish(tmp_path):
    # both entry points end in finish(): the console script and manage.py
    probe = (
        "import sys, anonweb.cli.main as m\n"
        "m.finish = lambda code: (sys.stdout.write(f'finish {code}'), sys.stdout.flush(),"
        " __import__('os')._exit(code))\n"
        "sys.argv = [sys.argv[1], 'assess', '--help']\n"
    )
    p = _run([sys.executable, "-c", probe + "m.run()", "anonweb"], cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert p.stdout.endswith("finish 0")
    manage = probe + "import runpy; runpy.run_path('manage.py', run_name='__main__')"
    p = _run([sys.executable, "-c", manage, "manage.py"], cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert p.stdout.endswith("finish 0")
