"""The run page's WebSocket on the real Redis channel layer: session auth, snapshot, deltas in
sequence order, resync after a gap, refusal of other users' runs."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from tests.webapp.conftest import submit_agent

pytestmark = [pytest.mark.django_db(transaction=True)]

TIMEOUT = 10


@pytest.fixture(autouse=True)
def _quiet_heartbeats(settings):
    """Tests of the event order read exact messages: no heartbeat in between unless asked."""
    settings.PADDOCK_LIVE_HEARTBEAT_S = 3600


@pytest.fixture(autouse=True)
def _fresh_channel_layer():
    """Each test's event loop gets a channel layer of its own. channels_redis keeps one receive
    lock for all of a process's channels (keyed by the layer's client prefix) and binds it to the
    event loop that first waits on it; a layer kept from an earlier test's loop raised
    "bound to a different event loop" when two receives met in the next test's."""
    from channels.layers import channel_layers

    channel_layers.backends = {}
    yield
    channel_layers.backends = {}


def _session_cookie(user) -> bytes:
    client = Client()
    client.force_login(user)
    return f"sessionid={client.cookies['sessionid'].value}".encode()


async def _connect(run_id: int, cookie: bytes | None) -> WebsocketCommunicator:
    from webapp.config.asgi import application

    headers = [(b"origin", b"http://127.0.0.1")]
    if cookie:
        headers.append((b"cookie", cookie))
    communicator = WebsocketCommunicator(application, f"/ws/runs/{run_id}/", headers=headers)
    connected, _ = await communicator.connect(timeout=TIMEOUT)
    assert connected
    return communicator


async def _receive_until(communicator, kind: str) -> list[dict]:
    """Messages up to and including the first of type ``kind``."""
    seen = []
    while True:
        message = await communicator.receive_json_from(timeout=TIMEOUT)
        seen.append(message)
        if message["type"] == kind:
            return seen


async def test_the_owner_gets_a_snapshot_of_run_pods_and_leaderboard_first(world, user):
    communicator = await _connect(world.run.id, await sync_to_async(_session_cookie)(user))
    snapshot = await communicator.receive_json_from(timeout=TIMEOUT)
    assert snapshot["type"] == "run.snapshot"
    assert snapshot["run_id"] == world.run.id
    assert snapshot["seq"] == world.run.event_seq
    assert snapshot["run"]["status"] == "running"
    assert [a["score"] for a in snapshot["leaderboard"]] == [1.5, 1.0, 0.5]
    assert [p["index"] for p in snapshot["pods"]] == [0, 1]
    await communicator.disconnect()


async def test_deltas_arrive_in_sequence_order_after_the_snapshot(world, user, trained_checkpoint):
    communicator = await _connect(world.run.id, await sync_to_async(_session_cookie)(user))
    snapshot = await communicator.receive_json_from(timeout=TIMEOUT)
    await sync_to_async(submit_agent)(world.run, trained_checkpoint, 9.0)
    messages = await _receive_until(communicator, "leaderboard.update")
    messages += await _receive_until(communicator, "run.update")
    seqs = [m["seq"] for m in messages]
    assert seqs == sorted(seqs) and seqs[0] > snapshot["seq"]
    assert len(set(seqs)) == len(seqs)
    board = next(m for m in messages if m["type"] == "leaderboard.update")
    assert board["leaderboard"][0]["score"] == 9.0
    assert board["added"] == [board["leaderboard"][0]["id"]]
    assert any(m["type"] == "pod.update" and m["pod"]["state"] == "training" for m in messages)
    assert messages[-1]["run"]["best_score"] == 9.0
    await communicator.disconnect()


async def test_after_a_gap_the_client_gets_a_fresh_snapshot_on_request(world, user, trained_checkpoint):
    from webapp.runs import events, services

    communicator = await _connect(world.run.id, await sync_to_async(_session_cookie)(user))
    snapshot = await communicator.receive_json_from(timeout=TIMEOUT)
    # An event lost on the way (e.g. Redis restarted): its number is taken, nothing is sent.
    lost = await sync_to_async(events.next_seq)(world.run.id)
    await sync_to_async(services.run_scale)(run=world.run, num_pods=3)
    update = (await _receive_until(communicator, "run.update"))[-1]
    assert update["seq"] > lost > snapshot["seq"]
    await communicator.send_json_to({"type": "snapshot.request"})
    fresh = (await _receive_until(communicator, "run.snapshot"))[-1]
    assert fresh["seq"] >= update["seq"]
    assert fresh["run"]["num_pods"] == 3
    await communicator.disconnect()


