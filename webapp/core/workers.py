"""What each Celery worker reports about itself: its queues and the device it trains on.

Workers are started one per device (``./paddock`` or docker-compose): a GPU worker with
``CUDA_VISIBLE_DEVICES=N`` and ``PADDOCK_WORKER_DEVICE=cuda:N``, the CPU-queue worker with
``PADDOCK_WORKER_DEVICE=cpu``. The remote-control command below is registered in every worker
when ``webapp.config.celery`` is imported, and ``/healthz`` broadcasts it.

This module must not import Django models: it is imported while the Celery app is built.
"""

from __future__ import annotations

import os

from celery.worker.control import inspect_command

WORKER_INFO_COMMAND = "paddock_worker_info"


def worker_device(environ: os._Environ | dict | None = None) -> str:
    """The device a worker's tasks run on, as reported in ``/healthz``.

    Args:
        environ: the worker's environment (default ``os.environ``).

    Returns:
        ``PADDOCK_WORKER_DEVICE`` when set; else ``cuda:<list>`` when ``CUDA_VISIBLE_DEVICES``
        pins GPUs, ``cpu`` when it hides them all (empty string), and ``auto`` when neither says
        (torch then picks CUDA if any GPU is visible).
    """
    env = os.environ if environ is None else environ
    device = (env.get("PADDOCK_WORKER_DEVICE") or "").strip()
    if device:
        return device
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return "auto"
    visible = visible.strip()
    if visible in ("", "-1"):
        return "cpu"
    return f"cuda:{visible}"


@inspect_command(name=WORKER_INFO_COMMAND)
def paddock_worker_info(state, **_kwargs) -> dict:
    """Remote-control reply: ``{"device": ..., "queues": [...], "pid": ...}`` of this worker."""
    consumer = state.consumer
    queues = sorted(q.name for q in consumer.task_consumer.queues) if consumer.task_consumer else []
    return {"device": worker_device(), "queues": queues, "pid": os.getpid()}
