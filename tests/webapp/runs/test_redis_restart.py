"""A Redis restart in the middle of a run loses no run: a real Celery worker trains tiny
generations on real Dow-30 data against a private ``redis-server`` that the test kills and
starts again, empty, on the same port.

The private server keeps nothing on disk (``--save "" --appendonly no``), so the restart drops
every message: the queued generation's, the unacknowledged one of the generation being trained
and any sent while Redis was down. That is the worst case; the run must still spend its budget
because the database, not the broker, holds the truth and the reaper re-sends what is lost.
The reaper is called from the test loop where the beat process would call it, with the short
``PADDOCK_STALE_AFTER_S`` / ``PADDOCK_REDISPATCH_AFTER_S`` the worker is also given.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator

import pytest
from kombu import pools as kombu_pools

from tests.e2e.conftest import database_url, log_tail, start_process, stop_process, wait_until
from tests.harness import PrivateRedis
from webapp.reports.models import Backtest
from webapp.reports.tasks import reap_stale_backtests
from webapp.runs import services, tasks
from webapp.runs.models import Agent, ClusterBudget, Generation, Run

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# A worker heartbeats only while it trains, and a cold worker loads and prepares the market data
# for several seconds before its first update: 15 s keeps that first generation from being
# reaped as stale (it would run twice). Heartbeats go to the database, so a Redis restart never
# makes a generation stale; the re-send of lost messages is what this test is about.
STALE_AFTER_S = 15
REDISPATCH_AFTER_S = 5
GENERATION_STEPS = 16384  # 2.5 to 6 s of training here, so a crash lands inside a generation
GENERATIONS = 5  # the env-step cap allows exactly this many
OUTAGE_S = 4.0


def _point_celery_at(app, url: str) -> None:
    # Drop the cached connection and producer pools so the next send uses the new URL. kombu
    # keeps its pools in a process-wide registry keyed by connection: reset it too, or pointing
    # back at the old URL would hand out the pool closed here ("Acquire on closed pool").
    if app._pool is not None:
        app._pool.force_close_all()
    kombu_pools.reset()
    app.conf.broker_url = url
    app._pool = None
    app.amqp._producer_pool = None
    # The remote-control mailbox keeps the producer pool it used last (now closed).
    app.control.mailbox.__dict__.pop("producer_pool", None)


@pytest.fixture
def private_redis(tmp_path, settings) -> Iterator[PrivateRedis]:
    """A private Redis that this process's Celery sends, events, health checks and reaper
    timings point at for the length of the test."""
    from channels.layers import channel_layers

    from webapp.config.celery import app

    server = PrivateRedis(tmp_path)
    server.start()
    old_broker = app.conf.broker_url
    layer = settings.CHANNEL_LAYERS["default"]
    settings.REDIS_URL = server.url
    settings.CHANNEL_LAYERS = {
        "default": {
            **layer,
            "CONFIG": {**layer["CONFIG"], "hosts": [{**layer["CONFIG"]["hosts"][0], "address": server.url}]},
        }
    }
    settings.PADDOCK_STALE_AFTER_S = STALE_AFTER_S
    settings.PADDOCK_REDISPATCH_AFTER_S = REDISPATCH_AFTER_S
    _point_celery_at(app, server.url)
    channel_layers.backends = {}
    try:
        yield server
    finally:
        _point_celery_at(app, old_broker)
        channel_layers.backends = {}
        server.stop()


@pytest.fixture
def worker(private_redis, data_dir) -> Iterator[tuple[str, subprocess.Popen]]:
    """One Celery worker process (queues ``gpu,cpu``, concurrency 1) on the private Redis and
    the test database; yields its node name and process."""
    from django.conf import settings
    from django.db import connection

    from webapp.config.celery import app

    node = f"redis-restart-{os.getpid()}@{socket.gethostname()}"
    env = {
        **os.environ,
        "DEBUG": "1",
        "DATABASE_URL": database_url(connection.settings_dict),
        "REDIS_URL": private_redis.url,
        "PADDOCK_VAR_DIR": str(settings.VAR_DIR),
        "PADDOCK_DATA_DIR": str(data_dir),
        "PADDOCK_STALE_AFTER_S": str(STALE_AFTER_S),
        "PADDOCK_REDISPATCH_AFTER_S": str(REDISPATCH_AFTER_S),
        "PADDOCK_TORCH_THREADS": "1",
        "PADDOCK_WORKER_DEVICE": "cpu",
        "CUDA_VISIBLE_DEVICES": "",
        "PYTHONUNBUFFERED": "1",
    }
    argv = [sys.executable, "-m", "celery", "-A", "webapp.config.celery", "worker", "-Q", "gpu,cpu", "-c", "1"]
    argv += ["--pool=prefork", "-n", node, "-l", "INFO", "--without-gossip", "--without-mingle", "--without-heartbeat"]
    proc = start_process("celery-redis-restart", argv, env)
    try:
        wait_until(lambda: bool(app.control.ping(destination=[node], timeout=0.5)), proc, "celery worker")
        yield node, proc
    finally:
        stop_process(proc)


def _reap() -> None:
    """One beat tick of the reapers (generations, then backtests), run in this process."""
    tasks.reap_stale_generations()
    reap_stale_backtests()


def _wait(predicate: Callable[[], bool], *, timeout: float, what: str, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        assert proc.poll() is None, f"the worker exited with {proc.returncode}:\n{log_tail(proc)}"
        _reap()  # while Redis is down its sends fail and are logged; it must not raise
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}:\n{log_tail(proc)}")


def _outage(seconds: float, proc: subprocess.Popen) -> None:
    """Keep ticking the reapers while Redis is down, as beat would."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        assert proc.poll() is None, f"the worker died with Redis:\n{log_tail(proc)}"
        _reap()
        time.sleep(0.5)


