"""One settings module. Embedded defaults need no server; production comes from variables.

With no variable set: SQLite and a file-system Celery broker, both under ``var/``.
Production: DATABASE_URL (PostgreSQL), CELERY_BROKER_URL (Redis), SECRET_KEY, ALLOWED_HOSTS,
DEBUG. See .env.example for every variable.
"""

from __future__ import annotations

from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from anonweb.env import ImproperlyConfiguredVariable, env_bool, env_int, env_list, env_str

BASE_DIR = Path(__file__).resolve().parent.parent

try:
    DEBUG = env_bool("DEBUG", default=False)
    VAR_DIR = Path(env_str("ANONWEB_VAR_DIR", str(BASE_DIR / "var"))).resolve()
    DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("ANONWEB_MAX_FORM_BYTES", 5 * 1024 * 1024)
    # Uploads are streamed to disk and read by a background job, so the limit is about disk
    # and patience, not memory. A request whose declared size is over it is refused (413)
    # before a byte of its body is read.
    ANONWEB_MAX_UPLOAD_BYTES = env_int("ANONWEB_MAX_UPLOAD_BYTES", 2 * 1024**3)
    # What one table may hold, checked while it is read (a hostile file is stopped early).
    ANONWEB_MAX_COLUMNS = env_int("ANONWEB_MAX_COLUMNS", 5_000)
    ANONWEB_MAX_CELLS = env_int("ANONWEB_MAX_CELLS", 500_000_000)
    ANONWEB_MAX_EXPANDED_BYTES = env_int("ANONWEB_MAX_EXPANDED_BYTES", 1024**3)
    # Text a table may hold once decoded (a Parquet dictionary or an xlsx shared string repeated
    # over every row counts each time), and the size of an xlsx's shared-string table, which is
    # loaded whole before the first row.
    ANONWEB_MAX_DECODED_BYTES = env_int("ANONWEB_MAX_DECODED_BYTES", 2 * 1024**3)
    ANONWEB_MAX_SHARED_STRINGS = env_int("ANONWEB_MAX_SHARED_STRINGS", 2_000_000)
    ANONWEB_MAX_SHARED_STRINGS_BYTES = env_int("ANONWEB_MAX_SHARED_STRINGS_BYTES", 256 * 1024**2)
    # The column-tag form posts one field per column.
    DATA_UPLOAD_MAX_NUMBER_FIELDS = ANONWEB_MAX_COLUMNS + 100
    ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]"])
    CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
    ANONWEB_JOB_STALE_SECONDS = env_int("ANONWEB_JOB_STALE_SECONDS", 60)
    # A queued job no worker has taken is sent to the queue again after this long (and again
    # each time as long), and failed with the reason once it waited the second time.
    ANONWEB_JOB_QUEUED_RESEND_SECONDS = env_int("ANONWEB_JOB_QUEUED_RESEND_SECONDS", 120)
    ANONWEB_JOB_QUEUED_FAIL_SECONDS = env_int("ANONWEB_JOB_QUEUED_FAIL_SECONDS", 1800)
except ImproperlyConfiguredVariable as exc:
    raise ImproperlyConfigured(str(exc)) from None

_DEV_KEY_PREFIX = "insecure-dev-key-"
SECRET_KEY = env_str("SECRET_KEY", "")
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Set SECRET_KEY to a long random string "
            "(python -c 'import secrets; print(secrets.token_urlsafe(50))'), "
            "or set DEBUG=1 for a development server."
        )
    SECRET_KEY = _DEV_KEY_PREFIX + "only-for-debug-never-for-production"
elif not DEBUG and (SECRET_KEY.startswith(_DEV_KEY_PREFIX) or len(SECRET_KEY) < 32):
    raise ImproperlyConfigured(
        "SECRET_KEY is too short or a development key: set SECRET_KEY to at least 32 random "
        "characters when DEBUG is off."
    )

# The audit trail's key (an HMAC over each event and over the anchored head): never in the
# database. ANONWEB_AUDIT_KEY (at least 32 characters), or else a key file made once under var/
# (run.sh makes it, like the secret key). The anchor is an append-only file outside the
# database where the signed head is written after each committed event; audit_verify checks
# the table against it.
ANONWEB_AUDIT_KEY = env_str("ANONWEB_AUDIT_KEY", "")
if ANONWEB_AUDIT_KEY and len(ANONWEB_AUDIT_KEY) < 32:
    raise ImproperlyConfigured("ANONWEB_AUDIT_KEY is too short: use at least 32 random characters.")
