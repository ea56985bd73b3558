"""Real servers and real worker processes.

``celery_worker_process`` starts ``celery worker`` as a subprocess with the same settings as the
test process, pointed at the test database, on a queue of its own so stale messages from other
runs cannot interfere.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from tests.conftest import REQUIRE_SERVICES, ROOT, unavailable

REDIS_URL = os.environ.get("ANONWEB_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


def test_database_url() -> str:
    s = connection.settings_dict
    if connection.vendor == "sqlite":
        return f"sqlite:///{Path(s['NAME']).resolve()}"
    if connection.vendor == "postgresql":
        auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
        return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"
    raise RuntimeError(f"unsupported test database {connection.vendor}")


@pytest.fixture
def redis_url():
    import redis

    try:
        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
        client.ping()
    except Exception as exc:
        unavailable(
            f"Redis not reachable at {REDIS_URL} ({type(exc).__name__})", required=REQUIRE_SERVICES
        )
    client.flushdb()
    yield REDIS_URL
    client.flushdb()


LEAN_OPTIONS = ["--pool=solo", "--without-heartbeat", "--without-gossip", "--without-mingle"]


class WorkerProcess:
    def __init__(self, proc: subprocess.Popen, lines: list[str], reader: threading.Thread):
        self.proc = proc
        self.lines = lines
        self.reader = reader

    def close(self) -> None:
        self.reader.join(timeout=10)
        if self.proc.stdout and not self.proc.stdout.closed:
            self.proc.stdout.close()

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(" ready." in line for line in self.lines):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        raise AssertionError("worker did not start:\n" + "".join(self.lines[-40:]))

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def broker(settings):
    """Point the test process's Celery app at a broker and a fresh queue; restore afterwards."""
    from anonweb.celery import app

    saved = (app.conf.broker_url, app.conf.broker_transport_options, app.conf.task_default_queue)
    queue = f"test-{uuid.uuid4().hex[:8]}"

    def use(url: str, options: dict | None = None) -> dict:
        app.conf.broker_url = url
        app.conf.broker_transport_options = (
            options if options is not None else settings.CELERY_BROKER_TRANSPORT_OPTIONS
        )
        app.conf.task_default_queue = queue
        app._pool = None
        app.amqp._producer_pool = None
        return {"CELERY_BROKER_URL": url, "ANONWEB_QUEUE": queue}

    yield use
    app.conf.broker_url, app.conf.broker_transport_options, app.conf.task_default_queue = saved
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture
def start_worker():
    workers: list[WorkerProcess] = []

    def start(extra_env: dict, name: str = "w1", options: list[str] | None = None) -> WorkerProcess:
        """``options`` replace the test's lean worker options (``--pool=solo``, no heartbeat,
        gossip or mingle), e.g. with those ``run.sh`` and docker-compose start it with."""
        env = dict(os.environ)
        env.update(
            DJANGO_SETTINGS_MODULE="anonweb.test_settings",
            DATABASE_URL=test_database_url(),
            ANONWEB_VAR_DIR=str(settings.VAR_DIR),
            PYTHONUNBUFFERED="1",
        )
        env.update(extra_env)
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "anonweb.celery",
                "worker",
                *(options if options is not None else LEAN_OPTIONS),
                "-n",
                f"{name}@%h",
                "--loglevel=INFO",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        lines: list[str] = []
        reader = threading.Thread(
            target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True
        )
        reader.start()
        worker = WorkerProcess(proc, lines, reader)
        workers.append(worker)
        worker.wait_ready()
        return worker

    yield start
    for w in workers:
        w.stop()
        w.close()


def wait_for(predicate, timeout: float = 60, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError("timed out waiting")


__all__ = ["REQUIRE_SERVICES", "wait_for", "test_database_url"]
