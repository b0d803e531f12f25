"""Tasks: validate a task spec, list the algorithms and their defaults, check splits and
generation sizes; per-process trainer setup (threads, device, preloading)."""

from __future__ import annotations

import copy
import functools
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainer.errors import TrainerError
from webapp.core.errors import AppError


def configure_process(*, threads: int) -> None:
    """Per-worker-process setup: torch thread count (1 per process on a 2-core machine)."""
    from trainer.device import set_cpu_threads

    set_cpu_threads(threads)


def validate_task(spec: dict[str, Any]) -> dict[str, Any]:
    """Validate a task spec with the trainer's own config classes and normalize it.

    Args:
        spec: ``trainer.task.TaskSpec`` dict: ``data`` (DataSpec dict), ``train``,
            ``validation``, ``test`` (``[start, end]``), ``env`` (EnvConfig dict),
            ``algorithm``, ``hyperparameters``.

    Returns:
        ``TaskSpec.from_dict(spec).to_dict()``: defaults filled in, JSON-able.

    Raises:
        AppError: a bad value; ``fields`` names it with a dotted path (``env.hmax``,
            ``hyperparameters.learning_rate``).
    """
    from trainer.task import TaskSpec

    try:
        return TaskSpec.from_dict(spec).to_dict()
    except TrainerError as exc:
        raise AppError.from_trainer(exc) from exc


_calendar_cache: OrderedDict[tuple, Any] = OrderedDict()
_calendar_lock = threading.Lock()


def demo_task() -> dict[str, Any]:
    """The built-in demo task's spec (``trainer.demo.demo_task_dict``; a fresh dict): data file
    relative to the data folder, ``{"start", "end"}`` of the data and of each split, PPO."""
    from trainer.demo import demo_task_dict

    return demo_task_dict()


def validate_hyperparameters(algorithm: str, hyperparameters: dict[str, Any]) -> dict[str, Any]:
    """The algorithm's full hyperparameters with ``hyperparameters`` applied and validated.

    Raises:
        AppError: unknown key or bad value (field ``hyperparameters.<key>``), unknown algorithm.
    """
    from trainer.task import validate_hyperparameters as validate

    try:
        return validate(algorithm, hyperparameters)
    except TrainerError as exc:
        raise AppError.from_trainer(exc) from exc


def algorithms() -> tuple[str, ...]:
    """Names of the algorithms a task may use (``"ppo"``, ``"sac"``); loads no torch."""
    from trainer.algorithms import ALGORITHM_NAMES

    return ALGORITHM_NAMES


def default_hyperparameters(algorithm: str) -> dict[str, Any]:
    """The algorithm's full hyperparameter dict with the trainer's defaults (a fresh copy the
    caller may change).

    Raises:
        AppError: an unknown algorithm (field ``algorithm``).
    """
    return copy.deepcopy(_default_hyperparameters(algorithm))


@functools.cache
def _default_hyperparameters(algorithm: str) -> dict[str, Any]:
    from trainer.errors import ConfigError
    from trainer.task import validate_hyperparameters

    try:
        return validate_hyperparameters(algorithm, {})
    except ConfigError as exc:
        raise AppError.from_trainer(exc, prefix="") from exc


_CALENDAR_CACHE_SIZE = 16


def parse_day(value: Any, field: str) -> str:
    """A ``YYYY-MM-DD`` day (``trainer.dates.parse_day``, the trainer's one date parser).

    Raises:
        AppError: not such a day, naming ``field``.
    """
    from trainer.dates import parse_day as trainer_parse_day

    try:
        return trainer_parse_day(value, field)
    except TrainerError as exc:
        raise AppError.from_trainer(exc) from exc


