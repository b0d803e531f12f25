"""Health checks of the services Paddock needs (served as JSON at ``/healthz``)."""

from __future__ import annotations

import time

import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import connection


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
    """Celery workers answering within a second, each with its queues and device.

    Fails when no worker answers, or when nobody consumes the ``gpu`` (training) or ``cpu``
    (backtests, housekeeping) queue.
    """

    def ping():
        from webapp.config.celery import app
        from webapp.core.workers import WORKER_INFO_COMMAND

        replies = app.control.broadcast(WORKER_INFO_COMMAND, reply=True, timeout=1.0) or []
        workers = []
        for reply in replies:
            for name, info in reply.items():
                if not isinstance(info, dict) or "error" in info:
                    # A worker of another app version: it answered, but cannot say more.
                    info = {"queues": [], "device": "unknown"}
                workers.append(
                    {
                        "name": name,
                        "queues": info.get("queues", []),
                        "device": info.get("device", "unknown"),
                        "gpu": info.get("gpu"),
                    }
                )
        workers.sort(key=lambda w: w["name"])
        if not workers:
            raise RuntimeError("no Celery worker answered a ping")
        return {"workers": workers}

    result = _timed(ping)
    if result["ok"]:
        served = {q for w in result["workers"] for q in w["queues"]}
        missing = [q for q in ("gpu", "cpu") if q not in served]
        if missing:
            result.update(ok=False, error=f"no worker consumes queue {' or '.join(missing)}")
    return result


def check_all() -> dict:
    """Check every service; all of them are required for the app to do its work.

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
    required = ("database", "redis", "channel_layer", "workers")
    down = [name for name in required if not checks[name]["ok"]]
    return {"ok": not down, "down": down, "checks": checks}
