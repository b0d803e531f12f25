"""WebSocket URL routes (Channels): the apps' routes, then a refusal of any other path."""

from __future__ import annotations

from django.urls import re_path


async def refuse_unknown_path(scope, receive, send) -> None:
    """A WebSocket path no route matches (``/ws/runs/abc/``): the handshake is refused (a close
    before accept, which the server answers with HTTP 403), and nothing is logged as an error.
    Channels' router raised "No route found for path" instead: an HTTP 500 with a traceback."""
    message = await receive()
    if message["type"] == "websocket.connect":
        await send({"type": "websocket.close"})


websocket_urlpatterns: list = []

try:  # the runs app adds its consumer routes
    from webapp.runs.routing import websocket_urlpatterns as _runs_ws

    websocket_urlpatterns += _runs_ws
except ImportError:  # pragma: no cover - before the runs app has consumers
    pass

websocket_urlpatterns.append(re_path(r"", refuse_unknown_path))  # last: every other path