def check_task_splits(splits: dict[str, Any], *, paths: Sequence[str | Path], tickers: Sequence[str]) -> None:
    """Check a task's date splits against the trading days of its data files.

    Each split must hold data and at least ``trainer.data.splits.MIN_SPLIT_DAYS`` trading days
    (train 126, validation 20, test 20). Only the date and ticker columns are read
    (``trainer.data.loading.trading_dates``), once per process and file version: no prices,
    indicators or torch. Training checks again on the fully processed data.

    Args:
        splits: ``{"train": {"start", "end"}, ...}`` as ``validate_task`` returns them.
        paths: absolute data file paths of the dataset.
        tickers: the task's tickers.

    Raises:
        AppError: naming ``<split>.start`` or ``<split>.end``; or an unreadable file.
    """
    from trainer.data.loading import trading_dates
    from trainer.data.splits import check_split_days

    key = (
        tuple((str(p), Path(p).stat().st_mtime_ns if Path(p).exists() else 0) for p in paths),
        tuple(sorted(tickers)),
    )
    try:
        with _calendar_lock:
            days = _calendar_cache.get(key)
        if days is None:
            days = trading_dates([str(p) for p in paths], tickers=tickers)
            with _calendar_lock:
                _calendar_cache[key] = days
                while len(_calendar_cache) > _CALENDAR_CACHE_SIZE:
                    _calendar_cache.popitem(last=False)
        check_split_days({name: (r["start"], r["end"]) for name, r in splits.items()}, days)
    except TrainerError as exc:
        raise AppError.from_trainer(exc) from exc


def check_generation_steps(algorithm: str, hyperparameters: dict[str, Any], generation_steps: int) -> None:
    """Refuse generations shorter than one PPO rollout or one SAC vector step
    (``trainer.task.check_env_steps``).

    Raises:
        AppError: naming ``generation_steps``.
    """
    from trainer.task import check_env_steps

    try:
        check_env_steps(algorithm, hyperparameters, int(generation_steps), field="generation_steps")
    except TrainerError as exc:
        raise AppError.from_trainer(exc) from exc


def preload_trainer() -> threading.Thread:
    """Import the trainer's task validation (and with it torch, about 3 s) in a background
    thread, so that a web process's first task validation does not wait for it.

    Returns:
        The started daemon thread.
    """

    def load() -> None:
        import trainer.pod  # noqa: F401

    thread = threading.Thread(target=load, name="paddock-preload-trainer", daemon=True)
    thread.start()
    return thread


def check_run_device(device: str) -> None:
    """Refuse a run device other than ``auto``, ``cpu`` or ``cuda`` (``trainer.device.check_run_device``).

    Raises:
        AppError: naming ``device`` (e.g. for ``"cuda:1"``: the worker picks the GPU).
    """
    from trainer.device import check_run_device as check

    try:
        check(device)
    except TrainerError as exc:
        raise AppError.from_trainer(exc) from exc


def resolve_device(requested: str, worker: str = "auto") -> str:
    """The device a generation uses in this worker process, e.g. ``"cuda:0"`` or ``"cpu"``.

    The run says which kind of device it wants; the worker says which one it has. A worker
    pinned to a GPU with ``CUDA_VISIBLE_DEVICES=N`` sees it as ``cuda:0``.

    Args:
        requested: the run's device, ``"auto"``, ``"cpu"`` or ``"cuda"``. A ``"cuda:N"`` stored
            before runs lost their ordinal counts as ``"cuda"``.
        worker: this worker's device (``webapp.core.workers.worker_device``): ``"auto"``,
            ``"cpu"``, ``"cuda"`` or ``"cuda:N"`` (an ordinal among the GPUs it sees).

    Raises:
        trainer.errors.ConfigError: a CUDA run on a CPU-only worker, or a worker ordinal this
            process cannot see (``field="device"``).
    """
    from trainer.device import pick_device
    from trainer.errors import ConfigError

    kind = requested.split(":", 1)[0]
    if kind == "cpu":
        return "cpu"
    if kind == "cuda" and worker == "cpu":
        raise ConfigError(
            "device: the run trains on cuda but this worker has no GPU (it trains on cpu)", field="device"
        )
    if kind == "cuda" and not worker.startswith("cuda"):
        return str(pick_device("cuda"))
    return str(pick_device(worker))
