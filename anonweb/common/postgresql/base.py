"""Django's PostgreSQL backend, whose check before a request reuses a connection costs no query
while the server has sent nothing.

With ``CONN_HEALTH_CHECKS`` Django sends ``SELECT 1`` on a kept connection before each request
uses it, so that a connection the server ended (a restart, a failover, ``pg_terminate_backend``)
is replaced instead of failing the request: a round trip and a query for PostgreSQL on every
request. A server that ends a connection tells the client so (an error message, then the end of
the stream), and an idle connection receives nothing otherwise. So a connection that is open,
idle outside a transaction and has nothing to read is as usable as ``SELECT 1`` would find it;
one with anything to read is checked with ``SELECT 1`` as before (and replaced if it fails)."""

from __future__ import annotations

import select

from django.db.backends.postgresql.base import DatabaseWrapper as PostgreSQLDatabaseWrapper
from psycopg import pq

_READABLE = select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP | select.POLLNVAL


class DatabaseWrapper(PostgreSQLDatabaseWrapper):
    # Set while Django checks a kept connection before a request uses it; the check after a
    # failed query (close_if_unusable_or_obsolete) always sends SELECT 1.
    _checking_before_reuse = False

    def close_if_health_check_failed(self):
        self._checking_before_reuse = True
        try:
            super().close_if_health_check_failed()
        finally:
            self._checking_before_reuse = False

    def is_usable(self):
        if self._checking_before_reuse and self._idle_with_nothing_to_read():
            return True
        return super().is_usable()

    def _idle_with_nothing_to_read(self) -> bool:
        conn = self.connection
        try:
            if conn.closed or conn.broken:
                return False
            if conn.pgconn.status != pq.ConnStatus.OK:
                return False
            if conn.pgconn.transaction_status != pq.TransactionStatus.IDLE:
                return False
            poller = select.poll()
            poller.register(conn.fileno(), _READABLE)
            return not poller.poll(0)
        except Exception:  # whatever went wrong, SELECT 1 decides
            return False
