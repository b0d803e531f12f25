"""Live events of a run, sent to its Channels group ``run-<id>``.

Every event is a dict ``{"type": <name>, "seq": <int>, "run_id": <int>, ...}`` delivered to the
group as the channel message ``{"type": "run.event", "event": <event>}`` (a consumer handles it
in ``run_event``). ``seq`` is a per-run number that grows by one with each event: it is
``Run.event_seq``, incremented in the database (``UPDATE ... SET event_seq = event_seq + 1``)
and read back inside the same transaction as the change it describes, and the event is sent
only after that transaction commits (nothing is announced that could still roll back). Events
sent by different processes may arrive slightly out of order; a client keeps the highest
``seq`` it has applied per kind of object and ignores older ones.

A service that holds row locks passes its payload as a function (:data:`Payload`): it is called
once the transaction has committed, so the reads behind a payload (a run's usage, its
leaderboard, ...) never run while the budget and run rows are locked, and they see what was
committed.

Message types (payload shapes are those of :mod:`webapp.runs.selectors.payloads`):

``run.snapshot``
    Sent first by the consumer (``payloads.run_snapshot``): ``run``, ``pods``,
    ``leaderboard``; ``seq`` is the run's current sequence number: later events have a higher
    one.
``run.update``
    Status, pod count, best score or usage changed: ``run`` (``payloads.run_payload``).
``pod.update``
    A pod's state or generation changed (queued, training, done, retired): ``pod``
    (``payloads.pod_payload``).
``leaderboard.update``
    The top-K changed: ``leaderboard``, the full list best first (``payloads.agent_payload``
    items), and ``added`` / ``dropped`` agent ids.
``metrics``
    One training-curve point of a running generation (``services.telemetry.point_record``), at most
    50 per generation: ``pod`` (index), ``curve`` (whose: ``generation_id``, ``number``,
    ``agent_id`` None, ``parent_id``, ``lineage``, ``depth``, ``status``) and ``point``
    (``total_env_steps``, ``env_steps``, ``elapsed_s`` and every metric of
    ``selectors.curves.METRICS``, None where the algorithm has none).
``progress``
    Training progress of a running generation, at most ``PROGRESS_PER_S`` per pod:
    ``pod`` (index), ``generation`` (number), ``env_steps``, ``env_steps_total``,
    ``steps_per_s``, ``episode_return_mean`` (``None`` until an episode ends).

Between a client and its consumer (``webapp.runs.consumers``), never sent to the group:

``snapshot.request``
    Client to server: send me a fresh ``run.snapshot`` (the client saw a gap in ``seq``).
``error``
    Server to client: a message the server did not understand, ``error`` says why.
``heartbeat``
    Server to client, after ``PADDOCK_LIVE_HEARTBEAT_S`` seconds without any message:
    ``seq``, the run's latest event number. A client whose highest ``seq`` is lower lost the
    tail of the stream (nothing later would reveal the gap) and resyncs with
    ``snapshot.request`` after the usual grace period.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable
from typing import Any

from channels import DEFAULT_CHANNEL_LAYER
from channels.layers import channel_layers, get_channel_layer
from django.db import transaction
from django.db.models import F

from webapp.runs.models import Run

logger = logging.getLogger(__name__)

RUN_SNAPSHOT = "run.snapshot"
RUN_UPDATE = "run.update"
POD_UPDATE = "pod.update"
LEADERBOARD_UPDATE = "leaderboard.update"
PROGRESS = "progress"
METRICS = "metrics"

TYPES = (RUN_SNAPSHOT, RUN_UPDATE, POD_UPDATE, LEADERBOARD_UPDATE, PROGRESS, METRICS)

SNAPSHOT_REQUEST = "snapshot.request"
ERROR = "error"
HEARTBEAT = "heartbeat"
CHANNEL_MESSAGE_TYPE = "run.event"
PROGRESS_PER_S = 4.0

#: An event's fields, or a function that returns them once the transaction commits.
Payload = dict[str, Any] | Callable[[], dict[str, Any]]


def group_name(run_id: int) -> str:
    """The Channels group of a run's live events."""
    return f"run-{run_id}"


