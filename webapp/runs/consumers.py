"""The live run page's WebSocket: ``ws/runs/<id>/`` (protocol in ``docs/websocket.md``).

On connect the consumer checks the session user owns the run (close 4401 when signed out,
4404 for a run that is not theirs or does not exist), joins the run's group ``run-<id>``
BEFORE reading the snapshot (so no event can fall between the two), and sends the snapshot.
Events of the group are then forwarded as they are; their ``seq`` lets the client spot a gap,
on which it sends ``{"type": "snapshot.request"}`` and gets a fresh snapshot. A gap at the end
(the last event lost: channel layers drop group messages over capacity without a word) has no
later event to reveal it, so while the connection is idle the consumer sends a ``heartbeat``
with the run's latest ``seq`` every ``PADDOCK_LIVE_HEARTBEAT_S`` seconds; a client behind it
resyncs as for any gap.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import Any

import redis
from channels.db import database_sync_to_async
from channels.exceptions import StopConsumer
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from channels.layers import get_channel_layer
from django.conf import settings

from webapp.runs import events
from webapp.runs.selectors.payloads import run_snapshot
from webapp.runs.selectors.runs import run_get

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_NOT_FOUND = 4404
#: The channel layer (Redis) is unreachable: the page shows it is offline and connects again.
#: Not 1013 ("try again later" in RFC 6455's registry): daphne (autobahn) sends only 1000 or an
#: application code in 3000-4999 and raises on any other, so a 1013 never left the server.
CLOSE_TRY_AGAIN = 4503


class _LayerOutage:
    """Logs a channel-layer outage once, at WARNING, with its reason (not one ERROR traceback
    per WebSocket connect and close while Redis is down), and once more when it is over."""

    def __init__(self) -> None:
        self.down = False

    def failed(self, action: str, exc: BaseException) -> None:
        if not self.down:
            self.down = True
            logger.warning(
                "channel layer unreachable (%s: %s: %s); live updates pause until it is back",
                action,
                type(exc).__name__,
                exc,
            )

    def ok(self) -> None:
        if self.down:
            self.down = False
            logger.warning("channel layer reachable again; live updates resume")


_outage = _LayerOutage()

#: How long :func:`_end_tasks` waits for a cancelled task before cancelling it again.
_CANCEL_RETRY_S = 0.2


async def _end_tasks(tasks: list[asyncio.Future]) -> None:
    """Cancel every task in ``tasks`` and return once all have ended, cancelling again any that
    is still running after ``_CANCEL_RETRY_S`` (a cancel swallowed as in gh-86296).

    Their results and exceptions are dropped (the consumer is ending). A cancel of the caller
    while it waits is passed on once the tasks have ended.
    """
    cancelled = False
    pending = [task for task in tasks if not task.done()]
    while pending:
        for task in pending:
            task.cancel()
        try:
            await asyncio.wait(pending, timeout=_CANCEL_RETRY_S)
        except asyncio.CancelledError:
            cancelled = True
        pending = [task for task in pending if not task.done()]
    for task in tasks:
        if not task.cancelled():
            task.exception()  # retrieved, so asyncio does not log it as never retrieved
    if cancelled:
        raise asyncio.CancelledError


class RunConsumer(AsyncJsonWebsocketConsumer):
    """One connection of a run page: snapshot, then the run's events in order."""

    run_id: int | None = None
    group: str | None = None
    _heartbeat: asyncio.Task | None = None
    _last_sent: float = 0.0

    async def __call__(self, scope, receive, send) -> None:
        # The consumer also waits on its channel in Redis; when Redis goes away that wait
        # raises. Close the socket so the page reconnects, and log the outage once.
        try:
            await self._serve(scope, receive, send)
        except StopConsumer:
            pass
        except (redis.RedisError, OSError) as exc:
            # e.g. Redis restarted: this channel's group membership is gone with it, so no
            # event would reach the socket again. Stop the heartbeat (it would keep a dead
            # page looking alive) and close; the page reconnects, rejoins and resyncs.
            _outage.failed("receive", exc)
            if self._heartbeat is not None:
                self._heartbeat.cancel()
            try:
                await send({"type": "websocket.close", "code": CLOSE_TRY_AGAIN})
            except Exception as close_exc:  # the client is gone already
                logger.info("closing a WebSocket after a channel-layer error failed: %s", close_exc)

    async def _serve(self, scope, receive, send) -> None:
        """What ``AsyncConsumer.__call__`` does (channels 4.3), with one change: the two waits
        (the client's messages and the channel layer's) are ended by :func:`_end_tasks`.

        Channels cancels each wait once. On Python 3.11 one cancel can be lost: redis-py
        connects with ``asyncio.wait_for``, which returns normally when the cancel lands just as
        its inner future completes (CPython gh-86296, fixed in 3.12). The channel layer's
        ``receive`` then loops on a 5 s blocking pop for ever: a connection closed early
        (4401, 4404) left a task and a Redis connection behind, and a test's event loop could
        not shut down.
        """
        self.scope = scope
        self.channel_layer = get_channel_layer(self.channel_layer_alias)
        sources = [receive]
        if self.channel_layer is not None:
            self.channel_name = await self.channel_layer.new_channel()
            self.channel_receive = functools.partial(self.channel_layer.receive, self.channel_name)
            sources.append(self.channel_receive)
        self.base_send = send
        waits = [asyncio.ensure_future(source()) for source in sources]
        try:
            while True:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                for i, wait in enumerate(waits):
                    if wait.done():
                        await self.dispatch(wait.result())
                        waits[i] = asyncio.ensure_future(sources[i]())
        finally:
            await _end_tasks(waits)

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
        group = events.group_name(run_id)
        try:
            await self.channel_layer.group_add(group, self.channel_name)
        except Exception as exc:  # Redis down: no live events; the client tries again later
            _outage.failed("join", exc)
            await self.close(code=CLOSE_TRY_AGAIN)
            return
        _outage.ok()
        self.group = group
        await self._send_snapshot()
        self._heartbeat = asyncio.create_task(self._heartbeat_loop())

    async def disconnect(self, code: int) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
        if self.group:
            try:
                await self.channel_layer.group_discard(self.group, self.channel_name)
            except Exception as exc:  # Redis down: the membership expires with the layer's expiry
                _outage.failed("leave", exc)

    async def send_json(self, content: Any, close: bool = False) -> None:
        self._last_sent = time.monotonic()
        await super().send_json(content, close=close)

    async def _heartbeat_loop(self) -> None:
        """Every ``PADDOCK_LIVE_HEARTBEAT_S`` of silence, send ``{"type": "heartbeat", "seq"}``
        with the run's latest event number (one indexed read of ``Run.event_seq``)."""
        interval = float(getattr(settings, "PADDOCK_LIVE_HEARTBEAT_S", 3.0))
        while True:
            await asyncio.sleep(max(0.05, interval - (time.monotonic() - self._last_sent)))
            if time.monotonic() - self._last_sent < interval:
                continue
            seq = await self._latest_seq(self.run_id)
            if seq is None:
                return
            try:
                await self.send_json({"type": events.HEARTBEAT, "seq": seq, "run_id": self.run_id})
            except Exception:  # the socket is closing; disconnect() cancels this task
                return

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs) -> None:
        """A client frame: JSON text goes to :meth:`receive_json`; a binary frame, text that is not
        JSON, or JSON nested too deeply to parse gets an ``error`` reply and the socket stays
        open (Channels' own decoding raised, which closed the socket with 1011)."""
        if text_data is None:
            await self._refuse("expected a JSON text frame, got a binary frame")
            return
        try:
            content = await self.decode_json(text_data)
        except RecursionError:  # {"type": [[[...]]]} thousands deep: json.loads gives up
            await self._refuse("the message is nested too deeply to be read")
            return
        except ValueError as exc:  # json.JSONDecodeError, and a lone surrogate
            await self._refuse(f"the message is not JSON ({str(exc)[:80]})")
            return
        await self.receive_json(content, **kwargs)

    async def _refuse(self, why: str) -> None:
        await self.send_json({"type": events.ERROR, "error": why})

    async def receive_json(self, content: Any, **kwargs) -> None:
        kind = content.get("type") if isinstance(content, dict) else None
        if kind == events.SNAPSHOT_REQUEST and self.run_id is not None:
            await self._send_snapshot()
        else:
            await self._refuse(f"unknown message type {kind!r}"[:200])

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
    def _latest_seq(self, run_id: int) -> int | None:
        from webapp.runs.models import Run

        return Run.objects.filter(pk=run_id).values_list("event_seq", flat=True).first()

    @database_sync_to_async
    def _owns(self, user, run_id: int) -> bool:
        return run_get(user=user, run_id=run_id) is not None

    @database_sync_to_async
    def _snapshot(self, run_id: int) -> dict[str, Any] | None:
        from webapp.runs.models import Run

        run = Run.objects.filter(pk=run_id).first()
        return None if run is None else run_snapshot(run)
