"""The suite runs on PostgreSQL in CI; the audit chain stays intact under concurrent writers."""

import threading

import pytest
from django.db import connection

from anonweb.audit.selectors import audit_verify_chain
from anonweb.audit.services import audit_record
from tests.conftest import REQUIRE_SERVICES


def test_ci_runs_on_postgresql():
    if REQUIRE_SERVICES:
        assert connection.vendor == "postgresql", (
            "CI must run the suite on PostgreSQL (set DATABASE_URL)"
        )
    else:
        assert connection.vendor in {"postgresql", "sqlite"}


@pytest.mark.django_db(transaction=True)
def test_concurrent_audit_appends_keep_one_chain():
    errors = []

    def write(n):
        try:
            for i in range(10):
                audit_record(actor=None, action="test.concurrent", details={"writer": n, "i": i})
        except Exception as exc:  # surfaced below: the assertion names it
            errors.append(repr(exc))
        finally:
            connection.close()

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    report = audit_verify_chain()
    assert report.ok and report.checked == 40
