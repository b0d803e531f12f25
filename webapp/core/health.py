"""Health checks of the services Paddock needs (served as JSON at ``/healthz``)."""

from __future__ import annotations

import logging
import time

import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection

logger = logging.getLogger(__name__)


def _timed(fn):
    start = time.perf_counter()
    try:
        detail = fn()
        return {"ok": True, "ms": round((time.perf_counter() - start) * 1000, 1), **(detail or {})}
    except Exception as exc:  # a health check reports every failure instead of raising
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}


def check_database() -> dict:
    def ping():
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return {"vendor": connection.vendor}

    return _timed(ping)


def check_redis() -> dict:
    def ping():
        client = redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=1, socket_timeout=1)
        try:
            client.ping()
        finally:
            client.close()

    return _timed(ping)


def check_channel_layer() -> dict:
    def roundtrip():
        layer = get_channel_layer()

        async def go():
            name = await layer.new_channel()
            await layer.send(name, {"type": "health.ping"})
            await layer.receive(name)

        async_to_sync(go)()

    return _timed(roundtrip)


def check_workers() -> dict:
    """The live Celery workers, each with its queues and device, read from the heartbeats
    they write to Redis every 2 s (``webapp.core.workers.Beacon``): one Redis round trip, no
    waiting for replies.

    Fails when no worker beat in the last 10 s, or when nobody consumes the ``gpu`` (training)
    or ``cpu`` (backtests, housekeeping) queue; a worker whose device failed its start-up check
    (a CUDA worker whose test kernel failed) has refused the ``gpu`` queue and says why in its
    ``error``, which the failure message repeats.
    """

    def read():
        from webapp.config.celery import app
        from webapp.core.workers import read_heartbeats

        workers = [
            {
                "name": b.get("name", "?"),
                "queues": b.get("queues", []),
                "device": b.get("device", "unknown"),
                "gpu": b.get("gpu"),
                "error": b.get("error"),
            }
            for b in read_heartbeats(app.conf.broker_url)
        ]
        if not workers:
            raise RuntimeError("no Celery worker has sent a heartbeat in the last 10 s")
        return {"workers": workers}

    result = _timed(read)
    if result["ok"]:
        served = {q for w in result["workers"] for q in w["queues"]}
        missing = [q for q in ("gpu", "cpu") if q not in served]
        if missing:
            refused = "; ".join(f"{w['name']} refused it: {w['error']}" for w in result["workers"] if w.get("error"))
            error = f"no worker consumes queue {' or '.join(missing)}" + (f" ({refused})" if refused else "")
            result.update(ok=False, error=error)
    return result


#: What ``check_all`` checks; by default all of them are required.
PARTS = ("database", "redis", "channel_layer", "workers")


def check_all(required: tuple[str, ...] = PARTS) -> dict:
    """Check every service; by default all of them are required for the app to do its work.

    Args:
        required: the checks whose failure makes the report not ``ok`` (a subset of
            :data:`PARTS`; e.g. ``("database",)`` for a web server's readiness probe, so that a
            Redis outage or GPU workers scaled to zero do not take the pages out of service).

    Returns:
        ``{"ok": bool, "down": [names of failed checks], "checks": {name: {"ok": ..., ...}}}``
        with names ``database``, ``redis``, ``channel_layer`` and ``workers``; the workers
        check lists each worker's ``name``, ``queues``, ``device`` (the ordinal it trains on,
        ``cuda:0`` in a pinned worker) and ``gpu`` (the physical GPU it is pinned to, or None).
    """
    checks = {
        "database": check_database(),
        "redis": check_redis(),
    }
    checks["channel_layer"] = (
        check_channel_layer() if checks["redis"]["ok"] else {"ok": False, "error": "Redis is down"}
    )
    checks["workers"] = check_workers() if checks["redis"]["ok"] else {"ok": False, "error": "Redis is down"}
    down = [name for name in required if not checks[name]["ok"]]
    if down:
        reasons = "; ".join(f"{name}: {checks[name].get('error', 'down')}" for name in down)
        logger.warning("healthz: 503, down: %s", reasons)
    return {"ok": not down, "down": down, "checks": checks}
