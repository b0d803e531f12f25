"""Fixtures of the runs tests: ``make_run`` and real Celery worker processes on an isolated
Redis database. Users, the dataset, the tiny task and ``make_budget`` come from
``tests/webapp/conftest.py``; the worker processes from ``tests/harness.py``.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from tests.harness import REPO_ROOT, Workers, database_url


@pytest.fixture
def make_run(user, task) -> Callable:
    from webapp.runs import services

    def make(budget, **options):
        options.setdefault("num_pods", 3)
        options.setdefault("generation_steps", 256)
        options.setdefault("leaderboard_size", 3)
        options.setdefault("mutation", {"bounds": {"learning_rate": [1e-5, 1e-2]}, "factors": [0.8, 1.25]})
        options.setdefault("device", "cpu")
        return services.run_create(owner=user, task=task, budget=budget, **options)

    return make


# --- real Celery workers --------------------------------------------------------------------


def _point_celery_at(app, url: str) -> None:
    # Drop the cached connection and producer pools so the next send uses the new URL.
    app.conf.broker_url = url
    app._pool = None
    app.amqp._producer_pool = None


@pytest.fixture(scope="module")
def isolated_redis(django_db_setup, django_db_blocker) -> Iterator[str]:
    """A Redis database of its own for this module's broker and channel layer, so workers of
    other test sessions on the same Redis never take our messages."""
    from django.conf import settings

    from tests.pytest_env import isolated_databases
    from webapp.config.celery import app

    base, own = settings.REDIS_URL.rsplit("/", 1)
    url = f"{base}/{random.choice(isolated_databases(own))}"
    client = redis.Redis.from_url(url)
    client.flushdb()
    old = (app.conf.broker_url, settings.CHANNEL_LAYERS)
    _point_celery_at(app, url)
    settings.CHANNEL_LAYERS = {
        "default": {
            **old[1]["default"],
            "CONFIG": {
                **old[1]["default"]["CONFIG"],
                "hosts": [{**old[1]["default"]["CONFIG"]["hosts"][0], "address": url}],
            },
        }
    }
    from channels.layers import channel_layers

    channel_layers.backends = {}
    yield url
    _point_celery_at(app, old[0])
    settings.CHANNEL_LAYERS = old[1]
    channel_layers.backends = {}
    client.flushdb()
    client.close()


def worker_env(redis_url: str, data_dir, **extra: str) -> dict[str, str]:
    """The environment of a test worker process: the test database, ``redis_url``, the data
    folder, one torch thread, plus ``extra`` variables."""
    from django.db import connection

    return {
        **os.environ,
        "DEBUG": "1",
        "DATABASE_URL": database_url(connection.settings_dict),
        "REDIS_URL": redis_url,
        "PADDOCK_DATA_DIR": str(data_dir),
        "PADDOCK_TORCH_THREADS": "1",
        "PYTHONPATH": str(REPO_ROOT),
        **extra,
    }


@pytest.fixture(scope="module")
def workers(isolated_redis, data_dir) -> Iterator[Workers]:
    """Factory of real worker processes; all are stopped at the end of the module. Their logs
    are kept in ``<PADDOCK_VAR_DIR>/worker-logs``."""
    from django.conf import settings

    env = worker_env(isolated_redis, data_dir)
    log_dir = Path(settings.VAR_DIR) / "worker-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    pool = Workers(env, log_dir)
    yield pool
    pool.stop_all()


@pytest.fixture(autouse=True)
def _workers_quiet_at_teardown(request) -> Iterator[None]:
    """After a test that used the worker processes, stop its runs and wait until the workers
    hold no task and the queues are empty. The database flush that follows truncates every
    table; a worker still writing (an end-of-run backtest, say) made that flush fail with a
    lock conflict and left rows for the next test."""
    yield
    if "workers" not in request.fixturenames:
        return
    from webapp.config.celery import app
    from webapp.runs import services
    from webapp.runs.models import Run

    for run in Run.objects.filter(status__in=[Run.Status.QUEUED, *Run.ACTIVE]):
        services.run_stop(run=run)
    client = redis.Redis.from_url(request.getfixturevalue("isolated_redis"))
    quiet_polls, deadline = 0, time.monotonic() + 120
    while quiet_polls < 2 and time.monotonic() < deadline:
        active = app.control.inspect(timeout=1.0).active() or {}
        busy = any(active.values()) or client.llen("gpu") or client.llen("cpu")
        quiet_polls = 0 if busy else quiet_polls + 1
        time.sleep(0.5)
    client.close()
