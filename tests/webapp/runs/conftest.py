"""Fixtures of the runs tests: users, a real Dow-30 dataset, tiny tasks, budgets, and real
Celery worker processes on an isolated Redis database.

Who may see what: ``user`` owns the dataset, task, budget and runs; ``other_user`` owns
nothing and must not be able to use them; ``staff`` may assign budgets to others.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from tests.conftest import DOW30_FILE, REPO_ROOT

TICKERS = ["AAPL", "MSFT", "JPM"]
SPLITS = {
    "train": ["2018-06-01", "2019-12-31"],
    "validation": ["2020-01-01", "2020-06-30"],
    "test": ["2020-07-01", "2020-12-31"],
}
# Small enough that a generation of a few hundred env steps takes a fraction of a second.
TINY_PPO = {"num_envs": 4, "rollout_steps": 32, "num_minibatches": 2, "hidden_sizes": [32, 32], "update_epochs": 2}


@pytest.fixture
def user(django_user_model):
    return django_user_model.objects.create_user(username="ada", password="pw-ada-12345")


@pytest.fixture
def other_user(django_user_model):
    return django_user_model.objects.create_user(username="bob", password="pw-bob-12345")


@pytest.fixture
def staff(django_user_model):
    return django_user_model.objects.create_user(username="sam", password="pw-sam-12345", is_staff=True)


@pytest.fixture
def dataset(user, data_dir, settings):
    from webapp.market import services as market_services

    settings.PADDOCK_DATA_DIR = data_dir
    return market_services.dataset_create_from_files(owner=user, name="dow30", paths=[DOW30_FILE], tickers=TICKERS)


@pytest.fixture
def task(user, dataset):
    from webapp.runs import services

    return services.task_create(
        owner=user,
        dataset=dataset,
        name="tiny ppo",
        tickers=TICKERS,
        splits=SPLITS,
        algorithm="ppo",
        hyperparameters=TINY_PPO,
    )


@pytest.fixture
def make_budget(user) -> Callable:
    from webapp.runs import services

    def make(**limits):
        limits.setdefault("max_concurrent_pods", 2)
        return services.budget_create(actor=user, name=f"budget-{random.randrange(10**6)}", **limits)

    return make


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


class Workers:
    """Celery worker processes (``-Q gpu,cpu -c 1 --pool=prefork``) sharing the test database.

    Each worker is its own process group so ``kill(-pgid, SIGKILL)`` kills the parent and its
    pool child at once, like a machine that disappears.
    """

    def __init__(self, env: dict[str, str], log_dir: Path) -> None:
        self.env = env
        self.log_dir = log_dir
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, name: str) -> str:
        hostname = f"{name}@paddock-test"
        log = open(self.log_dir / f"{name}.log", "ab")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "webapp.config.celery",
                "worker",
                "-Q",
                "gpu,cpu",
                "-c",
                "1",
                "--pool=prefork",
                "-n",
                hostname,
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
                "-l",
                "INFO",
            ],
            cwd=REPO_ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.procs[hostname] = proc
        return hostname

    def kill9(self, hostname: str) -> None:
        proc = self.procs.pop(hostname)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 10
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=5)
        self.procs.clear()


def _database_url() -> str:
    from django.db import connection

    s = connection.settings_dict
    if s["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{s['NAME']}"
    auth = s["USER"] + (f":{s['PASSWORD']}" if s.get("PASSWORD") else "")
    return f"postgres://{auth}@{s['HOST'] or '127.0.0.1'}:{s['PORT'] or 5432}/{s['NAME']}"


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

    from webapp.config.celery import app

    base = settings.REDIS_URL.rsplit("/", 1)[0]
    url = f"{base}/{random.randint(2, 15)}"
    client = redis.Redis.from_url(url)
    client.flushdb()
    old = (app.conf.broker_url, settings.CHANNEL_LAYERS)
    _point_celery_at(app, url)
    settings.CHANNEL_LAYERS = {
        "default": {**old[1]["default"], "CONFIG": {**old[1]["default"]["CONFIG"], "hosts": [url]}}
    }
    from channels.layers import channel_layers

    channel_layers.backends = {}
    yield url
    _point_celery_at(app, old[0])
    settings.CHANNEL_LAYERS = old[1]
    channel_layers.backends = {}
    client.flushdb()
    client.close()


@pytest.fixture(scope="module")
def workers(isolated_redis, data_dir) -> Iterator[Workers]:
    """Factory of real worker processes; all are stopped at the end of the module. Their logs
    are kept in ``<PADDOCK_VAR_DIR>/worker-logs``."""
    from django.conf import settings

    env = {
        **os.environ,
        "DEBUG": "1",
        "DATABASE_URL": _database_url(),
        "REDIS_URL": isolated_redis,
        "PADDOCK_DATA_DIR": str(data_dir),
        "PADDOCK_TORCH_THREADS": "1",
        "PYTHONPATH": str(REPO_ROOT),
    }
    log_dir = Path(settings.VAR_DIR) / "worker-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    pool = Workers(env, log_dir)
    yield pool
    pool.stop_all()
