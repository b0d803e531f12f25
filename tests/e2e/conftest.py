"""Browser-test harness: the real ASGI server, a real Celery worker, Chromium through Playwright.

Fixtures (use ``@pytest.mark.django_db(transaction=True)`` and ``@pytest.mark.browser``):

- ``e2e_env`` (session): environment for server processes, pointed at pytest-django's test
  database (a file for SQLite, ``test_<name>`` for PostgreSQL) and at the test Redis database.
- ``asgi_server`` (session): daphne on a free port, HTTP + WebSocket; its base URL.
- ``live_url``: ``asgi_server`` for one test, with a database that is flushed after it
  (``transactional_db``), so data the test creates is visible to the server and the worker.
- ``celery_worker`` (session): one worker process on queues ``gpu,cpu``, concurrency 1,
  ``PADDOCK_TORCH_THREADS=1``; its node name.
- ``browser`` (session) and ``page``: Debian's Chromium driven by Playwright's sync API; the
  page's relative URLs resolve against ``live_url``.
- ``e2e_user``: a user whose password is :data:`E2E_PASSWORD`.
- ``login`` / ``screenshot``: the helpers :func:`login` and :func:`screenshot`.

The test Redis database (``REDIS_URL``; ``./paddock test`` uses database 15) is flushed once at
session start, so workers never pick up Celery messages left by an earlier run.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from django.conf import settings

# Playwright's sync API keeps an event loop in the test thread; Django would otherwise refuse
# ORM calls made by the test itself (creating users, checking rows) next to it.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

REPO_ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("PADDOCK_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-quic",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOT_DIR = REPO_ROOT / "test-output" / "screenshots"
LOG_DIR = REPO_ROOT / "test-output" / "logs"
E2E_PASSWORD = "paddock-e2e-password"
START_TIMEOUT_S = 90.0


# --- process helpers (also used by tests of the launcher and of /healthz) -----------------------


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_process(name: str, argv: list[str], env: dict[str, str]) -> subprocess.Popen:
    """Start ``argv`` as the leader of a new process group, logging to ``test-output/logs``."""
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    with open(LOG_DIR / f"{name}.log", "ab") as log:
        proc = subprocess.Popen(
            argv,
            cwd=REPO_ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    proc.log_path = LOG_DIR / f"{name}.log"  # type: ignore[attr-defined]
    return proc


def _signal_group(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except ProcessLookupError:
        pass


def stop_process(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left of it (e.g. a Celery pool)."""
    _signal_group(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    _signal_group(proc.pid, signal.SIGKILL)
    proc.wait()


def log_tail(proc: subprocess.Popen, lines: int = 30) -> str:
    path = getattr(proc, "log_path", None)
    if path is None or not Path(path).exists():
        return ""
    return "\n".join(Path(path).read_text(errors="replace").splitlines()[-lines:])


def wait_until(ready: Callable[[], bool], proc: subprocess.Popen, what: str, timeout: float = START_TIMEOUT_S) -> None:
    """Poll ``ready()`` until true; fail with the process log when it exits or time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{what} exited with status {proc.returncode}:\n{log_tail(proc)}")
        if ready():
            return
        time.sleep(0.25)
    pytest.fail(f"{what} not ready after {timeout:.0f} s:\n{log_tail(proc)}")


def http_status(url: str) -> int | None:
    """HTTP status of a GET, or None when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, ValueError):
        return None


def database_url(db: dict) -> str:
    """A ``DATABASE_URL`` for a Django ``settings_dict`` (the test database after set-up)."""
    if db["ENGINE"].endswith("sqlite3"):
        name = str(db["NAME"])
        if name in ("", ":memory:") or name.startswith("file:"):
            raise RuntimeError("browser tests need a file SQLite test database (DATABASES TEST NAME)")
        return f"sqlite:///{name}"
    quote = urllib.parse.quote
    auth = quote(db.get("USER") or "", safe="")
    if db.get("PASSWORD"):
        auth += ":" + quote(db["PASSWORD"], safe="")
    host = db.get("HOST") or "127.0.0.1"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{auth}{'@' if auth else ''}{host}{port}/{quote(db['NAME'], safe='')}"


# --- servers ------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def e2e_redis_url() -> str:
    """The tests' Redis URL, its database flushed once (never database 0, a dev stack's)."""
    url = settings.REDIS_URL
    client = redis.Redis.from_url(url, socket_connect_timeout=2)
    try:
        client.ping()
        if int(client.connection_pool.connection_kwargs.get("db", 0)) != 0:
            client.flushdb()
    except redis.RedisError as exc:
        pytest.fail(f"Redis does not answer at REDIS_URL={url} ({exc}); start redis-server")
    finally:
        client.close()
    return url