def next_seq(run_id: int) -> int:
    """Take the run's next event number (atomic increment, read back in the same transaction)."""
    with transaction.atomic():
        Run.objects.filter(pk=run_id).update(event_seq=F("event_seq") + 1)
        return Run.objects.filter(pk=run_id).values_list("event_seq", flat=True).get()


def publish(run_id: int, event_type: str, payload: Payload) -> int:
    """Number an event now and send it to ``run-<id>`` once the current transaction commits.

    Args:
        run_id: the run.
        event_type: one of :data:`TYPES`.
        payload: JSON-able fields of the event (see the module docstring), or a function
            returning them, called after the commit (outside every row lock). A function that
            raises drops its event (logged): what the event describes is committed, and the
            run's next event or a snapshot carries it.

    Returns:
        The event's ``seq``.
    """
    if event_type not in TYPES:
        raise ValueError(f"unknown event type {event_type!r}")
    seq = next_seq(run_id)
    if callable(payload):
        transaction.on_commit(lambda: _build_and_send(run_id, event_type, seq, payload))
    else:
        event = {"type": event_type, "seq": seq, "run_id": run_id, **payload}
        transaction.on_commit(lambda: send_now(run_id, event))
    return seq


def _build_and_send(run_id: int, event_type: str, seq: int, build: Callable[[], dict[str, Any]]) -> None:
    try:
        fields = build()
    except Exception:  # never fail the write that committed: the next event catches up
        logger.exception("could not build %s event seq %s", event_type, seq, extra={"run": run_id})
        return
    send_now(run_id, {"type": event_type, "seq": seq, "run_id": run_id, **fields})


def send_now(run_id: int, event: dict[str, Any]) -> None:
    """Hand one event to this process's sender thread (returns at once, never raises)."""
    _sender.send(run_id, event)


class _Sender:
    """One background thread per process that sends events in FIFO order over a persistent
    channel-layer connection, so a worker never waits on Redis for an event (the next
    generation's task message goes out without delay) and a broken channel layer is logged,
    never raised: training must not fail because nobody can watch it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid: int | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue | None = None
        self._shared = None
        self._own = None

    def _start(self) -> None:
        loop = asyncio.new_event_loop()
        queue: asyncio.Queue = asyncio.Queue()

        def serve() -> None:
            asyncio.set_event_loop(loop)
            loop.run_until_complete(self._drain(queue))

        threading.Thread(target=serve, name="paddock-events", daemon=True).start()
        self._pid, self._loop, self._queue = os.getpid(), loop, queue

    async def _drain(self, queue: asyncio.Queue) -> None:
        while True:
            run_id, event = await queue.get()
            message = {"type": CHANNEL_MESSAGE_TYPE, "event": event}
            layer = self._layer()
            if layer is None:
                continue
            try:
                await layer.group_send(group_name(run_id), message)
            except Exception as first:
                # After a Redis restart the pooled connection is dead and the first send on it
                # fails: drop the pools and send once more on a new connection.
                try:
                    await _close_pools(layer)
                    await layer.group_send(group_name(run_id), message)
                except Exception as exc:  # Redis down: the next event or snapshot catches up
                    logger.warning(
                        "could not send %s event seq %s (%s; retried after %s)",
                        event.get("type"),
                        event.get("seq"),
                        _reason(exc),
                        _reason(first),
                        extra={"run": run_id},
                    )

    def _layer(self):
        """The sender's own instance of the project's channel layer, so that dropping its
        connections after a failure never touches those of the process's consumers (other
        event loops). A new one is made when the project's layer is replaced (settings)."""
        shared = get_channel_layer()
        if shared is None:
            return None
        if self._shared is not shared:
            self._shared, self._own = shared, channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
        return self._own

    def send(self, run_id: int, event: dict[str, Any]) -> None:
        with self._lock:
            if self._pid != os.getpid():  # first use, or a forked worker child
                self._start()
        self._loop.call_soon_threadsafe(self._queue.put_nowait, (run_id, event))


async def _close_pools(layer) -> None:
    close = getattr(layer, "close_pools", None)
    if close is not None:
        try:
            await close()
        except Exception:  # closing dead connections may fail; they are dropped either way
            pass


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


_sender = _Sender()
