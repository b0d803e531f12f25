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
- ``e2e_user``: a user whose password is :data:`E2E_PASSWORD`; ``staff_user``: a staff one.
- ``login`` / ``screenshot``: the helpers :func:`login` and :func:`screenshot`.
- :func:`assign_budget` (a staff user's budget on the budgets page) and :func:`make_serve_token`
  (a serve token for one agent on the tokens page), steps several browser tests share.

The test Redis database (``REDIS_URL``; ``./paddock test`` uses database 15) is flushed once at
session start, so workers never pick up Celery messages left by an earlier run. The process
helpers live in ``tests/harness.py``, shared with the runs orchestration tests.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from django.conf import settings

from tests.harness import (
    REPO_ROOT,
    celery_worker_argv,
    database_url,
    free_port,
    http_status,
    log_tail,  # noqa: F401 - re-exported: older test modules import the helpers from here
    start_process,
    stop_process,
    wait_until,
)

# Playwright's sync API keeps an event loop in the test thread; Django would otherwise refuse
# ORM calls made by the test itself (creating users, checking rows) next to it.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")

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
E2E_PASSWORD = "paddock-e2e-password"


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
    proc = start_process("celery-worker", celery_worker_argv(node), env)
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


@pytest.fixture
def staff_user(transactional_db):
    """Ada: staff, so she may assign budgets to anyone (herself too) on the budgets page."""
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user(username="ada", password=E2E_PASSWORD, is_staff=True)


def login(page, user, password: str = E2E_PASSWORD) -> None:
    """Log ``user`` in through the login form and wait until the app has left the form."""
    page.goto("/accounts/login/")
    page.fill("#id_username", user.username)
    page.fill("#id_password", password)
    with page.expect_navigation():
        page.click("#login-form button[type=submit]")
    if "/accounts/login/" in page.url:
        raise AssertionError(f"login as {user.username} failed: still on {page.url}")


def assign_budget(page, *, name: str, owner, pods: int, env_steps: int, wall_clock_s: int) -> None:
    """As a logged-in staff user, assign ``owner`` a budget on the budgets page and wait until
    the page lists it."""
    from playwright.sync_api import expect

    page.goto("/budgets/")
    page.fill("#id_name", name)
    page.select_option("#id_owner", label=owner.username)
    page.fill("#id_max_concurrent_pods", str(pods))
    page.fill("#id_env_step_cap", str(env_steps))
    page.fill("#id_max_wall_clock_s", str(wall_clock_s))
    with page.expect_navigation():
        page.click("#budget-form button[type=submit]")
    expect(page.locator("#budgets")).to_contain_text(name)


def make_serve_token(page, agent_id: int, name: str) -> str:
    """Follow the agent page's serving card to the tokens page (the agent prefilled), create a
    serve token named ``name`` for that agent and return its key (``srv_...``)."""
    page.goto(f"/agents/{agent_id}/")
    page.click("#serve-token-link")
    page.wait_for_selector("#serve-token-form")
    assert page.input_value("#id_agent") == str(agent_id)  # prefilled from the agent page
    page.fill("#id_name", name)
    page.click("#create-serve-token")
    page.wait_for_selector("#created-key")
    key = page.text_content("#created-key").strip()
    assert key.startswith("srv_"), key
    return key


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
