"""The worker survives a Redis restart while it runs a job, and takes the next job after it.

The test starts its own ``redis-server`` on a free port, so it can stop and start it; the worker
is a real ``celery worker`` process.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

import pytest

from anonweb.jobs.models import Job, JobKind, JobStatus
from anonweb.jobs.services import job_create
from tests.conftest import REQUIRE_SERVICES, unavailable
from tests.services.conftest import wait_for
from tests.web.factories import TeamFactory, member

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# The options the settings give a Redis broker (the test process itself runs on another one).
REDIS_OPTIONS = {"socket_connect_timeout": 3, "socket_timeout": 10, "max_retries": 1}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    def __init__(self, folder, port: int):
        self.folder, self.port = folder, port
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", ""]
            + ["--appendonly", "no", "--dir", str(self.folder)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        raise AssertionError("redis-server did not start")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=10)


@pytest.fixture
def redis_server(tmp_path):
    if shutil.which("redis-server") is None:
        unavailable("redis-server is not installed", required=REQUIRE_SERVICES)
    server = RedisServer(tmp_path, _free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture
def officer():
    from anonweb.accounts.models import Role

    return member(TeamFactory(), Role.PRIVACY_OFFICER)


def _launch(officer, steps: int, delay: float) -> Job:
    team = officer.memberships.get().team
    return job_create(
        user=officer, team=team, kind=JobKind.DEMO_SLEEP, params={"steps": steps, "delay": delay}
    )


def _status(job: Job) -> str:
    job.refresh_from_db()
    return job.status


def test_a_redis_restart_during_a_job_leaves_the_worker_taking_the_next(
    officer, broker, start_worker, redis_server, tmp_path
):
    env = broker(redis_server.url, REDIS_OPTIONS)
    # As run.sh and docker-compose start it: prefork pool, heartbeat, gossip, mingle, beat.
    worker = start_worker(
        env,
        options=["--concurrency=2", "--beat", "--schedule", str(tmp_path / "beat-schedule")],
    )
    first = _launch(officer, steps=16, delay=0.5)
    wait_for(lambda: Job.objects.get(pk=first.pk).progress >= 10, timeout=60)
    redis_server.stop()
    time.sleep(2)
    redis_server.start()
    wait_for(lambda: _status(first) in (JobStatus.SUCCEEDED, JobStatus.FAILED), timeout=60)
    assert first.status == JobStatus.SUCCEEDED, first.error
    second = _launch(officer, steps=2, delay=0.1)
    try:
        wait_for(lambda: _status(second) == JobStatus.SUCCEEDED, timeout=60)
    except AssertionError:
        raise AssertionError(
            f"the next job stayed {second.status}; worker exit code {worker.proc.poll()}:\n"
            + "".join(worker.lines[-30:])
        ) from None
    assert worker.proc.poll() is None, "".join(worker.lines[-30:])
    assert not any("Unrecoverable error" in line for line in worker.lines)
