"""Settings for the test suite: the production module with a test key and its own var/ folder.

Variables still win (CI sets DATABASE_URL to PostgreSQL), so the suite runs on either database.
"""

import os
from pathlib import Path

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-any-deployment-0123456789")
os.environ.setdefault(
    "ANONWEB_VAR_DIR", str(Path(__file__).resolve().parent.parent / "var" / "test")
)

from anonweb.settings import *  # noqa: E402,F403

# Fast hashing keeps login-heavy tests quick; production keeps Django's default.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
# Serve static files straight from the finders: no collectstatic before a test run.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
