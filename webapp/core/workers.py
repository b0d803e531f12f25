"""What each Celery worker reports about itself: its queues and the device it trains on.

Workers are started one per device (``./paddock`` or docker-compose): a GPU worker with
``CUDA_VISIBLE_DEVICES=N`` and ``PADDOCK_WORKER_DEVICE=cuda``, the CPU-queue worker with
``PADDOCK_WORKER_DEVICE=cpu``. A pinned worker sees its GPU as ``cuda:0``: it reports that
ordinal as its ``device`` and the physical GPU (``N``) separately as ``gpu``. The remote-control command below is registered in every worker
when ``webapp.config.celery`` is imported, and ``/healthz`` broadcasts it.

This module must not import Django models: it is imported while the Celery app is built.
"""

from __future__ import annotations

import logging
import os
import threading
import time

from celery import bootsteps
from celery.worker.consumer import Consumer as BaseConsumer
from celery.worker.control import inspect_command

logger = logging.getLogger(__name__)

WORKER_INFO_COMMAND = "paddock_worker_info"

#: Why this worker cannot train on its device (set at start by ``webapp.config.celery`` after
#: a CUDA worker's test kernel failed), else ``None``. Such a worker stops consuming the
#: ``gpu`` queue and reports the reason in its heartbeat (``error``), hence on ``/healthz``.
DEVICE_PROBLEM: str | None = None


def worker_device(environ: os._Environ | dict | None = None) -> str:
    """The device this worker's generations train on, as an ordinal among the GPUs it sees.

    Args:
        environ: the worker's environment (default ``os.environ``).

    Returns:
        ``PADDOCK_WORKER_DEVICE`` when set (``cuda`` written as ``cuda:0``); else ``cuda:0`` when
        ``CUDA_VISIBLE_DEVICES`` pins GPUs (the first one it lists is ``cuda:0`` inside the
        process), ``cpu`` when it hides them all (empty string or ``-1``), and ``auto`` when
        neither says (torch then picks CUDA if any GPU is visible).
    """
    env = os.environ if environ is None else environ
    device = (env.get("PADDOCK_WORKER_DEVICE") or "").strip()
    if device:
        return "cuda:0" if device == "cuda" else device
    visible = physical_gpus(env)
    if visible is None:
        return "auto"
    return "cuda:0" if visible else "cpu"


def physical_gpus(environ: os._Environ | dict | None = None) -> str | None:
    """The physical GPUs this worker is pinned to.

    ``PADDOCK_WORKER_GPU`` when set (docker-compose sets it: a container given one GPU by
    ``device_ids`` has no ``CUDA_VISIBLE_DEVICES`` to read), else ``CUDA_VISIBLE_DEVICES``.

    Returns:
        e.g. ``"3"`` or ``"2,3"`` (indices or ``GPU-<uuid>``), ``""`` when every GPU is hidden,
        ``None`` when neither variable is set (all GPUs of the machine are visible).
    """
    env = os.environ if environ is None else environ
    visible = env.get("PADDOCK_WORKER_GPU") or env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return None
    visible = visible.strip()
    return "" if visible in ("", "-1") else visible


def device_label(device: str, gpus: str | None) -> str:
    """What a generation records as its device: the ordinal and, when pinned, the physical GPU.

    ``device_label("cuda:0", "3") == "cuda:0 (GPU 3)"``; ``device_label("cpu", "") == "cpu"``.
    """
    if device.startswith("cuda") and gpus:
        return f"{device} (GPU {gpus})"
    return device


@inspect_command(name=WORKER_INFO_COMMAND)
def paddock_worker_info(state, **_kwargs) -> dict:
    """Remote-control reply: ``{"device", "gpu", "queues", "pid"}`` of this worker.

    ``device`` is the ordinal its generations use (``cuda:0`` in a pinned worker), ``gpu`` the
    physical GPU(s) from ``CUDA_VISIBLE_DEVICES`` (``None`` when unset, ``""`` when hidden).
    """
    consumer = state.consumer
    queues = sorted(q.name for q in consumer.task_consumer.queues) if consumer.task_consumer else []
    return {
        "device": worker_device(),
        "gpu": physical_gpus(),
        "queues": queues,
        "pid": os.getpid(),
        "error": DEVICE_PROBLEM,
    }


# --- heartbeats and broker reconnects ------------------------------------------------------------

#: Redis key prefix of the workers' heartbeats: ``paddock:worker:<node name>`` holds the JSON
#: ``{"name", "queues", "device", "gpu", "pid", "at", "error"}`` and expires ``HEARTBEAT_TTL_S`` after the
#: last beat, so ``/healthz`` reads which workers are alive without asking them.
HEARTBEAT_KEY = "paddock:worker:"
HEARTBEAT_EVERY_S = 2.0
HEARTBEAT_TTL_S = 10
#: How often a worker tries to reach a broker that went away (Celery's default grows to 30 s).
RECONNECT_EVERY_S = 1.0


def _redis_client(url: str):
    import redis

    return redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=1)


