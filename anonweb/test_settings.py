"""Settings for the test suite: the production module with a test key and its own var/ folder.

Variables still win (CI sets DATABASE_URL to PostgreSQL), so the suite runs on either database.
"""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-any-deployment-0123456789")
os.environ.setdefault(
    "ANONWEB_VAR_DIR", str(Path(__file__).resolve().parent.parent / "var" / "test")
)

# Each run anchors its own chain (the test database is made afresh; an anchor of an earlier
# run would not match it). Processes the tests start inherit the same file.
if "ANONWEB_AUDIT_ANCHOR" not in os.environ:
    _anchor_dir = tempfile.mkdtemp(prefix="anonweb-audit-")
    os.environ["ANONWEB_AUDIT_ANCHOR"] = str(Path(_anchor_dir) / "audit-anchor.log")
    # The process that made the folder removes it when it ends (its children inherit the path).
    atexit.register(shutil.rmtree, _anchor_dir, True)
os.environ.setdefault("ANONWEB_AUDIT_KEY", "test-only-audit-key-not-for-any-deployment-0123456789")

from anonweb.settings import *  # noqa: E402,F403

# Tests roll their transactions back, so the anchor written when an event commits is rarely
# there; the tests of the anchor set this back to False.
ANONWEB_AUDIT_ANCHOR_MAY_BE_ABSENT = True

# Fast hashing keeps login-heavy tests quick; production keeps Django's default.
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "anonweb": ANONWEB_FILES_STORAGE,  # noqa: F405
}
# Serve static files straight from the finders: no collectstatic before a test run.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
# The tests run in one process, whose cache every request reads: the roles are kept across
# requests as they are with a shared cache, so every page test reads them that way.
ANONWEB_ROLES_CACHE = True