ANONWEB_AUDIT_KEY_FILE = Path(env_str("ANONWEB_AUDIT_KEY_FILE", str(VAR_DIR / "audit_key")))
ANONWEB_AUDIT_ANCHOR = Path(env_str("ANONWEB_AUDIT_ANCHOR", str(VAR_DIR / "audit-anchor.log")))
# Whether audit_verify accepts a chain with no anchor written yet. Only the test suite, whose
# transactions are rolled back before anything commits, sets it.
ANONWEB_AUDIT_ANCHOR_MAY_BE_ABSENT = False

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "axes",
    "anonweb.common",
    "anonweb.accounts",
    "anonweb.audit",
    "anonweb.datasets",
    "anonweb.jobs",
    "anonweb.releases",
    "anonweb.cli",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "anonweb.api",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # An ETag on every complete GET response (lists of the API, pages), and 304 for a client
    # that already holds that version: nothing is sent twice. Streamed downloads carry none.
    "django.middleware.http.ConditionalGetMiddleware",
    "anonweb.common.security.ContentSecurityPolicyMiddleware",
    "anonweb.common.security.NulInQueryMiddleware",
    "anonweb.datasets.uploads.UploadLimitMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "anonweb.accounts.middleware.RolesOncePerRequestMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes requires: it turns a refused login into the lockout page.
    "axes.middleware.AxesMiddleware",
]
# Development and benchmarks only (bench/load.py --cpu): each request's CPU time and queries,
# written per process to the folder named (anonweb/common/request_cpu.py).
if env_str("ANONWEB_REQUEST_CPU_DIR", ""):
    MIDDLEWARE.insert(0, "anonweb.common.request_cpu.RequestCpuMiddleware")

ROOT_URLCONF = "anonweb.urls"
WSGI_APPLICATION = "anonweb.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            # {% url %} with its reversals remembered (anonweb/common/templatetags/kept_urls.py)
            "builtins": ["anonweb.common.templatetags.kept_urls"],
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "anonweb.accounts.context_processors.roles",
            ],
        },
    },
]

_default_db = f"sqlite:///{VAR_DIR / 'anonweb.sqlite3'}"
_database_url = env_str("DATABASE_URL", "") or _default_db
try:
    # Connections are kept for a minute, and checked before each request reuses one: a
    # connection the database has ended (a restart, a failover, pg_terminate_backend) is
    # replaced instead of answering 500 on every thread that held one.
    DATABASES = {
        "default": dj_database_url.parse(_database_url, conn_max_age=60, conn_health_checks=True)
    }
except Exception as exc:  # dj_database_url raises bare ValueError/KeyError on junk
    raise ImproperlyConfigured(
        f"DATABASE_URL={_database_url!r} is not a database URL ({exc}); "
        "expected e.g. postgres://user:password@host:5432/name"
    ) from None
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # the same backend, whose check of a kept connection sends no query while the server has
    # sent nothing on it (anonweb/common/postgresql/base.py)
    DATABASES["default"]["ENGINE"] = "anonweb.common.postgresql"
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # A file (not :memory:) so that a worker process sees what the tests wrote.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test.sqlite3")}
    DATABASES["default"]["OPTIONS"] = {"timeout": 30, "transaction_mode": "IMMEDIATE"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# Logins are throttled per account and per address (django-axes): after
# ANONWEB_LOGIN_FAILURE_LIMIT failures, either is refused (429) for ANONWEB_LOGIN_COOLOFF_MINUTES,
# counted again from each refused try. Failures and lockouts are audit events
# (anonweb/accounts/signals.py).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    # Django's model backend, the signed-in user kept in the shared cache between requests
    # (anonweb/accounts/user_cache.py)
    "anonweb.accounts.user_cache.CachedModelBackend",
]
try:
    AXES_FAILURE_LIMIT = env_int("ANONWEB_LOGIN_FAILURE_LIMIT", 5)
    AXES_COOLOFF_TIME = __import__("datetime").timedelta(
        minutes=env_int("ANONWEB_LOGIN_COOLOFF_MINUTES", 15)
    )
except ImproperlyConfiguredVariable as exc:
    raise ImproperlyConfigured(str(exc)) from None
