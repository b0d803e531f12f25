"""The live run page's WebSocket: ``ws/runs/<id>/`` (protocol in ``docs/websocket.md``).

On connect the consumer checks the session user owns the run (close 4401 when signed out,
4404 for a run that is not theirs or does not exist), joins the run's group ``run-<id>``
BEFORE reading the snapshot (so no event can fall between the two), and sends the snapshot.
Events of the group are then forwarded as they are; their ``seq`` lets the client spot a gap,
on which it sends ``{"type": "snapshot.request"}`` and gets a fresh snapshot.
"""

from __future__ import annotations

import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from webapp.runs import events, selectors

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404


class RunConsumer(AsyncJsonWebsocketConsumer):
    """One connection of a run page: snapshot, then the run's events in order."""

    run_id: int | None = None
    group: str | None = None

    async def connect(self) -> None:
        user = self.scope.get("user")
        run_id = int(self.scope["url_route"]["kwargs"]["run_id"])
        # Accept first so that the close code reaches the client (a close before accept is
        # an HTTP 403 without a code).
        await self.accept()
        if user is None or not user.is_authenticated:
            await self.close(code=CLOSE_UNAUTHENTICATED)
            return
        if not await self._owns(user, run_id):
            await self.close(code=CLOSE_NOT_FOUND)
            return
        self.run_id = run_id
        self.group = events.group_name(run_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self._send_snapshot()

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs) -> None:
        kind = content.get("type") if isinstance(content, dict) else None
        if kind == events.SNAPSHOT_REQUEST and self.run_id is not None:
            await self._send_snapshot()
        else:
            await self.send_json({"type": events.ERROR, "error": f"unknown message type {kind!r}"})

    async def run_event(self, message: dict[str, Any]) -> None:
        """A group message ``{"type": "run.event", "event": {...}}``: forward the event."""
        await self.send_json(message["event"])

    async def _send_snapshot(self) -> None:
        snapshot = await self._snapshot(self.run_id)
        if snapshot is None:  # the run was deleted meanwhile
            await self.close(code=CLOSE_NOT_FOUND)
            return
        await self.send_json(snapshot)

    @database_sync_to_async
    def _owns(self, user, run_id: int) -> bool:
        return selectors.run_get(user=user, run_id=run_id) is not None

    @database_sync_to_async
    def _snapshot(self, run_id: int) -> dict[str, Any] | None:
        from webapp.runs.models import Run

        run = Run.objects.filter(pk=run_id).first()
        return None if run is None else selectors.run_snapshot(run)
