import os
import shutil

import pytest

from tests.conftest import REQUIRE_SERVICES, unavailable
from tests.services.conftest import broker, start_worker  # noqa: F401  (fixtures for the browser tests)

# Playwright's sync API runs an event loop in the test thread; the ORM calls the test makes
# around it are plain synchronous ones.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

CHROMIUM = os.environ.get("ANONWEB_CHROMIUM", shutil.which("chromium") or "/usr/bin/chromium")


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
