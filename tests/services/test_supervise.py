"""scripts/supervise.sh, which run.sh starts the worker with: a command that exits is started
again; SIGTERM stops the command and the loop."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tests.conftest import ROOT
from tests.services.conftest import wait_for

SUPERVISE = str(ROOT / "scripts" / "supervise.sh")


def _start(tmp_path: Path, script: str) -> subprocess.Popen:
    return subprocess.Popen(
        [SUPERVISE, "worker", "sh", "-c", script],
        cwd=tmp_path,
        env={**os.environ, "ANONWEB_RESTART_DELAY": "0.2"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_command_that_exits_is_started_again(tmp_path):
    runs = tmp_path / "runs"
    proc = _start(tmp_path, "echo run >> runs; exit 3")
    try:
        wait_for(lambda: runs.exists() and len(runs.read_text().splitlines()) >= 3, timeout=20)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=10)
    assert proc.returncode == 0
    assert "the worker exited (status 3); starting it again" in err


def test_sigterm_stops_the_running_command_and_the_loop(tmp_path):
    pidfile = tmp_path / "pid"
    proc = _start(tmp_path, "echo $$ > pid; exec sleep 60")
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), timeout=20)
    child = int(pidfile.read_text())
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=10)
    assert proc.returncode == 0
    time.sleep(0.2)
    assert (
        not Path(f"/proc/{child}").exists()
        or "zombie" in Path(f"/proc/{child}/status").read_text().lower()
    )


def test_run_sh_and_docker_compose_start_the_worker_again_when_it_exits():
    import yaml

    run_sh = (ROOT / "run.sh").read_text()
    assert "scripts/supervise.sh worker .venv/bin/celery -A anonweb.celery worker" in run_sh
    worker = yaml.safe_load((ROOT / "docker-compose.yml").read_text())["services"]["worker"]
    assert worker["restart"] == "unless-stopped"
    assert "inspect ping" in " ".join(worker["healthcheck"]["test"])
