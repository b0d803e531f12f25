"""Celery entry points of serving: the periodic flush of act-call counters to the database."""

from __future__ import annotations

from webapp.config.celery import app
from webapp.serving import counters


@app.task(name="webapp.serving.tasks.flush_serve_counters", ignore_result=True)
def flush_serve_counters() -> dict[str, int]:
    """Periodic (``flush-serve-counters`` in the beat schedule): move pending call counts from Redis into
    ``AgentServeStats`` and ``ServeToken`` rows."""
    return {"rows": counters.flush()}
