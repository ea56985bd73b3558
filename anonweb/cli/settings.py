"""Settings for the computation commands (``anonweb assess``, ``anonymize``, ``dp-release``,
``ldp``, ``intruder``, ``conflicts``): they read files and write files, and touch no database, session or
cookie, so they need no secret and no server.

Nothing here can serve a page: no URLs, no middleware, no database. The key Django insists on
is drawn fresh for each process and never written anywhere.
"""

from __future__ import annotations

import secrets

SECRET_KEY = secrets.token_urlsafe(50)
DEBUG = False
INSTALLED_APPS = ["anonweb.cli"]
DATABASES: dict[str, dict[str, str]] = {}
USE_TZ = True
TIME_ZONE = "UTC"
