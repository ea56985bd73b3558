import contextlib
import os
import shutil
import socket
import threading

import pytest
from django.core.servers.basehttp import ThreadedWSGIServer
from django.test.testcases import LiveServerThread
from pytest_django.live_server_helper import LiveServer

from tests.conftest import REQUIRE_SERVICES, unavailable
from tests.services.conftest import broker, start_worker  # noqa: F401  (fixtures for the browser tests)

# Playwright's sync API runs an event loop in the test thread; the ORM calls the test makes
# around it are plain synchronous ones.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("ANONWEB_CHROMIUM", shutil.which("chromium") or "/usr/bin/chromium")


class _ClosingWSGIServer(ThreadedWSGIServer):
    """Django's threaded test server, but closing ends every request thread.

    Each browser connection is served by a daemon thread that keeps its database connection
    (CONN_MAX_AGE) for as long as the browser keeps the HTTP connection alive; Django's server
    closes that database connection only when the browser hangs up, and its ``server_close``
    does not wait for daemon threads. Here ``server_close`` shuts the open sockets down and
    waits until each thread has closed its database connections (``close_request``), so none
    is left when the test database is dropped.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._open_requests: set[socket.socket] = set()
        self._open_changed = threading.Condition()

    def process_request(self, request, client_address):
        with self._open_changed:
            self._open_requests.add(request)
        super().process_request(request, client_address)

    def close_request(self, request):
        try:
            super().close_request(request)  # closes this thread's database connections
        finally:
            with self._open_changed:
                self._open_requests.discard(request)
                self._open_changed.notify_all()

    def server_close(self):
        super().server_close()
        with self._open_changed:
            for request in self._open_requests:
                with contextlib.suppress(OSError):  # the browser hung up already
                    request.shutdown(socket.SHUT_RDWR)
            if not self._open_changed.wait_for(lambda: not self._open_requests, timeout=30):
                raise RuntimeError(
                    f"{len(self._open_requests)} live-server request(s) still running after 30 s"
                )


class _LiveServerThread(LiveServerThread):
    server_class = _ClosingWSGIServer


@pytest.fixture(scope="session")
def live_server(request, django_db_setup):
    """pytest-django's live server, started after the test database and stopped before it is
    dropped, with no request thread (nor its database connection) outliving the server.

    Without ``django_db_setup`` here a session whose first test asks for ``browser`` and
    ``live_server`` sets them up before the database and so tears them down after it: the
    database was dropped while the server's threads still held connections ("database ... is
    being accessed by other users").
    """
    addr = (
        request.config.getvalue("liveserver")
        or os.environ.get("DJANGO_LIVE_TEST_SERVER_ADDRESS")
        or "localhost"
    )
    server = LiveServer(addr, start=False)
    stock = server.thread
    server.thread = _LiveServerThread(
        stock.host,
        stock.static_handler,
        connections_override=stock.connections_override,
        port=stock.port,
    )
    server.thread.daemon = True
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def browser():
    if not os.path.exists(CHROMIUM):
        unavailable(
            f"Debian's chromium not found at {CHROMIUM} (apt-get install chromium)",
            required=REQUIRE_SERVICES,
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=CHROMIUM,
            headless=True,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield browser
        browser.close()


@pytest.fixture
def new_context(browser):
    """Open browser contexts (one per person) that are all closed when the test ends, pass or
    fail, so no page of one test goes on polling the live server during the next."""
    contexts = []

    def open_context(**options):
        context = browser.new_context(**options)
        contexts.append(context)
        return context

    yield open_context
    for context in contexts:
        context.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    yield page
    context.close()


def login(page, base_url: str, username: str) -> None:
    """Log in through the form, as a person would."""
    from tests.web.factories import PASSWORD

    page.goto(f"{base_url}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_url(f"{base_url}/")
