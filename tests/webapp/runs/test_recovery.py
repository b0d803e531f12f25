"""Recovery in seconds from a dropped database connection, a Redis restart and lost broker
messages, against the real services: PostgreSQL (whose backends the tests terminate), a private
``redis-server`` (killed and started again, empty) and real Celery worker processes.

Recovery *times* are measured by ``benchmarks/recovery.py``; these tests check that each kind
of fault is recovered from without waiting for the stale reaper or the next beat tick.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time

import psycopg
import pytest
import redis
from asgiref.sync import async_to_sync, sync_to_async
from channels.testing import WebsocketCommunicator
from django.db import connection
from django.test import Client

from tests.e2e.conftest import log_tail
from tests.harness import deadline_s
from tests.webapp.runs.test_redis_restart import PrivateRedis, private_redis, worker  # noqa: F401 - fixtures
from webapp.config.asgi import application  # set up now: Django's logging set-up would drop caplog's handler
from webapp.core import db
from webapp.core.beat import RetryingScheduler
from webapp.runs import broker, events, services, tasks
from webapp.runs.models import Agent, Generation, Run

pytestmark = [pytest.mark.django_db(transaction=True)]


def _postgres_only() -> None:
    if connection.vendor != "postgresql":
        pytest.skip("terminating a database backend needs PostgreSQL (CI runs on it)")


def _terminate_backends(*, keep_own: bool) -> int:
    """``pg_terminate_backend`` every other connection to the test database (and this
    process's own unless ``keep_own``), from a connection of its own. Returns how many."""
    own = connection.cursor().connection.info.backend_pid if keep_own else -1
    params = connection.get_connection_params()
    params.pop("cursor_factory", None)
    params.pop("context", None)
    with psycopg.connect(**params, autocommit=True) as admin:
        rows = admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid() AND pid <> %s",
            [own],
        ).fetchall()
    return len(rows)


def _claimed(make_budget, make_run, **run_options) -> tuple[Run, services.Claim]:
    run = make_run(make_budget(max_concurrent_pods=1), num_pods=1, **run_options)
    services.run_start(run=run)
    gen = Generation.objects.get(run=run)
    claim = services.generation_claim(generation_id=gen.pk, worker="test-worker")
    assert claim is not None
    return run, claim


def _seq(run: Run) -> int:
    return Run.objects.values_list("event_seq", flat=True).get(pk=run.pk)


# --- 4. a superseded attempt publishes nothing ------------------------------------------------


def test_an_attempt_whose_claim_was_reaped_publishes_no_more_progress(make_budget, make_run):
    run, claim = _claimed(make_budget, make_run)
    attempt = tasks._Attempt(claim)
    attempt.progress({"env_steps": 64, "steps_per_s": 10.0})
    assert not attempt.lost and _seq(run) > 0
    # The reaper takes the generation (its heartbeat looked too old): another attempt's now.
    assert services.generations_reap_stale(stale_after=0) == [claim.generation_id]
    seq = _seq(run)

    attempt._last_heartbeat = attempt._last_event = 0.0  # the next call heartbeats and may publish
    attempt.progress({"env_steps": 128, "steps_per_s": 10.0})
    attempt.progress({"env_steps": 192, "steps_per_s": 10.0})

    assert attempt.lost and attempt.should_stop()
    assert _seq(run) == seq, "no event after the heartbeat said the claim is lost"


# --- 1. a dropped database connection -----------------------------------------------------------


def test_a_heartbeat_on_a_terminated_connection_goes_on_on_a_new_one(make_budget, make_run):
    _postgres_only()
    _run, claim = _claimed(make_budget, make_run)
    attempt = tasks._Attempt(claim)
    before = Generation.objects.values_list("heartbeat_at", flat=True).get(pk=claim.generation_id)
    _terminate_backends(keep_own=False)

    attempt.heartbeat(env_steps=32, steps_per_s=1.0)  # would raise on the dead connection
    stop = attempt.should_stop()

    assert not attempt.lost and not stop
    assert Generation.objects.values_list("heartbeat_at", flat=True).get(pk=claim.generation_id) > before


