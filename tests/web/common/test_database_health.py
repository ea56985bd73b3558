"""A kept PostgreSQL connection is checked before a request reuses it without a query while the
server has sent nothing on it, and replaced when the server has ended it
(``anonweb/common/postgresql``; ``tests/services/test_database_connections.py`` ends a real
gunicorn's connections)."""

from __future__ import annotations

import time

import pytest
from django.db import connection, connections

from tests.conftest import REQUIRE_SERVICES, unavailable

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def other():
    """A second connection to the same database, as an administrator's session would be."""
    if connection.vendor != "postgresql":
        unavailable("needs PostgreSQL (set DATABASE_URL)", required=REQUIRE_SERVICES)
    conn = connection.get_new_connection(connection.get_connection_params())
    conn.autocommit = True
    yield conn
    conn.close()


def _request_starts() -> None:
    """What Django does before a new request's first query on a kept connection."""
    connection.health_check_done = False
    connection.close_if_health_check_failed()


def _last_query(other, pid: int) -> str:
    return other.execute("SELECT query FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()[0]


def test_the_backend_is_the_project_one():
    if connection.vendor != "postgresql":
        unavailable("needs PostgreSQL (set DATABASE_URL)", required=REQUIRE_SERVICES)
    assert type(connections["default"]).__module__ == "anonweb.common.postgresql.base"
    assert connection.health_check_enabled


def test_an_idle_connection_is_reused_without_a_query(other):
    with connection.cursor() as cursor:
        cursor.execute("SELECT 'the last query before the check'")
    kept = connection.connection
    pid = kept.info.backend_pid
    _request_starts()
    assert connection.connection is kept
    assert _last_query(other, pid) == "SELECT 'the last query before the check'"


def test_a_connection_the_server_ended_is_replaced(other):
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    pid = connection.connection.info.backend_pid
    assert other.execute("SELECT pg_terminate_backend(%s)", [pid]).fetchone()[0]
    deadline = time.monotonic() + 10
    while (
        other.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", [pid]).fetchone()[0]
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    _request_starts()
    assert connection.connection is None  # SELECT 1 failed on it: closed
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] != pid


def test_a_connection_with_something_to_read_is_checked_with_a_query(other):
    """A notice or anything else arriving on an idle connection: SELECT 1 decides, and the
    connection is kept when it answers."""
    with connection.cursor() as cursor:
        cursor.execute("LISTEN anonweb_health_test")
    kept = connection.connection
    pid = kept.info.backend_pid
    other.execute("NOTIFY anonweb_health_test")
    deadline = time.monotonic() + 10
    while connection._idle_with_nothing_to_read() and time.monotonic() < deadline:
        time.sleep(0.05)
    _request_starts()
    assert connection.connection is kept
    assert _last_query(other, pid) == "SELECT 1"
    with connection.cursor() as cursor:
        cursor.execute("UNLISTEN *")
