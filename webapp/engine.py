"""The one place where the web side calls ``trainer`` and converts types.

Celery tasks and services import this module, never ``trainer`` directly.
"""

from __future__ import annotations

from trainer.device import set_cpu_threads


def configure_process(*, threads: int) -> None:
    """Per-worker-process setup: torch thread count (1 per process on a 2-core machine)."""
    set_cpu_threads(threads)
