"""Django settings, read from environment variables only (12-factor).

Variables (see docs/reference/configuration.md):
    DEBUG, SECRET_KEY, ALLOWED_HOSTS, CSRF_TRUSTED_ORIGINS, DATABASE_URL, REDIS_URL,
    PADDOCK_VAR_DIR, PADDOCK_DATA_DIR, PADDOCK_BENCHMARK_FILE, PADDOCK_ARTIFACTS_DIR,
    PADDOCK_TORCH_THREADS, PADDOCK_GENERATION_TIME_LIMIT, PADDOCK_LOG_LEVEL, PADDOCK_SERVE_RATE_LIMIT,
    PADDOCK_SERVE_CACHE_SIZE, PADDOCK_UPLOAD_MAX_BYTES, PADDOCK_REQUEST_MAX_BYTES,
    PADDOCK_QUOTA_DEVICE_HOURS, PADDOCK_QUOTA_PODS; the artifact storage's PADDOCK_STORAGE and
    PADDOCK_S3_* in :mod:`webapp.config.storage`.
A bad value stops start-up with one line naming the variable (``SettingsError``).
"""

from __future__ import annotations

import importlib.util
import os
import secrets
from pathlib import Path

import dj_database_url

from webapp.config.env import SettingsError, env_bool, env_float, env_int, env_list, env_str, env_url
from webapp.config.storage import storage_kind, storages

BASE_DIR = Path(__file__).resolve().parent.parent.parent

VAR_DIR = Path(env_str("PADDOCK_VAR_DIR", str(BASE_DIR / "var"))).resolve()
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", False)


def _secret_key() -> str:
    """``SECRET_KEY`` when given; else one random key made once and kept under var/ (owner-only),
    so that sessions survive restarts and ``manage.py`` run by hand shares the launcher's key.
    Machines that share a database but not var/ must be given one ``SECRET_KEY``."""
    key = env_str("SECRET_KEY")
    if key:
        return key
    path = VAR_DIR / "secret_key"
    if not path.exists():
        tmp = VAR_DIR / f"secret_key.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_urlsafe(50))
        try:
            os.link(tmp, path)  # never replaces a key another process made at the same moment
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    return path.read_text().strip()


SECRET_KEY = _secret_key()
# Local names by default, with DEBUG on or off; behind a proxy or on a network, list the names.
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
if not ALLOWED_HOSTS:
    raise SettingsError("ALLOWED_HOSTS: expected comma-separated host names, got an empty value")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
for _origin in CSRF_TRUSTED_ORIGINS:
    if not _origin.startswith(("http://", "https://")):
        raise SettingsError(f"CSRF_TRUSTED_ORIGINS: expected origins like https://example.com, got {_origin!r}")

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "rest_framework.authtoken",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "webapp.core",
    "webapp.market",
    "webapp.runs",
    "webapp.reports",
    "webapp.studies",
    "webapp.serving",
    "webapp.demo",
]

MIDDLEWARE = [
    # First: every request limit is met before anything reads the body (docs/limits.md).
    "webapp.core.limits.RequestLimitsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "webapp.config.urls"
ASGI_APPLICATION = "webapp.config.asgi.application"
WSGI_APPLICATION = None

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASE_URL = env_url(
    "DATABASE_URL",
    f"sqlite:///{VAR_DIR / 'paddock.sqlite3'}",
    schemes=("sqlite", "postgres", "postgresql", "pgsql"),
)
DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=0)}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Several processes (web, workers) share the file: wait for locks instead of failing.
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 30
    DATABASES["default"]["OPTIONS"]["transaction_mode"] = "IMMEDIATE"
    # Tests use a file, not Django's in-memory default, so that the daphne and Celery worker
    # processes started by the browser tests see the same test database (they are given its
    # path). One file per test run: two runs in one checkout must not share it.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-paddock-{os.getpid()}.sqlite3")}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# PostgreSQL connection pool of the web server (``webapp/config/asgi.py`` applies it; Celery
