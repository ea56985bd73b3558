"""Logins are throttled per account and per address, and every failure and lockout is audited."""

import pytest
from django.core.cache import cache
from django.urls import reverse

from anonweb.audit.models import AuditEvent
from anonweb.audit.selectors import audit_verify_chain
from tests.web.factories import PASSWORD, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_lockouts(settings):
    settings.AXES_FAILURE_LIMIT = 5
    cache.clear()
    yield
    cache.clear()


def _login(client, username, password, address="10.0.0.1"):
    return client.post(
        reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=address
    )


def _actions(action):
    return [e.details for e in AuditEvent.objects.filter(action=action).order_by("seq")]


def test_an_account_is_locked_after_five_failures_even_with_the_right_password(client):
    UserFactory(username="victim")
    answers = [_login(client, "victim", f"guess-{i}").status_code for i in range(5)]
    # Four failures are answered with the form again; the fifth locks the account.
    assert answers[:4] == [200] * 4 and answers[4] == 429
    locked = _login(client, "victim", PASSWORD)
    assert locked.status_code == 429
    assert b"Too many failed logins" in locked.content
    assert "_auth_user_id" not in client.session


def test_the_lock_holds_per_account_across_addresses(client):
    UserFactory(username="victim")
    for i in range(5):
        _login(client, "victim", "wrong", address=f"10.0.1.{i}")
    assert _login(client, "victim", PASSWORD, address="10.0.2.1").status_code == 429


def test_the_lock_holds_per_address_across_accounts(client):
    UserFactory(username="bystander")
    for i in range(5):
        _login(client, f"nobody{i}", "wrong", address="10.9.9.9")
    assert _login(client, "bystander", PASSWORD, address="10.9.9.9").status_code == 429
    # Another address may still log in to the same account.
    ok = _login(client, "bystander", PASSWORD, address="10.9.9.10")
    assert ok.status_code == 302 and client.session.get("_auth_user_id")


def test_failed_logins_and_the_lockout_are_audited_without_the_password(client):
    UserFactory(username="victim")
    for i in range(7):
        _login(client, "victim", f"secret-guess-{i}", address="10.0.0.7")
    failures = _actions("auth.login_failed")
    assert len(failures) == 7
    assert {(f["username"], f["address"]) for f in failures} == {("victim", "10.0.0.7")}
    assert [f["locked_out"] for f in failures][:4] == [False] * 4
    lockouts = _actions("auth.locked_out")
    assert len(lockouts) == 1 and lockouts[0]["username"] == "victim"
    assert lockouts[0]["failure_limit"] == 5
    stored = "".join(e.details_text for e in AuditEvent.objects.all())
    assert "secret-guess" not in stored
    assert audit_verify_chain().ok


def test_a_successful_login_before_the_limit_resets_the_count(client):
    UserFactory(username="forgetful")
    for i in range(4):
        _login(client, "forgetful", f"wrong-{i}")
    assert _login(client, "forgetful", PASSWORD).status_code == 302
    client.logout()
    for i in range(4):
        _login(client, "forgetful", f"wrong-again-{i}")
    assert _login(client, "forgetful", PASSWORD).status_code == 302


def test_behind_the_proxy_the_address_is_the_one_it_appended(client, settings):
    settings.ANONWEB_BEHIND_TLS_PROXY = True
    UserFactory(username="colleague")
    proxy = "10.0.0.1"

    def attempt(username, password, forwarded):
        return client.post(
            reverse("login"),
            {"username": username, "password": password},
            REMOTE_ADDR=proxy,
            HTTP_X_FORWARDED_FOR=forwarded,
        )

    for i in range(5):
        # The attacker varies what it sends; the proxy appends its real address.
        attempt(f"nobody{i}", "wrong", f"198.51.100.{i}, 203.0.113.5")
    assert attempt("colleague", PASSWORD, "1.2.3.4, 203.0.113.5").status_code == 429
    # Another person behind the same proxy is not locked out with the attacker.
    assert attempt("colleague", PASSWORD, "203.0.113.9").status_code == 302
    addresses = {e["address"] for e in _actions("auth.login_failed")}
    assert addresses == {"203.0.113.5"}


def test_one_lockout_is_one_event_however_often_it_is_refused_and_by_whichever_worker(client):
    """Every refused try restarts the cool-off; it is a failed login, not a new lockout. The
    cache is emptied between tries, as each worker process of a deployment has its own."""
    UserFactory(username="victim")
    for i in range(9):
        _login(client, "victim", f"guess-{i}", address=f"10.0.3.{i % 3}")
        cache.clear()
    assert len(_actions("auth.locked_out")) == 1
    assert len(_actions("auth.login_failed")) == 9


def test_the_lockout_page_says_when_to_try_again(client, settings):
    UserFactory(username="victim")
    for i in range(5):
        _login(client, "victim", f"guess-{i}")
    locked = _login(client, "victim", PASSWORD)
    assert locked.status_code == 429 and locked["Retry-After"] == "900"
    assert b"Too many failed logins" in locked.content


def test_a_lockout_answers_json_with_retry_after_to_scripts(client):
    UserFactory(username="victim")
    for i in range(5):
        _login(client, "victim", f"guess-{i}")
    locked = client.post(
        reverse("login"),
        {"username": "victim", "password": PASSWORD},
        REMOTE_ADDR="10.0.0.1",
        HTTP_X_REQUESTED_WITH="XMLHttpRequest",
    )
    assert locked.status_code == 429 and locked["Retry-After"] == "900"
    assert "try again in 900 seconds" in locked.json()["error"]