AXES_LOCKOUT_PARAMETERS = ["username", "ip_address"]
# The login form's field (axes' default, stated so that the audit signal can read it)
AXES_USERNAME_FORM_FIELD = "username"
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "registration/locked_out.html"
# The lockout page (JSON under /api/), with Retry-After.
AXES_LOCKOUT_CALLABLE = "anonweb.accounts.lockout.lockout_response"
AXES_VERBOSE = False
# REMOTE_ADDR, or behind the TLS proxy the address it appended to X-Forwarded-For.
AXES_CLIENT_IP_CALLABLE = "anonweb.common.security.client_address"

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# plotly.js is vendored (static/vendor/plotly, no CDN: the app runs offline) as the official
# cartesian partial bundle, which draws every trace the charts use (bar, scatter, histogram...)
# at a third of the full bundle's size; see static/vendor/plotly/README.md.
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
# collectstatic (run.sh, the Dockerfile) names each file after its content, so WhiteNoise serves
# it compressed with a cache of years ("immutable"): a new version is a new name.
MEDIA_ROOT = VAR_DIR / "media"
# Uploads, their Parquet copies and release files: the "anonweb" storage (anonweb.common.files).
# Local disk under MEDIA_ROOT by default; ANONWEB_STORAGE=s3 puts them in an S3-compatible bucket
# (AWS S3, MinIO) so that workers on many hosts share them, configured by django-storages' usual
# variables. MEDIA_ROOT/incoming stays local either way: a request's upload lands there first.
ANONWEB_STORAGE = env_str("ANONWEB_STORAGE", "local").strip().lower() or "local"
if ANONWEB_STORAGE not in ("local", "s3"):
    raise ImproperlyConfigured(f"ANONWEB_STORAGE={ANONWEB_STORAGE!r}: use local or s3")
try:
    # Days of object-lock retention for each release object on S3 (0: none; the bucket must have
    # object lock enabled otherwise).
    ANONWEB_S3_RELEASE_RETENTION_DAYS = env_int("ANONWEB_S3_RELEASE_RETENTION_DAYS", 0)
except ImproperlyConfiguredVariable as exc:
    raise ImproperlyConfigured(str(exc)) from None
ANONWEB_S3_RELEASE_LOCK_MODE = env_str("ANONWEB_S3_RELEASE_LOCK_MODE", "GOVERNANCE").upper()
ANONWEB_FILES_STORAGE: dict = {"BACKEND": "anonweb.common.files.LocalFiles"}
if ANONWEB_STORAGE == "s3":
    ANONWEB_FILES_STORAGE = {
        "BACKEND": "anonweb.common.s3files.S3Files",
        "OPTIONS": {
            "bucket_name": env_str("AWS_STORAGE_BUCKET_NAME"),
            "endpoint_url": env_str("AWS_S3_ENDPOINT_URL") or None,
            "region_name": env_str("AWS_S3_REGION_NAME") or None,
            "access_key": env_str("AWS_ACCESS_KEY_ID") or None,
            "secret_key": env_str("AWS_SECRET_ACCESS_KEY") or None,
            "location": env_str("ANONWEB_S3_PREFIX").strip("/"),
            # private data: never a public ACL, never a URL without a signature
            "default_acl": None,
            "querystring_auth": True,
            "file_overwrite": True,
        },
    }
    if not ANONWEB_FILES_STORAGE["OPTIONS"]["bucket_name"]:
        raise ImproperlyConfigured("ANONWEB_STORAGE=s3 needs AWS_STORAGE_BUCKET_NAME")
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
    "anonweb": ANONWEB_FILES_STORAGE,
}
# The cache holds what is built once and shown many times (a release's charts and findings, a
# risk profile's charts, a gate's conflict check), keyed by what it is a function of. Every
# gunicorn worker must share it, or each builds everything once more: ANONWEB_CACHE_URL names
# a Redis database for it (say the broker's server, another database number). Unset: each
# process keeps its own in memory, which is right for one development server and for tests.
_cache_url = env_str("ANONWEB_CACHE_URL", "")
ANONWEB_ROLES_CACHE = False
if _cache_url.startswith(("redis://", "rediss://")):
    CACHES = {
        "default": {
            "BACKEND": "anonweb.common.cache.SharedRedisCache",
            "LOCATION": _cache_url,
            "KEY_PREFIX": "anonweb",
            # A cache that is down fails the request at once instead of holding a worker.
            "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
        }
    }
    # Sessions read through the shared cache (written to the database too): one query less on
    # every request. Only with a shared cache: a cache in each process's memory would keep a
    # session that another process logged out.
    SESSION_ENGINE = "django.contrib.sessions.backends.cached_db"
    # Each user's roles are kept there across requests, under a version every membership write
    # changes (anonweb.accounts.roles_version): only with a shared cache, for the same reason.
    ANONWEB_ROLES_CACHE = True
elif _cache_url:
    raise ImproperlyConfigured(
        f"ANONWEB_CACHE_URL={_cache_url!r} is not supported: use redis://host:6379/1 "
        "or leave it unset for a cache in each process's memory"
    )
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
            "OPTIONS": {"MAX_ENTRIES": 2000},
        }
    }
