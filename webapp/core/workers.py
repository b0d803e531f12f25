"""What each Celery worker reports about itself: its queues and the device it trains on.

Workers are started one per device (``./paddock`` or docker-compose): a GPU worker with
``CUDA_VISIBLE_DEVICES=N`` and ``PADDOCK_WORKER_DEVICE=cuda``, the CPU-queue worker with
``PADDOCK_WORKER_DEVICE=cpu``. A pinned worker sees its GPU as ``cuda:0``: it reports that
ordinal as its ``device`` and the physical GPU (``N``) separately as ``gpu``. The remote-control command below is registered in every worker
when ``webapp.config.celery`` is imported, and ``/healthz`` broadcasts it.

This module must not import Django models: it is imported while the Celery app is built.
"""

from __future__ import annotations

import os

from celery.worker.control import inspect_command

WORKER_INFO_COMMAND = "paddock_worker_info"


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
    return {"device": worker_device(), "gpu": physical_gpus(), "queues": queues, "pid": os.getpid()}