# workers and manage.py keep one connection per use: they fork, and a pool must not cross a
# fork). Django's ASGI handler runs every request in a thread of its own, so without a pool each
# request opened a new connection (persistent connections cannot be reused across threads).
# Django checks each pooled connection on checkout, so a restarted database costs one failed
# check, not a failed request. ``PADDOCK_DB_POOL_SIZE=0`` turns the pool off.
PADDOCK_WEB_DB_POOL_SIZE = env_int("PADDOCK_DB_POOL_SIZE", 8, minimum=0)

REDIS_URL = env_url("REDIS_URL", "redis://127.0.0.1:6379/0", schemes=("redis", "rediss", "unix"))

# The live run page's consumer tells an idle client the run's latest event number this often
# (seconds): a lost last event (channel layers drop group messages over capacity silently)
# is then noticed and resynced within about this time (docs/websocket.md, "heartbeat").
PADDOCK_LIVE_HEARTBEAT_S = 3.0

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            # redis-py 8 times out socket reads after 5 s by default, exactly channels_redis's
            # 5 s blocking read on an idle channel: every quiet WebSocket then crashed. Give
            # reads more room than that wait.
            "hosts": [{"address": REDIS_URL, "socket_timeout": 30, "socket_connect_timeout": 5}],
            "capacity": 1500,
            "expiry": 30,
        },
    }
}

CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"


def _plotly_js_dir() -> str:
    """Folder of the ``plotly`` package's bundled ``plotly.min.js`` (served locally, no CDN).

    Found without importing plotly (which is slow to import and not needed by the web process).
    """
    spec = importlib.util.find_spec("plotly")
    if spec is None or not spec.submodule_search_locations:
        raise SettingsError("the plotly package is not installed (pip install -r requirements.txt)")
    return str(Path(list(spec.submodule_search_locations)[0]) / "package_data")


STATICFILES_DIRS = [BASE_DIR / "static", ("vendor/plotly", _plotly_js_dir())]
STATIC_ROOT = VAR_DIR / "staticfiles"
# Serve static files straight from the source folders (no collectstatic step needed).
WHITENOISE_USE_FINDERS = env_bool("WHITENOISE_USE_FINDERS", True)
WHITENOISE_AUTOREFRESH = DEBUG

PADDOCK_DATA_DIR = Path(env_str("PADDOCK_DATA_DIR", str(BASE_DIR.parent / "shared" / "data"))).resolve()
PADDOCK_ARTIFACTS_DIR = Path(env_str("PADDOCK_ARTIFACTS_DIR", str(VAR_DIR / "artifacts"))).resolve()


def _benchmark_file() -> Path:
    """The daily price file holding QQQ, the backtests' benchmark (relative paths resolve
    against ``PADDOCK_DATA_DIR``; absent is fine here: the demo downloads it)."""
    name = env_str("PADDOCK_BENCHMARK_FILE", "benchmark_etfs_daily_eodhd.csv.gz")
    if not name:
        raise SettingsError("PADDOCK_BENCHMARK_FILE: expected a file name or path, got an empty value")
    return (PADDOCK_DATA_DIR / Path(name).expanduser()).resolve()


PADDOCK_BENCHMARK_FILE = _benchmark_file()
PADDOCK_CACHE_DIR = VAR_DIR / "cache"
PADDOCK_UPLOADS_DIR = VAR_DIR / "uploads"
for _d in (PADDOCK_ARTIFACTS_DIR, PADDOCK_CACHE_DIR, PADDOCK_UPLOADS_DIR):
    _d.mkdir(parents=True, exist_ok=True)

# Checkpoints, agent bundles and reports: a local folder, or an S3-compatible bucket
# (PADDOCK_STORAGE=s3, webapp/config/storage.py).
STORAGES = storages(artifacts_dir=PADDOCK_ARTIFACTS_DIR, uploads_dir=PADDOCK_UPLOADS_DIR)
PADDOCK_STORAGE = storage_kind()
MEDIA_ROOT = str(PADDOCK_ARTIFACTS_DIR)