def test_a_generation_failing_on_a_lost_connection_is_queued_again_without_using_an_attempt(make_budget, make_run):
    _postgres_only()
    _run, claim = _claimed(make_budget, make_run)
    _terminate_backends(keep_own=False)

    db.on_fresh_connection(
        services.generation_fail, claim=claim, error="OperationalError: terminated", retry=True, count_attempt=False
    )

    gen = Generation.objects.get(pk=claim.generation_id)
    assert gen.status == Generation.Status.QUEUED
    assert gen.attempt == claim.attempt - 1, "the next claim is attempt 1 again"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_terminating_the_workers_database_connection_mid_generation_costs_seconds(
    private_redis,  # noqa: F811
    worker,  # noqa: F811
    make_budget,
    make_run,
):
    _postgres_only()
    _node, proc = worker
    run = make_run(make_budget(max_concurrent_pods=1, env_step_cap=65536), num_pods=1, generation_steps=65536)
    services.run_start(run=run)
    gen = Generation.objects.get(run=run)

    def training() -> bool:
        row = Generation.objects.filter(pk=gen.pk).values_list("status", "pod__env_steps").first()
        return row is not None and row[0] == Generation.Status.RUNNING and row[1] > 0

    _wait(training, 120, "the generation to train", proc)
    # Terminate the worker's connection again and again for 3 s: whichever query meets the dead
    # connection first (heartbeat, stop check, progress event), the generation must go on.
    terminated = 0
    for _ in range(12):
        terminated += _terminate_backends(keep_own=True)
        time.sleep(0.25)
    killed_at = time.time()
    assert terminated >= 1

    def recovered() -> bool:
        g = Generation.objects.get(pk=gen.pk)
        alive = g.status == Generation.Status.RUNNING and g.heartbeat_at.timestamp() > killed_at + 0.5
        return alive or g.status in (Generation.Status.QUEUED, Generation.Status.DONE)

    _wait(recovered, 10, "a heartbeat on a new connection (or the generation queued again)", proc)
    _wait(lambda: _status(gen) == Generation.Status.DONE, 180, "the generation to finish", proc)
    gen.refresh_from_db()
    assert gen.attempt == 1, "the database blip used no attempt"
    assert Agent.objects.filter(run=run).count() == 1


def _status(gen: Generation) -> str:
    return Generation.objects.values_list("status", flat=True).get(pk=gen.pk)


def _wait(predicate, timeout: float, what: str, proc) -> None:
    timeout = deadline_s(timeout)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        assert proc.poll() is None, f"the worker exited:\n{log_tail(proc)}"
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}:\n{log_tail(proc, 60)}")


# --- 2. the event sender after a Redis restart ----------------------------------------------------


def test_events_sent_after_a_redis_restart_all_arrive(private_redis):  # noqa: F811
    from channels.layers import get_channel_layer

    layer = get_channel_layer()
    group = events.group_name(987_654)

    async def listen() -> str:
        channel = await layer.new_channel()
        await layer.group_add(group, channel)
        return channel

    async def receive(channel: str, n: int) -> list[int]:
        seqs = []
        for _ in range(n):
            try:
                message = await asyncio.wait_for(layer.receive(channel), 5)
            except TimeoutError:
                break
            seqs.append(message["event"]["seq"])
        return seqs

    channel = async_to_sync(listen)()
    events.send_now(987_654, {"type": events.PROGRESS, "seq": 1})
    assert async_to_sync(receive)(channel, 1) == [1]

    private_redis.crash()
    private_redis.start()
    channel = async_to_sync(listen)()  # the restart lost the group
    for seq in (2, 3, 4):
        events.send_now(987_654, {"type": events.PROGRESS, "seq": seq})

    assert async_to_sync(receive)(channel, 3) == [2, 3, 4]


