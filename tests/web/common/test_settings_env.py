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


# The production settings the README documents (behind a TLS proxy).
PRODUCTION = {
    "SECRET_KEY": "a-production-key-made-of-enough-random-characters-0123456789",
    "ALLOWED_HOSTS": "anonweb.example.org",
    "SECURE_COOKIES": "1",
    "ANONWEB_BEHIND_TLS_PROXY": "1",
    "ANONWEB_SSL_REDIRECT": "1",
    "ANONWEB_HSTS_SECONDS": "31536000",
    "ANONWEB_HSTS_PRELOAD": "1",
}


def _deploy_check(env_overrides):
    # DJANGO_ALLOW_ASYNC_UNSAFE is set by the browser tests' conftest for the test process only
    unset = ("DEBUG", "DJANGO_SETTINGS_MODULE", "DJANGO_ALLOW_ASYNC_UNSAFE")
    env = {k: v for k, v in os.environ.items() if k not in unset}
    env.update(env_overrides)
    env["ANONWEB_VAR_DIR"] = str(ROOT / "var" / "test-settings")
    return subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_documented_production_settings_pass_the_deploy_check():
    result = _deploy_check(PRODUCTION)
    assert result.returncode == 0, result.stderr + result.stdout
    assert "no issues" in result.stdout


def test_the_deploy_check_fails_without_tls_settings():
    result = _deploy_check(
        {k: v for k, v in PRODUCTION.items() if "HSTS" not in k and "SSL" not in k}
    )
    assert result.returncode != 0
    assert "security.W004" in result.stderr + result.stdout


def test_every_limit_in_env_example_is_the_code_s_default():
    """.env.example said the upload limit was 200 MiB while the code's default was 2 GiB: each
    limit it lists is now the value the app uses with the variable unset."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANONWEB_MAX")}
    env.update({"DEBUG": "1", "ANONWEB_VAR_DIR": str(ROOT / "var" / "test-settings")})
    script = (
        "import json; from anonweb import settings as s; "
        "d = {k: getattr(s, k) for k in dir(s) if k.startswith('ANONWEB_MAX')}; "
        "d['ANONWEB_MAX_FORM_BYTES'] = s.DATA_UPLOAD_MAX_MEMORY_SIZE; print(json.dumps(d))"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, env=env, capture_output=True, text=True
    )
    defaults = __import__("json").loads(done.stdout)
    documented = {
        key: int(value)
        for key, _, value in (
            line.partition("=") for line in (ROOT / ".env.example").read_text().splitlines()
        )
        if key.startswith("ANONWEB_MAX")
    }
    assert "ANONWEB_MAX_UPLOAD_BYTES" in documented and "ANONWEB_MAX_DECODED_BYTES" in documented
    assert documented == {k: v for k, v in defaults.items() if k in documented}
    assert set(defaults) <= set(documented)


@pytest.mark.parametrize(
    ("cache_url", "engine"),
    [
        ("redis://127.0.0.1:6379/4", "django.contrib.sessions.backends.cached_db"),
        ("", "django.contrib.sessions.backends.db"),
    ],
)
def test_sessions_go_through_the_cache_only_when_every_process_shares_it(cache_url, engine):
    env = {k: v for k, v in os.environ.items() if k not in ("DJANGO_SETTINGS_MODULE",)}
    env.update(
        {
            "DEBUG": "1",
            "ANONWEB_CACHE_URL": cache_url,
            "ANONWEB_VAR_DIR": str(ROOT / "var" / "test-settings"),
            "DJANGO_SETTINGS_MODULE": "anonweb.settings",
        }
    )
    result = subprocess.run(
        [sys.executable, "-c", "from django.conf import settings; print(settings.SESSION_ENGINE)"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == engine