async def test_an_unknown_client_message_gets_an_error_reply(world, user):
    communicator = await _connect(world.run.id, await sync_to_async(_session_cookie)(user))
    await communicator.receive_json_from(timeout=TIMEOUT)
    await communicator.send_json_to({"type": "launch.missiles"})
    reply = await communicator.receive_json_from(timeout=TIMEOUT)
    assert reply["type"] == "error" and "launch.missiles" in reply["error"]
    await communicator.disconnect()


async def test_another_users_run_is_refused_with_4404(world, other_user):
    communicator = await _connect(world.run.id, await sync_to_async(_session_cookie)(other_user))
    closed = await communicator.receive_output(timeout=TIMEOUT)
    assert closed == {"type": "websocket.close", "code": 4404}


async def test_a_missing_run_is_refused_with_4404(user):
    communicator = await _connect(999_999, await sync_to_async(_session_cookie)(user))
    closed = await communicator.receive_output(timeout=TIMEOUT)
    assert closed == {"type": "websocket.close", "code": 4404}


async def test_a_signed_out_visitor_is_refused_with_4401(world):
    communicator = await _connect(world.run.id, None)
    closed = await communicator.receive_output(timeout=TIMEOUT)
    assert closed == {"type": "websocket.close", "code": 4401}


def test_a_refused_connection_leaves_no_task_behind_when_its_event_loop_closes():
    """Connect, get refused, close the loop at once: every task of the consumer must end.

    ``asyncio.Runner`` cancels the leftover tasks once and waits for them, as daphne and the
    test runner do. On Python 3.11 a cancel landing while the channel layer's ``receive`` is
    still connecting to Redis was swallowed (gh-86296), the receive looped on Redis for ever
    and the loop never closed; it happened within the first few connections here.
    """
    import asyncio
    import threading

    async def refused() -> None:
        communicator = await _connect(999_999, None)
        closed = await communicator.receive_output(timeout=TIMEOUT)
        assert closed == {"type": "websocket.close", "code": 4401}

    for attempt in range(40):
        errors: list[BaseException] = []

        def one_loop(errors: list[BaseException]) -> None:
            try:
                with asyncio.Runner() as runner:
                    runner.run(refused())
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread
                errors.append(exc)

        thread = threading.Thread(target=one_loop, args=(errors,), daemon=True)
        thread.start()
        thread.join(timeout=TIMEOUT)
        assert not thread.is_alive(), f"connection {attempt}: the event loop did not close in {TIMEOUT} s"
        assert errors == [], errors


async def test_an_idle_connection_gets_heartbeats_carrying_the_latest_seq_so_a_lost_last_event_shows(
    world, user, settings
):
    from webapp.runs import events
    from webapp.runs.models import Run

    settings.PADDOCK_LIVE_HEARTBEAT_S = 0.5
    communicator = await _connect(world.run.id, await sync_to_async(_session_cookie)(user))
    snapshot = await communicator.receive_json_from(timeout=TIMEOUT)
    first = await communicator.receive_json_from(timeout=TIMEOUT)
    assert first == {"type": "heartbeat", "seq": snapshot["seq"], "run_id": world.run.id}

    # The run's final update is numbered and committed, but its group message is lost (as the
    # Redis layer drops messages to a channel over capacity): no event reaches the client.
    def finish_and_lose_the_event() -> int:
        Run.objects.filter(pk=world.run.id).update(status=Run.Status.FINISHED)
        return events.next_seq(world.run.id)

    lost = await sync_to_async(finish_and_lose_the_event)()
    heartbeat = await communicator.receive_json_from(timeout=TIMEOUT)
    assert heartbeat["type"] == "heartbeat" and heartbeat["seq"] == lost == snapshot["seq"] + 1
    # the client's resync (what run_live.js sends once the grace period passes) gets the final state
    await communicator.send_json_to({"type": "snapshot.request"})
    fresh = await _receive_until(communicator, "run.snapshot")
    assert fresh[-1]["seq"] == lost and fresh[-1]["run"]["status"] == "finished"
    await communicator.disconnect()
