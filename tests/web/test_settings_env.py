"""Settings come from the environment; a missing or malformed one names the variable."""

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def _check(env_overrides):
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "SECRET_KEY",
            "DEBUG",
            "DATABASE_URL",
            "CELERY_BROKER_URL",
            "DJANGO_SETTINGS_MODULE",
        )
    }
    env.update(env_overrides)
    env["ANONWEB_VAR_DIR"] = str(ROOT / "var" / "test-settings")
    return subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_debug_off_without_a_secret_key_refuses_to_start():
    result = _check({})
    assert result.returncode != 0
    assert "SECRET_KEY is not set" in result.stderr


def test_debug_off_with_a_short_key_refuses_to_start():
    result = _check({"SECRET_KEY": "short"})
    assert result.returncode != 0 and "SECRET_KEY" in result.stderr


@pytest.mark.parametrize(
    "name,value",
    [
        ("DEBUG", "maybe"),
        ("DATABASE_URL", "not a url"),
        ("CELERY_BROKER_URL", "carrier-pigeon://loft"),
        ("ANONWEB_MAX_UPLOAD_BYTES", "lots"),
    ],
)
def test_a_malformed_variable_is_named(name, value):
    result = _check({"SECRET_KEY": "x" * 50, name: value})
    assert result.returncode != 0
    assert name in result.stderr.strip().splitlines()[-1]


def test_embedded_defaults_start_with_a_key_only():
    result = _check({"SECRET_KEY": "x" * 50})
    assert result.returncode == 0, result.stderr
