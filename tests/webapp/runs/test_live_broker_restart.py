"""A live run page survives a broker restart: through a real daphne and a private
``redis-server`` of this test, an open WebSocket is closed with a code the page reconnects on
(4503) once Redis restarts (its group membership died with it), instead of living on with
heartbeats and no events; the reconnected socket gets a fresh snapshot and events again."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
from django.test import Client
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from tests.e2e.conftest import database_url, start_daphne, stop_process
from tests.harness import deadline_s
from tests.webapp.runs.test_redis_restart import private_redis  # noqa: F401 - fixture
from webapp.runs import consumers, events

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

HEARTBEAT_S = 0.5


@pytest.fixture
def daphne(private_redis, settings) -> Iterator[str]:  # noqa: F811
    """daphne on the test database and the private Redis, heartbeats every 0.5 s; its base URL."""
    import os

    from django.db import connection

    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "webapp.config.settings",
        "DATABASE_URL": database_url(connection.settings_dict),
        "REDIS_URL": private_redis.url,
        "SECRET_KEY": settings.SECRET_KEY,
        "DEBUG": "1",
        "PADDOCK_VAR_DIR": str(settings.VAR_DIR),
        "PADDOCK_DATA_DIR": str(settings.PADDOCK_DATA_DIR),
        "PADDOCK_ARTIFACTS_DIR": str(settings.PADDOCK_ARTIFACTS_DIR),
        "PADDOCK_LIVE_HEARTBEAT_S": str(HEARTBEAT_S),
        "PYTHONUNBUFFERED": "1",
    }
    proc, base = start_daphne(env, name="daphne-broker-restart")
    try:
        yield base
    finally:
        stop_process(proc)


def _open(base: str, run_id: int, cookie: str):
    ws_url = base.replace("http://", "ws://") + f"/ws/runs/{run_id}/"
    return connect(ws_url, origin=base, additional_headers={"Cookie": cookie}, open_timeout=30, legacy=True)


def _next(ws, until: float) -> dict:
    return json.loads(ws.recv(timeout=max(0.1, until - time.monotonic())))


def test_an_open_socket_is_closed_on_a_redis_restart_and_the_reconnect_resyncs(
    daphne,
    private_redis,  # noqa: F811
    make_budget,
    make_run,
    user,
):
    run = make_run(make_budget(), num_pods=1)
    client = Client()
    client.force_login(user)
    cookie = f"sessionid={client.cookies['sessionid'].value}"

    ws = _open(daphne, run.id, cookie)
    until = time.monotonic() + deadline_s(30)
    assert _next(ws, until)["type"] == "run.snapshot"
    assert _next(ws, until)["type"] == "heartbeat"  # live and idle

    private_redis.crash()
    private_redis.start()  # the same port, empty: every group membership is gone
    seen: list[str] = []
    until = time.monotonic() + deadline_s(30)
    with pytest.raises(ConnectionClosed) as closed:
        while True:
            seen.append(_next(ws, until)["type"])  # TimeoutError here: the socket never closed
    assert closed.value.rcvd is not None and closed.value.rcvd.code == consumers.CLOSE_TRY_AGAIN, seen

    # what the page does on 4503: connect again with backoff until a snapshot resyncs it (the
    # server's pool may still hold connections of the old Redis: those attempts get 4503 too)
    until = time.monotonic() + deadline_s(30)
    attempts: list[int] = []
    while True:
        ws = _open(daphne, run.id, cookie)
        try:
            first = _next(ws, until)
            break
        except ConnectionClosed as exc:
            attempts.append(exc.rcvd.code if exc.rcvd else -1)
            assert set(attempts) == {consumers.CLOSE_TRY_AGAIN} and time.monotonic() < until, attempts
            time.sleep(0.5)
    assert first["type"] == "run.snapshot" and first["run"]["id"] == run.id
    seq = events.publish(run.id, events.RUN_UPDATE, {"run": {"id": run.id, "status": "running"}})
    got = []
    while not any(m.get("seq") == seq and m["type"] == events.RUN_UPDATE for m in got):
        got.append(_next(ws, until))
    ws.close()
