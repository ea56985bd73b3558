"""Shared test configuration.

Reference data: ``../shared/datasets`` beside the clone (or ``ANONWEB_SHARED_DIR``). A user's clone
has none, so tests that read it skip with a visible reason, unless ``ANONWEB_REQUIRE_SHARED=1``
(set by CI), which turns the skip into a failure.

Servers and browser: tests marked ``services`` or ``browser`` skip with a reason when Redis,
PostgreSQL or chromium is missing, unless ``ANONWEB_REQUIRE_SERVICES=1`` (set by CI).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

# py4j (Spark's bridge) logs at INFO from the finalizers of its connections, which run as the
# interpreter exits, after pytest has closed the stream logging writes to: every run with a
# Spark test ended in a "--- Logging error ---" traceback that was not a failure
logging.getLogger("py4j").setLevel(logging.WARNING)

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
SHARED_DIR = Path(os.environ.get("ANONWEB_SHARED_DIR", str(ROOT.parent / "shared")))
DATASETS = SHARED_DIR / "datasets"
REQUIRE_SHARED = os.environ.get("ANONWEB_REQUIRE_SHARED") == "1"
REQUIRE_SERVICES = os.environ.get("ANONWEB_REQUIRE_SERVICES") == "1"


def unavailable(reason: str, *, required: bool) -> None:
    """Skip with ``reason``, or fail when the environment says the part is mandatory."""
    if required:
        pytest.fail(f"mandatory here but unavailable: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def datasets_dir() -> Path:
    """``../shared/datasets``; skips (or fails in CI) when absent."""
    if not DATASETS.is_dir():
        unavailable(
            f"reference datasets not found at {DATASETS} (set ANONWEB_SHARED_DIR)",
            required=REQUIRE_SHARED,
        )
    return DATASETS


@pytest.fixture(scope="session")
def fixtures_dir() -> Path:
    return FIXTURES


@pytest.fixture(autouse=True)
def _step_registry_restored():
    """A step a test registers is gone after it: registry-wide checks (every step declares its
    stability, its engines) see the product's steps only, whatever order the tests run in."""
    from anonweb.core.release import steps

    before = dict(steps._REGISTRY)
    yield
    steps._REGISTRY.clear()
    steps._REGISTRY.update(before)