# --- 3. lost broker messages ---------------------------------------------------------------------


def _messages(server: PrivateRedis, queue: str = "gpu") -> list[bytes]:
    client = redis.Redis.from_url(server.url)
    try:
        return client.lrange(queue, 0, -1)
    finally:
        client.close()


def test_the_sweep_sends_again_only_messages_that_are_really_lost(private_redis, make_budget, make_run):  # noqa: F811
    run = make_run(make_budget(max_concurrent_pods=2), num_pods=2)
    services.run_start(run=run)  # two messages wait in the queue: no worker consumes it
    assert len(_messages(private_redis)) == 2

    sent = services.runs_ensure_work(redispatch_after=0)

    assert sent == 0 and len(_messages(private_redis)) == 2, "waiting messages are not sent twice"

    client = redis.Redis.from_url(private_redis.url)
    lost = client.rpop("gpu")  # one message disappears, as in a Redis restart
    client.close()
    sent = services.runs_ensure_work(redispatch_after=0)

    assert sent == 1
    waiting = _messages(private_redis)
    assert len(waiting) == 2
    ids = {int(g) for g in Generation.objects.filter(run=run).values_list("id", flat=True)}
    assert {broker._TASK_ID.search(m).group(1).decode() for m in waiting} == {str(i) for i in ids}
    assert lost not in waiting, "the lost generation got a new message"


def test_a_message_delivered_to_a_worker_that_died_before_claiming_it_is_sent_again(
    private_redis,  # noqa: F811
    make_budget,
    make_run,
):
    run = make_run(make_budget(max_concurrent_pods=1), num_pods=1)
    services.run_start(run=run)
    client = redis.Redis.from_url(private_redis.url)
    # What the Redis transport does when a worker takes a message: out of the queue, into the
    # hash of unacknowledged messages, indexed by delivery time.
    raw = client.rpop("gpu")
    client.hset("unacked", "tag-1", json.dumps([json.loads(raw), "gpu", "gpu"]))
    client.zadd("unacked_index", {"tag-1": time.time()})

    assert services.runs_ensure_work(redispatch_after=0) == 0, "a worker has it: it is not lost"

    client.zadd("unacked_index", {"tag-1": time.time() - services.stale_after_s() - 1})  # delivered long ago
    client.close()

    assert services.runs_ensure_work(redispatch_after=0) == 1, "its worker died before claiming it"
    assert len(_messages(private_redis)) == 1


def test_a_message_that_could_not_be_sent_is_sent_by_the_next_sweep(private_redis, make_budget, make_run):  # noqa: F811
    run = make_run(make_budget(max_concurrent_pods=1), num_pods=1)
    private_redis.crash()
    services.run_start(run=run)  # the send fails: Redis is down
    gen = Generation.objects.get(run=run)
    assert gen.dispatched_at is None, "a failed send leaves the generation undispatched"
    private_redis.start()

    assert services.runs_ensure_work() == 1
    assert len(_messages(private_redis)) == 1