@pytest.fixture(scope="session")
def e2e_env(django_db_setup, django_db_blocker, e2e_redis_url) -> dict[str, str]:
    """Environment for daphne and Celery processes that share the test database and Redis."""
    from django.db import connection

    env = os.environ.copy()
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "webapp.config.settings",
            "DATABASE_URL": database_url(connection.settings_dict),
            "REDIS_URL": e2e_redis_url,
            "DEBUG": os.environ.get("DEBUG", "1"),
            "SECRET_KEY": settings.SECRET_KEY,
            "PADDOCK_VAR_DIR": str(settings.VAR_DIR),
            "PADDOCK_DATA_DIR": str(settings.PADDOCK_DATA_DIR),
            "PADDOCK_ARTIFACTS_DIR": str(settings.PADDOCK_ARTIFACTS_DIR),
            "PADDOCK_TORCH_THREADS": "1",
            "PYTHONUNBUFFERED": "1",
        }
    )
    return env


def start_daphne(env: dict[str, str], name: str = "daphne") -> tuple[subprocess.Popen, str]:
    """Start daphne on a free port and wait until it serves the login page; ``(proc, url)``."""
    port = free_port()
    argv = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port), "webapp.config.asgi:application"]
    proc = start_process(name, argv, env)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_until(lambda: http_status(base + "/accounts/login/") == 200, proc, "daphne")
    except BaseException:
        stop_process(proc)
        raise
    return proc, base


@pytest.fixture(scope="session")
def asgi_server(e2e_env) -> Iterator[str]:
    """daphne serving HTTP and WebSockets against the test database; its base URL."""
    proc, base = start_daphne(e2e_env)
    yield base
    stop_process(proc)


@pytest.fixture
def live_url(transactional_db, asgi_server) -> str:
    """The running server's base URL (``http://127.0.0.1:PORT``) for one transactional test."""
    return asgi_server


@pytest.fixture(scope="session")
def celery_worker(e2e_env) -> Iterator[str]:
    """A Celery worker process consuming ``gpu`` and ``cpu``; yields its node name."""
    from webapp.config.celery import app

    node = f"e2e-{os.getpid()}@{socket.gethostname()}"
    env = {**e2e_env, "PADDOCK_WORKER_DEVICE": "cpu", "CUDA_VISIBLE_DEVICES": ""}
    argv = [sys.executable, "-m", "celery", "-A", "webapp.config.celery", "worker", "-Q", "gpu,cpu", "-c", "1"]
    argv += ["-n", node, "--loglevel", "INFO", "--without-gossip", "--without-mingle", "--without-heartbeat"]
    proc = start_process("celery-worker", argv, env)
    try:
        wait_until(lambda: bool(app.control.ping(destination=[node], timeout=0.5)), proc, "celery worker")
        yield node
    finally:
        stop_process(proc)


# --- browser ------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def browser():
    """Debian's Chromium (never a downloaded browser) under Playwright, headless."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"Chromium not found at {CHROMIUM}: apt-get install -y chromium (or set PADDOCK_CHROMIUM)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, live_url):
    """A fresh browser context (no cookies) and page whose relative URLs go to ``live_url``."""
    context = browser.new_context(base_url=live_url, viewport={"width": 1280, "height": 800})
    context.set_default_timeout(15_000)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def e2e_user(transactional_db):
    """A user who logs in with :data:`E2E_PASSWORD`."""
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user(username="alice", password=E2E_PASSWORD)


def login(page, user, password: str = E2E_PASSWORD) -> None:
    """Log ``user`` in through the login form and wait until the app has left the form."""
    page.goto("/accounts/login/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", password)
    with page.expect_navigation():
        page.click("#login-form button[type=submit]")
    if "/accounts/login/" in page.url:
        raise AssertionError(f"login as {user.username} failed: still on {page.url}")


def screenshot(page, name: str) -> Path:
    """Save a full-page PNG as ``test-output/screenshots/<name>.png`` and return its path."""
    SCREENSHOT_DIR.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOT_DIR / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


@pytest.fixture(name="login")
def login_fixture() -> Callable:
    """:func:`login` as a fixture: ``login(page, user)``."""
    return login


@pytest.fixture(name="screenshot")
def screenshot_fixture() -> Callable:
    """:func:`screenshot` as a fixture: ``screenshot(page, "name")``."""
    return screenshot
