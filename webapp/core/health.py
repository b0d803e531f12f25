"""Health checks of the services Paddock needs."""

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
    def ping():
        from webapp.config.celery import app

        inspector = app.control.inspect(timeout=1.0)
        replies = inspector.ping() or {}
        queues = inspector.active_queues() or {}
        stats = inspector.stats() or {}
        workers = []
        for name in sorted(replies):
            workers.append(
                {
                    "name": name,
                    "queues": sorted(q["name"] for q in queues.get(name, [])),
                    "device": _device_of(stats.get(name, {})),
                }
            )
        if not workers:
            raise RuntimeError("no Celery worker answered a ping")
        return {"workers": workers}

    return _timed(ping)


def _device_of(stats: dict) -> str:
    # Workers are started with a hostname like gpu0@host or cpu@host; the launcher pins devices.
    return "unknown" if not stats else str(stats.get("pid", ""))


def check_all() -> dict:
    """Return ``{"ok": bool, "checks": {...}}``; database and Redis are required."""
    checks = {
        "database": check_database(),
        "redis": check_redis(),
    }
    checks["channel_layer"] = (
        check_channel_layer() if checks["redis"]["ok"] else {"ok": False, "error": "Redis is down"}
    )
    checks["workers"] = check_workers() if checks["redis"]["ok"] else {"ok": False, "error": "Redis is down"}
    required = ("database", "redis", "channel_layer", "workers")
    return {"ok": all(checks[k]["ok"] for k in required), "checks": checks}
