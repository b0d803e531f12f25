"""The staff workers page's reads: each Celery worker with its queues and device, what it
trains now and when it last reported; recent failed generations with their one-line reason;
and the worker log lines of one run and pod.

Workers are listed from their Redis heartbeats (``webapp.core.health.check_workers``) joined
with the ``Generation`` rows they claimed (``worker`` is the Celery node name); a worker that
claimed work in the last day but sent no heartbeat in the last 10 s is listed as not answering.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import Max, Q
from django.utils import timezone

from webapp.core import health
from webapp.runs.models import Generation

#: How far back a worker that stopped answering is still listed.
RECENT = dt.timedelta(days=1)


def worker_rows() -> tuple[list[dict[str, Any]], str | None]:
    """``(workers, error)``: one row per worker (``name``, ``queues``, ``device``, ``gpu``,
    ``answering``, ``current``: its running Generations, ``last_heartbeat``), and the ping's
    error when no worker answered."""
    ping = health.check_workers()
    answering = {w["name"]: w for w in ping.get("workers", [])}
    since = timezone.now() - RECENT
    seen = dict(
        Generation.objects.filter(~Q(worker=""), heartbeat_at__gte=since)
        .values("worker")
        .annotate(last=Max("heartbeat_at"))
        .values_list("worker", "last")
    )
    running: dict[str, list[Generation]] = {}
    for gen in Generation.objects.filter(status=Generation.Status.RUNNING).select_related("run", "pod"):
        running.setdefault(gen.worker, []).append(gen)
    rows = []
    for name in sorted(set(answering) | set(seen)):
        info = answering.get(name, {})
        rows.append(
            {
                "name": name,
                "queues": info.get("queues", []),
                "device": info.get("device", "–"),
                "gpu": info.get("gpu"),
                "answering": name in answering,
                "current": running.get(name, []),
                "last_heartbeat": seen.get(name),
            }
        )
    return rows, None if ping.get("ok") or answering else ping.get("error")


def failed_generations(limit: int = 50) -> list[Generation]:
    """The latest generations that failed, or whose attempt failed and was retried (newest first)."""
    return list(
        Generation.objects.filter(Q(status=Generation.Status.FAILED) | (~Q(error="") & ~Q(error="cancelled")))
        .exclude(status=Generation.Status.CANCELLED)
        .select_related("run", "pod")
        .order_by("-finished_at", "-id")[:limit]
    )


def log_lines(*, run_id: int, pod_index: int | None = None, limit: int = 400) -> list[tuple[str, str]]:
    """The last ``limit`` lines of the stack's process logs (``$PADDOCK_VAR_DIR/log/*.log``,
    written by ``./paddock``) that name this run (and pod), as ``(file name, line)``."""
    log_dir = Path(settings.VAR_DIR) / "log"
    needle = f"run={run_id} " + (f"pod={pod_index} " if pod_index is not None else "")
    out: list[tuple[str, str]] = []
    for path in sorted(log_dir.glob("*.log")) if log_dir.is_dir() else []:
        with open(path, encoding="utf-8", errors="replace") as fh:
            out.extend((path.name, line.rstrip("\n")) for line in fh if needle in line)
    return out[-limit:]