def _run_status(run: Run) -> str:
    return Run.objects.values_list("status", flat=True).get(pk=run.pk)


def _steps_used(budget: ClusterBudget) -> int:
    return ClusterBudget.objects.values_list("env_steps_used", flat=True).get(pk=budget.pk)


def _training(run: Run) -> list[Generation]:
    return list(Generation.objects.filter(run=run, status=Generation.Status.RUNNING))


def test_redis_restarts_mid_run_lose_no_generation_and_no_end_of_run_backtest(
    private_redis, worker, make_budget, make_run, client, user
):
    node, proc = worker
    cap = GENERATIONS * GENERATION_STEPS
    budget = make_budget(max_concurrent_pods=2, env_step_cap=cap)
    run = make_run(budget, num_pods=2, generation_steps=GENERATION_STEPS)
    services.run_start(run=run)
    client.force_login(user)
    interrupted: list[Generation] = []

    # Crash 1: a generation trains, the other pod's message waits in Redis, an agent exists.
    def mid_run() -> bool:
        if not Agent.objects.filter(run=run).exists() or _steps_used(budget) > cap - 2 * GENERATION_STEPS:
            return False
        interrupted[:] = _training(run)
        return bool(interrupted)

    _wait(mid_run, timeout=60, what="a generation training after the first agent", proc=proc)
    agents_before = Agent.objects.filter(run=run).count()
    private_redis.mark()
    private_redis.crash()
    _outage(OUTAGE_S, proc)
    # The web side keeps answering while Redis is down.
    page = client.get(f"/runs/{run.pk}/")
    health = client.get("/healthz")
    assert page.status_code == 200 and run.name.encode() in page.content
    assert health.status_code == 503 and "redis" in health.json()["down"]
    private_redis.start()
    assert private_redis.lost_everything(), "the restarted Redis lost every queued and unacknowledged message"

    # Crash 2: the generation that spends the budget trains; the run finishes while Redis is
    # down, so the message that starts its end-of-run backtests is lost as well.
    def last_generation() -> bool:
        return _steps_used(budget) == cap - GENERATION_STEPS and bool(_training(run))

    _wait(last_generation, timeout=90, what="the last generation to train", proc=proc)
    private_redis.crash()
    deadline = time.monotonic() + 30
    while _run_status(run) != Run.Status.FINISHED and time.monotonic() < deadline:
        _outage(0.5, proc)
    assert _run_status(run) == Run.Status.FINISHED, "the last generation completes with Redis down"
    private_redis.start()

    def backtested() -> bool:
        return Backtest.objects.filter(run=run, source=Backtest.Source.END_OF_RUN, status=Backtest.Status.DONE).exists()

    _wait(backtested, timeout=60, what="the end-of-run backtests", proc=proc)
    _wait(lambda: client.get("/healthz").status_code == 200, timeout=30, what="the worker to reconnect", proc=proc)

    assert _steps_used(budget) == cap, "the whole budget was spent"
    # trained generations and agents: the end-of-run top-3 ensemble is an agent of its own
    # (kind "ensemble") without a generation
    done = Generation.objects.filter(run=run, status=Generation.Status.DONE)
    trained = Agent.objects.filter(run=run, generation__in=done)
    assert done.count() == GENERATIONS
    assert trained.count() == GENERATIONS > agents_before
    assert Agent.objects.filter(run=run).count() <= GENERATIONS + 1, "at most the ensemble besides"
    assert set(trained.values_list("generation_id", flat=True)) == set(done.values_list("id", flat=True)), (
        "exactly one agent per done generation"
    )
    assert not Generation.objects.filter(run=run, status__in=Generation.OPEN).exists(), "no generation is stuck"
    assert not Generation.objects.filter(run=run, status=Generation.Status.FAILED).exists()
    kept = Generation.objects.get(pk=interrupted[0].pk)
    assert kept.status == Generation.Status.DONE, "the generation trained across the first outage was kept"
