"""The run page's WebSocket answers a frame it cannot read with an ``error`` message and stays
open, as docs/websocket.md says (text that is not JSON, a binary frame and JSON nested too deeply
to parse closed the socket with 1011), and a WebSocket path that names no route is refused at
the handshake (it was an HTTP 500 with "No route found for path" and a traceback)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator

from tests.webapp.test_consumers import TIMEOUT, _connect, _session_cookie

pytestmark = [pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _quiet_heartbeats(settings):
    settings.PADDOCK_LIVE_HEARTBEAT_S = 3600


@pytest.fixture(autouse=True)
def _fresh_channel_layer():
    from channels.layers import channel_layers

    channel_layers.backends = {}
    yield
    channel_layers.backends = {}


DEEP = '{"type": ' + "[" * 2000 + "]" * 2000 + "}"


@pytest.mark.parametrize(
    ("frame", "said"),
    [
        ({"text_data": "garbage"}, "not JSON"),
        ({"text_data": '{"type": "snapshot.request"'}, "not JSON"),
        ({"bytes_data": b'{"type": "snapshot.request"}'}, "binary"),
        ({"text_data": DEEP}, "nested too deeply"),
    ],
)
async def test_an_unreadable_frame_gets_an_error_and_the_socket_stays_open(world, user, frame, said):
    communicator = await _connect(world.run.id, await sync_to_async(_session_cookie)(user))
    assert (await communicator.receive_json_from(timeout=TIMEOUT))["type"] == "run.snapshot"
    await communicator.send_to(**frame)
    error = await communicator.receive_json_from(timeout=TIMEOUT)
    assert error["type"] == "error" and said in error["error"], error
    await communicator.send_json_to({"type": "snapshot.request"})  # still open, still answering
    assert (await communicator.receive_json_from(timeout=TIMEOUT))["type"] == "run.snapshot"
    await communicator.disconnect()


@pytest.mark.parametrize("path", ["/ws/runs/abc/", "/ws/nothing/", "/ws/runs/1/extra/"])
async def test_a_path_that_names_no_route_is_refused_at_the_handshake(path):
    from webapp.config.asgi import application

    communicator = WebsocketCommunicator(application, path, headers=[(b"origin", b"http://127.0.0.1")])
    connected, _ = await communicator.connect(timeout=TIMEOUT)
    assert not connected
    await communicator.wait()