# Every uploaded file goes straight to MEDIA_ROOT/incoming as it arrives, hashed on the way, and
# is moved (not copied) into its dataset's folder: no upload is held in memory or read twice.
FILE_UPLOAD_HANDLERS = ["anonweb.datasets.uploads.StreamedUploadHandler"]

SESSION_COOKIE_HTTPONLY = True
try:
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("SECURE_COOKIES", default=False)
except ImproperlyConfiguredVariable as exc:
    raise ImproperlyConfigured(str(exc)) from None
# Behind a TLS proxy (the documented production setup, README "Production"): the proxy
# says https in X-Forwarded-Proto, Django redirects plain http and sends HSTS.
try:
    ANONWEB_BEHIND_TLS_PROXY = env_bool("ANONWEB_BEHIND_TLS_PROXY", default=False)
    if ANONWEB_BEHIND_TLS_PROXY:
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("ANONWEB_SSL_REDIRECT", default=False)
    SECURE_HSTS_SECONDS = env_int("ANONWEB_HSTS_SECONDS", 0)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("ANONWEB_HSTS_INCLUDE_SUBDOMAINS", default=True)
    SECURE_HSTS_PRELOAD = env_bool("ANONWEB_HSTS_PRELOAD", default=False)
except ImproperlyConfiguredVariable as exc:
    raise ImproperlyConfigured(str(exc)) from None
# A load balancer may probe over plain http.
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
# Sent with every response (anonweb/common/security.py): scripts only from the site's own files.
ANONWEB_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
    "img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; object-src 'none'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)

# Celery. The default broker is kombu's file-system transport: no server to run.
_broker_dir = VAR_DIR / "broker"
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", "") or "filesystem://"
CELERY_BROKER_TRANSPORT_OPTIONS: dict = {}
if CELERY_BROKER_URL.startswith("filesystem://"):
    for sub in ("queue", "processed", "control"):
        (_broker_dir / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_broker_dir / "queue"),
        "data_folder_out": str(_broker_dir / "queue"),
        "processed_folder": str(_broker_dir / "processed"),
        "store_processed": False,
        # kombu keeps exchange bindings here; its default is a "control" folder in the cwd.
        "control_folder": str(_broker_dir / "control"),
    }
elif CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # Fail fast when Redis is down: a launch must fail visibly, never hang the request.
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "socket_connect_timeout": 3,
        "socket_timeout": 10,
        "max_retries": 1,
    }
elif not CELERY_BROKER_URL.startswith(("redis://", "rediss://", "amqp://", "memory://")):
    raise ImproperlyConfigured(
        f"CELERY_BROKER_URL={CELERY_BROKER_URL!r} is not supported: use redis://host:6379/0 "
        "or leave it unset for the embedded file-system broker"
    )
CELERY_TASK_DEFAULT_QUEUE = env_str("ANONWEB_QUEUE", "anonweb")
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# Data expiration: raw tables past their retention date are purged hourly (worker --beat).
CELERY_BEAT_SCHEDULE = {
    "purge-expired-datasets": {"task": "anonweb.datasets.purge_expired", "schedule": 3600.0},
    "sweep-leftover-files": {"task": "anonweb.common.sweep_storage", "schedule": 3600.0},
    # Queued jobs no worker took: sent again, or failed with the reason (see the job page).
    "check-queued-jobs": {"task": "anonweb.jobs.check_queued", "schedule": 60.0},
}
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_TIMEOUT = 3
# A worker that starts while the broker is down waits for it (and one that loses it reconnects)
# instead of exiting.
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_PUBLISH_RETRY = False

# The automation API (anonweb/api): token or session authentication, JSON only, and errors as
# {"error": "..."} or {"errors": [...]}, never an HTML page.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        # First, so that an anonymous request is answered 401 with "WWW-Authenticate: Token".
        "anonweb.api.authentication.HashedTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["anonweb.api.parsers.BoundedJSONParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "anonweb.api.errors.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "anonweb API",
    "DESCRIPTION": (
        "Every step of the anonymization workflow over JSON, with the same permissions and "
        "audit trail as the pages. Authenticate with `Authorization: Token <key>`."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.IsAuthenticated"],
    # Swagger UI from the app's own static files (drf-spectacular-sidecar), never a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    # Ids in paths are <id:...> (anonweb/api/schema.py); the hook below states their range.
    "PATH_CONVERTER_OVERRIDES": {"id": {"type": "integer"}},
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "anonweb.api.schema.bound_integer_parameters",
    ],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # django-axes narrates every login at INFO; failures and lockouts are audit events already.
    "loggers": {"axes": {"level": "WARNING"}},
}
