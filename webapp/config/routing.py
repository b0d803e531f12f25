"""WebSocket URL routes (Channels)."""

from __future__ import annotations

websocket_urlpatterns: list = []

try:  # the runs app adds its consumer routes
    from webapp.runs.routing import websocket_urlpatterns as _runs_ws

    websocket_urlpatterns += _runs_ws
except ImportError:  # pragma: no cover - before the runs app has consumers
    pass
