"""Device selection and per-process CPU thread settings."""

from __future__ import annotations

import os
import subprocess
import sys

import torch

from trainer.errors import ConfigError

#: What a run (or a task) may ask for. The ordinal of a GPU is the worker's choice, not the
#: run's: a worker pinned with ``CUDA_VISIBLE_DEVICES=3`` sees that GPU as ``cuda:0``.
RUN_DEVICES = ("auto", "cpu", "cuda")


def check_run_device(device: str) -> str:
    """Validate a run's device: ``"auto"``, ``"cpu"`` or ``"cuda"`` (no ordinal).

    Raises:
        ConfigError: anything else (``field="device"``), e.g. ``"cuda:1"``: which GPU a
            generation uses is decided by the worker that trains it.
    """
    if device not in RUN_DEVICES:
        hint = " (the worker that trains a generation picks the GPU)" if str(device).startswith("cuda:") else ""
        raise ConfigError(f"device: must be auto, cpu or cuda, got {device!r}{hint}", field="device")
    return device


def check_cuda_index(device: torch.device, visible: int) -> torch.device:
    """Return ``device`` when its CUDA ordinal is one of the ``visible`` GPUs of this process.

    Args:
        device: a ``cuda`` or ``cuda:N`` device (no index means the current GPU, ``cuda:0``).
        visible: GPUs this process sees (``torch.cuda.device_count()``; 1 in a worker pinned
            with ``CUDA_VISIBLE_DEVICES=N``).

    Raises:
        ConfigError: no GPU is visible, or the ordinal is not below ``visible``
            (``field="device"``), instead of CUDA's "invalid device ordinal" at the first
            allocation.
    """
    if visible < 1:
        raise ConfigError("device: CUDA was requested but no GPU is available", field="device")
    index = 0 if device.index is None else device.index
    if index >= visible:
        pinned = os.environ.get("CUDA_VISIBLE_DEVICES")
        where = f" (CUDA_VISIBLE_DEVICES={pinned!r} renumbers them from cuda:0)" if pinned is not None else ""
        raise ConfigError(
            f"device: {device} is not visible to this process, which sees {visible} GPU(s): "
            f"cuda:0 to cuda:{visible - 1}{where}",
            field="device",
        )
    return torch.device("cuda", index)


def pick_device(requested: str | None = None) -> torch.device:
    """Return the torch device to use.

    Args:
        requested: ``"auto"``/``None`` (``cuda:0`` when a GPU is visible, else CPU), ``"cpu"``,
            ``"cuda"`` (``cuda:0``) or ``"cuda:N"`` (N counts the GPUs this process sees).

    Raises:
        ConfigError: not a device string, a device type other than CPU and CUDA, CUDA asked for
            but not available, or a CUDA ordinal this process cannot see (:func:`check_cuda_index`);
            ``field="device"``.
    """
    if requested in (None, "", "auto"):
        return torch.device("cuda", 0) if torch.cuda.is_available() else torch.device("cpu")
    try:
        device = torch.device(requested)
    except (RuntimeError, TypeError) as exc:
        raise ConfigError(f"device: {requested!r} is not a torch device", field="device") from exc
    if device.type == "cpu":
        return torch.device("cpu")
    if device.type != "cuda":
        raise ConfigError(f"device: {requested!r} is not supported; use auto, cpu, cuda or cuda:N", field="device")
    return check_cuda_index(device, torch.cuda.device_count() if torch.cuda.is_available() else 0)


def configure_device(device: torch.device) -> None:
    """Per-process settings for training on ``device``.

    On CUDA, float32 matrix products use TensorFloat-32 tensor cores
    (``torch.set_float32_matmul_precision("high")``): about 8x the float32 throughput on
    Ampere and later GPUs, with a 10-bit mantissa in the products (sums stay float32), which
    policy-gradient training does not notice. The CPU is left as it is.
    """
    if device.type == "cuda":
        torch.set_float32_matmul_precision("high")