# --- Request limits (docs/limits.md; webapp/core/limits.py applies them) ------------------------
#: Bytes of files one upload may carry (413 from the Content-Length alone, or while it streams).
PADDOCK_UPLOAD_MAX_BYTES = env_int("PADDOCK_UPLOAD_MAX_BYTES", 100 * 1024 * 1024, minimum=1024)
#: Bytes of any other request body (JSON, forms without files): Django's own limit.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("PADDOCK_REQUEST_MAX_BYTES", 10 * 1024 * 1024, minimum=1024)
#: Form fields (and query parameters) per request, and files per request (Django's defaults).
DATA_UPLOAD_MAX_NUMBER_FIELDS = 1000
DATA_UPLOAD_MAX_NUMBER_FILES = 100
#: Nesting of lists and objects in a JSON body (the deepest real body, ``bars``, nests 4).
PADDOCK_JSON_MAX_DEPTH = 32
# Uploaded files stream to a temporary file as they arrive (none is held in memory), stopped at
# PADDOCK_UPLOAD_MAX_BYTES; a request body beyond 2.5 MB is spooled to disk by the ASGI handler.
FILE_UPLOAD_HANDLERS = ["webapp.core.limits.CappedUploadHandler"]
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_621_440

REST_FRAMEWORK = {
    # Token first: DRF answers an unauthenticated request with the first class's challenge,
    # so a missing or bad token is 401 with "WWW-Authenticate: Token" (session auth has no
    # challenge and would make it a 403). Browsers still authenticate with their session.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.TokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.PageNumberPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "webapp.core.errors.api_exception_handler",
    "DEFAULT_PARSER_CLASSES": [
        "webapp.core.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Paddock API",
    "DESCRIPTION": "Tournament-based ensemble training of RL trading agents.",
    "VERSION": "0.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# --- Celery (namespace CELERY_) ------------------------------------------------------------
CELERY_BROKER_URL = REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_TASK_DEFAULT_QUEUE = "cpu"
CELERY_TASK_ROUTES = {"webapp.runs.tasks.run_generation": {"queue": "gpu"}}
PADDOCK_GENERATION_TIME_LIMIT = env_int("PADDOCK_GENERATION_TIME_LIMIT", 3600, minimum=10)

# --- Policy serving (POST /api/agents/{id}/act) ------------------------------------------------
#: Act requests per token (or per user for session and account-token calls) and minute.
PADDOCK_SERVE_RATE_LIMIT = env_int("PADDOCK_SERVE_RATE_LIMIT", 600, minimum=1)
#: onnxruntime sessions kept per web process (least recently used evicted).
PADDOCK_SERVE_CACHE_SIZE = env_int("PADDOCK_SERVE_CACHE_SIZE", 32, minimum=1)
# Every user's quota for budgets of their own (held at once by their open budgets); staff raise
# it per user on the Budgets page.
PADDOCK_QUOTA_DEVICE_HOURS = env_float("PADDOCK_QUOTA_DEVICE_HOURS", 2.0, minimum=0.0)
PADDOCK_QUOTA_PODS = env_int("PADDOCK_QUOTA_PODS", 2, minimum=1)

# --- What one input may expand to (trainer.limits.InputLimits; docs/limits-trainer.md) --------
#: Bytes a data file may hold once decompressed (a .csv.gz's text, a Parquet file's columns).
PADDOCK_MAX_FILE_BYTES = env_int("PADDOCK_MAX_FILE_BYTES", 256 * 1024 * 1024, minimum=1)
#: Data rows one file may hold.
PADDOCK_MAX_FILE_ROWS = env_int("PADDOCK_MAX_FILE_ROWS", 2_000_000, minimum=1)
#: Bytes the members of an agent bundle may hold once decompressed, all together.
PADDOCK_MAX_BUNDLE_BYTES = env_int("PADDOCK_MAX_BUNDLE_BYTES", 256 * 1024 * 1024, minimum=1)
CELERY_TASK_TIME_LIMIT = PADDOCK_GENERATION_TIME_LIMIT + 60
CELERY_TASK_SOFT_TIME_LIMIT = PADDOCK_GENERATION_TIME_LIMIT
# A task still unacknowledged after this is delivered again (Redis transport); the generation
# claim turns such a second delivery into a no-op, and the reaper handles dead workers.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": PADDOCK_GENERATION_TIME_LIMIT * 2}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Workers try to reach a lost broker every second (webapp.core.workers.Consumer), for ever.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# A beat tick that falls into a broker outage is sent as soon as the broker is back.
CELERY_BEAT_SCHEDULER = "webapp.core.beat:RetryingScheduler"
# A generation keeps running through a broker outage (its result is stored in the database;
# the claim makes a redelivery a no-op). Celery 6 would change this default, so pin it.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_WORKER_SEND_TASK_EVENTS = False
# Periodic tasks, run by one `celery beat` process. A beat entry whose task is not registered
# yet only logs an error at each tick; the reaper requeues generations of dead workers.
CELERY_BEAT_SCHEDULE = {
    # a worker whose Redis heartbeat expired is gone: its generations are re-queued at once
    "reap-orphaned-generations": {
        "task": "webapp.runs.tasks.reap_orphaned_generations",
        "schedule": 5.0,
        "options": {"queue": "cpu", "expires": 5.0},
    },
    "reap-stale-generations": {
        "task": "webapp.runs.tasks.reap_stale_generations",
        "schedule": 30.0,
        "options": {"queue": "cpu", "expires": 30.0},
    },
    "reap-stale-backtests": {
        "task": "webapp.reports.tasks.reap_stale_backtests",
        "schedule": 60.0,
        "options": {"queue": "cpu", "expires": 60.0},
    },
    # act-call counters are kept in Redis by the web processes (webapp/serving/counters.py)
    "flush-serve-counters": {
        "task": "webapp.serving.tasks.flush_serve_counters",
        "schedule": 30.0,
        "options": {"queue": "cpu", "expires": 30.0},
    },
}

PADDOCK_TORCH_THREADS = env_int("PADDOCK_TORCH_THREADS", 1, minimum=1)
# A running generation without a heartbeat for this long is re-queued by the reaper; a queued
# backtest is sent again after PADDOCK_REDISPATCH_AFTER_S (a generation's message is sent again
# as soon as it is missing from the broker: webapp.runs.broker).
# A run whose last N agents all scored exactly 0 (they never trade, or the score is undefined)
# stops itself: more generations would spend the budget on the same nothing.
PADDOCK_ZERO_SCORE_GENERATIONS = env_int("PADDOCK_ZERO_SCORE_GENERATIONS", 8, minimum=1)
PADDOCK_STALE_AFTER_S = env_int("PADDOCK_STALE_AFTER_S", 120, minimum=5)
PADDOCK_REDISPATCH_AFTER_S = env_int("PADDOCK_REDISPATCH_AFTER_S", 60, minimum=5)
# A backtest takes seconds; one still running after this lost its worker.
PADDOCK_BACKTEST_STALE_AFTER_S = env_int("PADDOCK_BACKTEST_STALE_AFTER_S", 600, minimum=10)

# --- Logging: key=value lines, greppable by run and pod -------------------------------------
LOG_LEVEL = (env_str("PADDOCK_LOG_LEVEL", "INFO") or "INFO").upper()
if LOG_LEVEL not in {"DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"}:
    raise SettingsError(f"PADDOCK_LOG_LEVEL: expected DEBUG/INFO/WARNING/ERROR/CRITICAL, got {LOG_LEVEL!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "webapp.core.logging.ContextFilter"}},
    "formatters": {
        "kv": {"format": "%(asctime)s level=%(levelname)s logger=%(name)s run=%(run)s pod=%(pod)s %(message)s"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "kv", "filters": ["context"]}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {"django.db.backends": {"level": "WARNING"}, "daphne": {"level": "WARNING"}},
}