def read_heartbeats(url: str) -> list[dict]:
    """Heartbeats of the live workers on the broker at ``url``, sorted by name.

    Raises:
        redis.RedisError: Redis does not answer.
    """
    import json

    client = _redis_client(url)
    try:
        keys = sorted(client.scan_iter(match=HEARTBEAT_KEY + "*", count=500))
        values = client.mget(keys) if keys else []
    finally:
        client.close()
    beats = []
    for raw in values:
        try:
            beats.append(json.loads(raw))
        except (TypeError, ValueError):
            continue  # expired between SCAN and MGET, or not ours
    return sorted(beats, key=lambda b: b.get("name", ""))


def live_worker_names(url: str) -> set[str] | None:
    """The names of the live workers, when Redis can tell which workers are gone; else ``None``.

    A worker is gone when its heartbeat key expired (:data:`HEARTBEAT_TTL_S` after its last
    beat). Redis can only say so once it has been up for longer than that: right after a
    restart every key is missing, live workers' included, until they beat again.

    Returns:
        The node names whose heartbeat key exists, or ``None`` when Redis does not answer or
        started less than ``HEARTBEAT_TTL_S`` ago.
    """
    import redis

    client = _redis_client(url)
    try:
        if int(client.info("server").get("uptime_in_seconds", 0)) < HEARTBEAT_TTL_S:
            return None
    except redis.RedisError:
        return None
    finally:
        client.close()
    try:
        return {b.get("name", "") for b in read_heartbeats(url)}
    except redis.RedisError:
        return None


class Beacon(bootsteps.StartStopStep):
    """A consumer bootstep of every worker: a thread that writes the worker's heartbeat to
    Redis every :data:`HEARTBEAT_EVERY_S`, and, each time the consumer connects to the broker
    again after losing it, a sweep for lost generation messages (``reap_stale_generations``,
    run here at once instead of at the next beat tick)."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def __init__(self, parent, **kwargs) -> None:
        super().__init__(parent, **kwargs)
        self.starts = 0
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None

    def start(self, c) -> None:
        self.starts += 1
        if DEVICE_PROBLEM is not None and c.task_consumer is not None:
            if any(q.name == "gpu" for q in c.task_consumer.queues):
                logger.error("refusing the gpu queue: %s", DEVICE_PROBLEM)
                c.cancel_task_queue("gpu")
        if self.thread is None:
            self.thread = threading.Thread(target=self._beat, args=(c,), name="paddock-heartbeat", daemon=True)
            self.thread.start()
        if self.starts > 1:
            logger.warning("broker connection is back: sweeping for lost generation messages now")
            threading.Thread(target=_sweep_after_reconnect, name="paddock-reconnect-sweep", daemon=True).start()

    def shutdown(self, c) -> None:
        self.stopping.set()
        try:
            client = _redis_client(c.app.conf.broker_url)
            client.delete(HEARTBEAT_KEY + c.hostname)
            client.close()
        except Exception:  # Redis down: the key expires by itself
            pass

    def _beat(self, c) -> None:
        import json

        client = _redis_client(c.app.conf.broker_url)
        while not self.stopping.is_set():
            try:
                queues = sorted(q.name for q in c.task_consumer.queues) if c.task_consumer else []
                beat = {"name": c.hostname, "queues": queues, "device": worker_device(), "gpu": physical_gpus()}
                beat.update(pid=os.getpid(), at=time.time(), error=DEVICE_PROBLEM)
                client.set(HEARTBEAT_KEY + c.hostname, json.dumps(beat), ex=HEARTBEAT_TTL_S)
            except Exception as exc:  # Redis down: /healthz says so; beat again when it is back
                logger.debug("worker heartbeat not written: %s", exc)
            self.stopping.wait(HEARTBEAT_EVERY_S)


#: The runs app's periodic sweep (``webapp.runs.tasks.reap_stale_generations``).
REAP_TASK = "webapp.runs.tasks.reap_stale_generations"


def _sweep_after_reconnect() -> None:
    from celery import current_app
    from django.db import connection

    # By name from this worker's task registry: the runs app's tasks import the Celery app,
    # which imports this module, so this module does not import them.
    reap_stale_generations = current_app.tasks[REAP_TASK]
    try:
        logger.info("reconnect sweep: %s", reap_stale_generations())
    except Exception:
        logger.warning("reconnect sweep failed; the next beat tick sweeps", exc_info=True)
    finally:
        connection.close()


class Consumer(BaseConsumer):
    """Celery's consumer, reconnecting to a lost broker every :data:`RECONNECT_EVERY_S` (the
    default waits 2, 4, 6 ... up to 30 s between tries, so training resumed up to 8 s after a
    10 s Redis outage had ended)."""

    def ensure_connected(self, conn):
        ensure = conn.ensure_connection

        def ensure_often(*args, **kwargs):
            kwargs.setdefault("interval_start", RECONNECT_EVERY_S)
            kwargs.setdefault("interval_step", 0)
            kwargs.setdefault("interval_max", RECONNECT_EVERY_S)
            return ensure(*args, **kwargs)

        conn.ensure_connection = ensure_often
        return super().ensure_connected(conn)