def test_a_beat_tick_that_failed_during_an_outage_is_sent_when_the_broker_is_back(private_redis, tmp_path):  # noqa: F811
    from webapp.config.celery import app

    scheduler = RetryingScheduler(app, schedule_filename=str(tmp_path / "beat-schedule"), lazy=True)
    entry = scheduler.Entry(
        name="reap-stale-generations",
        task="webapp.runs.tasks.reap_stale_generations",
        schedule=30.0,
        options={"queue": "cpu"},
        app=app,
    )
    private_redis.crash()
    threading.Timer(2.0, private_redis.start).start()

    started = time.monotonic()
    scheduler.apply_entry(entry)

    assert time.monotonic() - started < 15
    assert len(_messages(private_redis, "cpu")) == 1, "the tick went out once Redis was back"


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_training_resumes_right_after_the_broker_returns_without_a_beat_tick(
    private_redis,  # noqa: F811
    worker,  # noqa: F811
    make_budget,
    make_run,
):
    # No beat and no reaper here: only the worker's reaction to its reconnect can send the
    # generation whose message was lost with Redis.
    _node, proc = worker
    steps = 16384
    run = make_run(make_budget(max_concurrent_pods=1, env_step_cap=3 * steps), num_pods=1, generation_steps=steps)
    services.run_start(run=run)
    first = Generation.objects.get(run=run)
    _wait(lambda: _status(first) == Generation.Status.RUNNING, 120, "the first generation to train", proc)
    private_redis.crash()
    # The first generation finishes while Redis is down; the second one's message cannot be sent.
    _wait(lambda: _status(first) == Generation.Status.DONE, 120, "the first generation to finish", proc)
    time.sleep(1.0)
    private_redis.start()
    back = time.monotonic()

    def second_trains() -> bool:
        return (
            Generation.objects.filter(run=run, number__gt=first.number, status__in=Generation.OPEN)
            .exclude(status=Generation.Status.QUEUED)
            .exists()
            or Generation.objects.filter(run=run, status=Generation.Status.DONE).count() > 1
        )

    _wait(second_trains, 15, "the next generation to start after Redis came back", proc)
    resumed_after = time.monotonic() - back
    assert resumed_after < 15, resumed_after


# --- 5. health and logs --------------------------------------------------------------------------


def test_healthz_logs_why_it_answered_503(client, settings, caplog):
    from tests.harness import free_port

    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    with caplog.at_level(logging.WARNING, logger="webapp.core.health"):
        response = client.get("/healthz")

    assert response.status_code == 503
    lines = [r.getMessage() for r in caplog.records if r.name == "webapp.core.health"]
    assert len(lines) == 1 and lines[0].startswith("healthz: 503, down: redis: ConnectionError"), lines


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_healthz_lists_workers_from_their_heartbeats_and_drops_a_killed_one(private_redis, worker, client):  # noqa: F811
    import os
    import signal

    from webapp.core.workers import HEARTBEAT_TTL_S

    node, proc = worker
    _wait(lambda: client.get("/healthz").status_code == 200, 30, "healthz to list the worker", proc)
    names = [w["name"] for w in client.get("/healthz").json()["checks"]["workers"]["workers"]]
    assert names == [node]

    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + HEARTBEAT_TTL_S + 5
    while time.monotonic() < deadline and client.get("/healthz").status_code == 200:
        time.sleep(0.5)
    report = client.get("/healthz").json()
    assert "workers" in report["down"], report


def _session_cookie(user) -> bytes:
    c = Client()
    c.force_login(user)
    return f"sessionid={c.cookies['sessionid'].value}".encode()


async def test_websocket_connects_and_closes_during_a_redis_outage_log_one_warning(
    private_redis,  # noqa: F811
    make_budget,
    make_run,
    user,
    caplog,
):
    run = await sync_to_async(make_run)(await sync_to_async(make_budget)(), num_pods=1)
    cookie = await sync_to_async(_session_cookie)(user)
    await sync_to_async(private_redis.crash)()
    closes = []
    with caplog.at_level(logging.INFO):
        for _ in range(3):
            communicator = WebsocketCommunicator(
                application, f"/ws/runs/{run.id}/", headers=[(b"origin", b"http://127.0.0.1"), (b"cookie", cookie)]
            )
            connected, _ = await communicator.connect(timeout=10)
            assert connected
            closes.append(await communicator.receive_output(timeout=10))
            await communicator.disconnect()

    assert [c.get("code") for c in closes] == [4503, 4503, 4503], closes
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    warnings = [r.getMessage() for r in caplog.records if r.name == "webapp.runs.consumers"]
    assert errors == []
    assert len(warnings) == 1 and "channel layer unreachable" in warnings[0], warnings