#: Fragments of the messages of CUDA errors after which the process's CUDA context is unusable
#: ("sticky" errors: every later CUDA call fails the same way, so only a new process recovers).
STICKY_CUDA_ERRORS = (
    "illegal memory access",
    "device-side assert",
    "misaligned address",
    "illegal instruction",
    "unspecified launch failure",
    "an illegal address",
    "cuda error: launch failed",
    "uncorrectable ecc error",
    "hardware stop",
)


def is_sticky_cuda_error(exc: BaseException) -> bool:
    """Whether ``exc`` is a CUDA error that leaves this process's CUDA context broken.

    PyTorch raises them as ``RuntimeError`` (or its subclass ``torch.AcceleratorError``) whose
    message starts with ``CUDA error:``; e.g. "CUDA error: an illegal memory access was
    encountered" (``cudaErrorIllegalAddress``) or "device-side assert triggered".
    """
    text = str(exc).lower()
    return isinstance(exc, RuntimeError) and "cuda" in text and any(f in text for f in STICKY_CUDA_ERRORS)


#: What :func:`cuda_self_check` runs in a fresh interpreter: one tiny kernel, read back.
_SELF_CHECK = (
    "import sys, torch\n"
    "if not torch.cuda.is_available():\n"
    "    sys.exit(f'CUDA is not available to torch {torch.__version__} (CUDA build: {torch.version.cuda})')\n"
    "x = torch.arange(8, device=sys.argv[1], dtype=torch.float32)\n"
    "total = float((x * 2 + 1).sum())\n"
    "sys.exit(None if total == 64.0 else f'a test kernel returned {total}, expected 64.0')\n"
)


def cuda_self_check(device: str = "cuda:0", *, timeout_s: float = 120.0) -> str | None:
    """Run one tiny kernel on ``device`` in a fresh interpreter; ``None`` when it works.

    A child process, so that this one never initialises CUDA (a Celery prefork parent must not:
    CUDA does not survive ``fork``) and a crash or hang of the driver cannot take it down.

    Returns:
        ``None``, or a one-line reason: "CUDA is not available to torch 2.x (CUDA build:
        None)", the last line of the child's error (a driver/wheel mismatch, an unusable
        device), or the timeout.
    """
    try:
        child = subprocess.run(
            [sys.executable, "-c", _SELF_CHECK, device], capture_output=True, text=True, timeout=timeout_s
        )
    except subprocess.TimeoutExpired:
        return f"a test kernel on {device} did not finish within {timeout_s:.0f} s"
    if child.returncode == 0:
        return None
    lines = [line.strip() for line in (child.stderr or child.stdout).splitlines() if line.strip()]
    return lines[-1] if lines else f"the CUDA check exited with status {child.returncode}"


#: A pod's largest buffer (PPO rollout, SAC replay) may take one part in N of a device's memory:
#: the networks, the env, optimizer moments and temporaries need the rest.
BUFFER_MEMORY_PARTS = {"cuda": 3, "cpu": 4}


def buffer_memory_limit(device: torch.device) -> int:
    """Bytes a pod's largest buffer may take on ``device``: a share of the device's memory.

    CUDA: a third of the GPU's *free* memory now (``torch.cuda.mem_get_info``: other processes
    and this one's earlier allocations are left out), e.g. 8 GiB of an idle 24 GB card, 47 GiB
    of an idle 141 GB H200. CPU: a quarter of the machine's physical memory (``os.sysconf``).
    See :data:`BUFFER_MEMORY_PARTS`.
    """
    if device.type == "cuda":
        total = torch.cuda.mem_get_info(device.index or 0)[0]
    else:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return total // BUFFER_MEMORY_PARTS.get(device.type, 4)


def set_cpu_threads(threads: int | None = None) -> int:
    """Set torch's intra-op thread count for this process and return it.

    Several training processes on one small machine must not oversubscribe cores: two
    processes with 2 threads each on 2 cores ran a policy update >10x slower than 1 thread each.

    Args:
        threads: explicit count; default ``PADDOCK_TORCH_THREADS`` or 1.
    """
    if threads is None:
        threads = int(os.environ.get("PADDOCK_TORCH_THREADS", "1") or 1)
    threads = max(1, threads)
    torch.set_num_threads(threads)
    return threads
