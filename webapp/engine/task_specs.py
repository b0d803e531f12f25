"""Tasks: validate a task spec, list the algorithms and their defaults, check splits and
generation sizes; per-process trainer setup (threads, device, preloading)."""

from __future__ import annotations

import copy
import functools
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from trainer.errors import TrainerError
from webapp.core.errors import AppError
from webapp.engine.backtests import BENCHMARK_TICKER, benchmark_path_for
from webapp.engine.market import _ticker_days


def worker_device_problem(device: str) -> str | None:
    """Why this worker cannot train on ``device`` (``"cuda:0"``...), or ``None``: a CUDA device
    runs one tiny kernel in a fresh interpreter first (:func:`trainer.util.device.cuda_self_check`);
    other devices need no check."""
    from trainer.util.device import cuda_self_check

    return cuda_self_check(device) if device.startswith("cuda") else None


def is_sticky_device_error(exc: BaseException) -> bool:
    """Whether ``exc`` broke this process's CUDA context (:func:`trainer.util.device.is_sticky_cuda_error`)."""
    from trainer.util.device import is_sticky_cuda_error

    return is_sticky_cuda_error(exc)


def configure_process(*, threads: int) -> None:
    """Per-worker-process setup: torch thread count (1 per process on a 2-core machine)."""
    from trainer.util.device import set_cpu_threads

    set_cpu_threads(threads)


def validate_task(spec: dict[str, Any], *, intraday: bool = False) -> dict[str, Any]:
    """Validate a task spec with the trainer's own config classes and normalize it.

    Args:
        spec: ``trainer.task.TaskSpec`` dict: ``data`` (DataSpec dict), ``train``,
            ``validation``, ``test`` (``[start, end]``), ``env`` (EnvConfig dict),
            ``algorithm``, ``hyperparameters``.
        intraday: the dataset holds intraday bars: the buffer memory estimate counts the
            panel's session features (``TaskSpec.from_dict(..., intraday=True)``).

    Returns:
        ``TaskSpec.from_dict(spec).to_dict()``: defaults filled in, JSON-able.

    Raises:
        AppError: a bad value; ``fields`` names it with a dotted path (``env.hmax``,
            ``hyperparameters.learning_rate``).
    """
    from trainer.task import TaskSpec

    try:
        return TaskSpec.from_dict(spec, intraday=intraday).to_dict()
    except TrainerError as exc:
        raise AppError.from_trainer(exc) from exc


def task_spec_dict(
    *,
    data: dict[str, Any],
    splits: dict[str, Any],
    env: Any,
    algorithm: Any,
    hyperparameters: Any,
    kind: Any,
    selection: Any,
) -> dict[str, Any]:
    """The one builder of a ``trainer.task.TaskSpec`` dict from a task's parts (a new task's
    request, before validation, and a stored task, for a generation to train on).

    Args:
        data: the ``DataSpec`` dict (``paths``, ``tickers``, the loader's options).
        splits: ``{"train": ..., "validation": ..., "test": ...}``, each ``[start, end]`` or
            ``{"start", "end"}``.
        env, algorithm, hyperparameters, kind, selection: as ``TaskSpec.from_dict`` takes
            them (``selection`` ``None`` = the default rule).
    """
    return {
        "data": data,
        "train": splits["train"],
        "validation": splits["validation"],
        "test": splits["test"],
        "env": env,
        "algorithm": algorithm,
        "hyperparameters": hyperparameters,
        "kind": kind,
        "selection": selection or {},
    }


def split_errors(splits: dict[str, Any]) -> dict[str, str]:
    """Every error of a task's three splits at once (``trainer.task.split_errors``), as
    ``{dotted field: message}``: each split's bounds and order, and the order between them."""
    from trainer.task import split_errors as trainer_split_errors

    return trainer_split_errors(splits)


def demo_task() -> dict[str, Any]:
    """The built-in demo task's spec (``trainer.demo.demo_task_dict``; a fresh dict): data file
    relative to the data folder, ``{"start", "end"}`` of the data and of each split, PPO."""
    from trainer.demo import demo_task_dict

    return demo_task_dict()


def recommended_rebalance_band() -> float:
    """The no-trade band new portfolio tasks of the form and the demo start with, a fraction of
    value (``trainer.envs.portfolio_config.RECOMMENDED_REBALANCE_BAND``; the env's default is 0)."""
    from trainer.envs.portfolio_config import RECOMMENDED_REBALANCE_BAND

    return RECOMMENDED_REBALANCE_BAND


def selection_rule(selection: dict[str, Any] | None) -> dict[str, Any]:
    """A task's validation score rule (``trainer.selection.SelectionRule``) with its label.

    Args:
        selection: ``Task.selection`` or an agent's ``metrics["selection"]``: ``rule``,
            ``windows``, ``k``; missing keys take the rule's defaults.

    Returns:
        ``{"rule", "windows", "k", "label"}``, ``label`` from ``SelectionRule.describe``, e.g.
        ``"mean - 1 x std of the Sharpe ratios of 4 validation sub-windows"``; a stored value the
        trainer no longer accepts is labelled by its rule name.
    """
    from trainer.selection import SelectionRule

    # an agent's metrics["selection"] also holds the rule's description and sub-window figures
    given = {k: v for k, v in (selection or {}).items() if k in ("rule", "windows", "k") and v is not None}
    try:
        rule = SelectionRule.from_dict(given)
    except TrainerError:
        return {**SelectionRule().to_dict(), **given, "label": str(given.get("rule", ""))}
    return {**rule.to_dict(), "label": rule.describe()}


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


def default_algorithm(kind: str) -> str:
    """A new task's algorithm unless it names one (``trainer.algorithms.default_algorithm``:
    ``"direct"`` for portfolio, ``"ppo"`` for stock trading); no torch. AppError: unknown kind."""
    from trainer.algorithms import default_algorithm as trainer_default

    try:
        return trainer_default(kind)
    except TrainerError as exc:
        raise AppError.from_trainer(exc) from exc


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


def parse_day(value: Any, field: str) -> str:
    """A ``YYYY-MM-DD`` day (``trainer.util.dates.parse_day``, the trainer's one date parser).

    Raises:
        AppError: not such a day, naming ``field``.
    """
    from trainer.util.dates import parse_day as trainer_parse_day

    try:
        return trainer_parse_day(value, field)
    except TrainerError as exc:
        raise AppError.from_trainer(exc) from exc


def parse_moment(value: Any, field: str) -> str:
    """A split bound: ``YYYY-MM-DD``, or ``YYYY-MM-DD HH:MM`` exchange time for intraday data
    (``trainer.util.dates.parse_moment``).

    Raises:
        AppError: neither, naming ``field``.
    """
    from trainer.util.dates import parse_moment as trainer_parse_moment

    try:
        return trainer_parse_moment(value, field)
    except TrainerError as exc:
        raise AppError.from_trainer(exc) from exc


def range_bound(value: Any, *, end: bool, field: str) -> Any:
    """The instant a range bound stands for (``trainer.util.dates.range_bound``): a start day is its
    00:00, an end day its last second, a ``YYYY-MM-DD HH:MM`` moment itself.

    Returns:
        A naive ``datetime.datetime`` in exchange time.

    Raises:
        AppError: neither a day nor a moment, naming ``field``.
    """
    import datetime as dt

    from trainer.util.dates import parse_moment as trainer_parse_moment
    from trainer.util.dates import range_bound as trainer_range_bound

    try:
        instant = trainer_range_bound(trainer_parse_moment(value, field), end=end)
    except TrainerError as exc:
        raise AppError.from_trainer(exc) from exc
    return dt.datetime.fromisoformat(str(instant))


def check_window(start: Any, end: Any, *, first: str, last: str) -> None:
    """Refuse a backtest range past the data by the rule task splits and the command line use
    (``trainer.data.splits.check_window``: at most 4 calendar days beyond either edge).

    Args:
        start, end: the range's bounds (days or ``YYYY-MM-DD HH:MM`` moments).
        first, last: the dataset's first and last day, ``YYYY-MM-DD``.

    Raises:
        AppError: naming ``start`` or ``end`` and the data's edge.
    """
    from trainer.data.splits import check_window as trainer_check_window

    try:
        trainer_check_window("", start, end, first=first, last=last)
    except TrainerError as exc:
        raise AppError.from_trainer(exc) from exc


def clean_tickers(values: Sequence[Any], *, field: str = "tickers") -> list[str]:
    """Ticker symbols a user typed, stripped and upper-cased, none twice
    (``trainer.data.files.check_tickers``: 1 to 20 letters, digits, ``.``, ``-``, ``^``, ``=``).

    Raises:
        AppError: 400 naming ``<field>.<i>`` (control characters in the value are escaped), or
            ``<field>`` for a ticker listed twice (``"tickers: AAPL is listed twice; ..."``).
    """
    from trainer.data.files import check_tickers

    try:
        return check_tickers(values, field=field)
    except TrainerError as exc:
        raise AppError.from_trainer(exc) from exc


def benchmark_days(benchmark_path: str | Path, ticker: str | None = None) -> Any:
    """(D,) ``datetime64[D]`` days the benchmark file holds for ``ticker`` (QQQ)."""
    pairs = _ticker_days([str(benchmark_path)], [ticker or BENCHMARK_TICKER])
    return np.unique(pairs["date"].to_numpy().astype("datetime64[D]"))


def check_benchmark_coverage(ranges: dict[str, Any], *, benchmark_path: str | Path) -> None:
    """Refuse ranges the benchmark file does not cover, naming the file and its first/last day.

    Args:
        ranges: name -> ``{"start", "end"}`` or ``(start, end)``, e.g. ``{"test": ...}``.
        benchmark_path: ``PADDOCK_BENCHMARK_FILE``.

    Raises:
        AppError: ``test.end: 2026-08-31 is after the last QQQ day 2024-04-19 in
            benchmark_etfs_daily_eodhd.csv.gz`` (field ``test.end``); a missing or unreadable
            benchmark file (field ``benchmark``).
    """
    from trainer.data.splits import check_coverage

    path = Path(benchmark_path)
    if not path.exists():
        raise AppError(
            f"benchmark: the benchmark file {path.name} does not exist (PADDOCK_BENCHMARK_FILE); backtests need it",
            fields={"benchmark": f"{path.name} not found"},
        )
    try:
        days = benchmark_days(path)
        check_coverage(_as_pairs(ranges), days, what=BENCHMARK_TICKER, file=path.name)
    except TrainerError as exc:
        raise AppError.from_trainer(exc).with_names({str(path): path.name}) from exc


def _as_pairs(ranges: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {
        name: (str(r["start"]), str(r["end"])) if isinstance(r, dict) else (str(r[0]), str(r[1]))
        for name, r in ranges.items()
    }


def check_task_data(
    splits: dict[str, Any],
    *,
    paths: Sequence[str | Path],
    tickers: Sequence[str],
    named: bool,
    file_names: dict[str, str],
    benchmark_path: str | Path,
    intraday: bool = False,
) -> dict[str, Any]:
    """Decide a task's tickers over its range and check its splits, when the task is created.

    The same rules training applies (``trainer.data.pipeline.plan_tickers``: late listings,
    early ends and gaps judged against train.start to test.end), then the splits against the
    trading days of the kept tickers (``trainer.data.splits.check_splits_in_data``, the command
    line's rule too: inside the data's first and last day, give or take a weekend and a holiday,
    and train 126, validation 20, test 20 days at least) and against the benchmark file (QQQ
    must cover every split, so that the validation score and the backtests have their
    baseline); the data's edge is checked first, so a split before both names the data's
    first day, not QQQ's. Only the date and ticker columns
    are read, once per process and file version: no prices, indicators or torch.

    Args:
        splits: ``{"train": {"start", "end"}, ...}`` as ``validate_task`` returns them.
        paths: absolute data file paths of the dataset.
        tickers: the dataset's tickers (``named=False``) or the ones the user named.
        named: the user named ``tickers``: one that cannot cover the range is a 400 naming it,
            its first and last day and the range; otherwise it is dropped with a note.
        file_names: server path -> the name the user knows the file by.
        benchmark_path: ``PADDOCK_BENCHMARK_FILE``.
        intraday: the dataset holds intraday bars: split bounds may then be ``YYYY-MM-DD HH:MM``
            (checked here on days; training checks the bars themselves).

    Returns:
        ``{"tickers": [...] traded, "notes": [...]}``: every decision (dropped tickers,
        forward-filled days, warm-up days).

    Raises:
        AppError: naming ``tickers``, ``<split>.start`` or ``<split>.end``; or an unreadable file.
    """
    from trainer.data.coverage import plan_tickers
    from trainer.data.splits import check_splits_in_data

    ranges = _as_pairs(splits)
    shown = ", ".join(sorted(set(file_names.values()))) or "the data"
    try:
        pairs = _ticker_days(paths, tickers)
        plan = plan_tickers(
            pairs,
            tickers=list(tickers) if named else None,
            start=ranges["train"][0][:10],  # the day of a YYYY-MM-DD HH:MM bound
            end=ranges["test"][1][:10],
        )
        kept = list(plan.tickers)
        days = np.unique(pairs.loc[pairs["tic"].isin(kept), "date"].to_numpy().astype("datetime64[D]"))
        # the rule of every door (the command line's too): inside the dataset's days, naming the
        # file and its first or last day; a split starting before the data is refused, not cut
        check_splits_in_data(ranges, days, file=shown, intraday=intraday)
    except TrainerError as exc:
        raise AppError.from_trainer(exc).with_names(file_names) from exc
    check_benchmark_coverage(splits, benchmark_path=benchmark_path_for(paths, default=benchmark_path))
    return {"tickers": kept, "notes": plan.all_notes()}


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
    """Refuse a run device other than ``auto``, ``cpu`` or ``cuda`` (``trainer.util.device.check_run_device``).

    Raises:
        AppError: naming ``device`` (e.g. for ``"cuda:1"``: the worker picks the GPU).
    """
    from trainer.util.device import check_run_device as check

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
    from trainer.errors import ConfigError
    from trainer.util.device import pick_device

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


def min_env_steps(algorithm: str, hyperparameters: dict[str, Any]) -> int:
    """Env steps of one learning chunk (``trainer.pod.min_env_steps``): one rollout
    (``num_envs x rollout_steps``) for PPO and A2C, one vector step (``num_envs``) off-policy."""
    from trainer.task import min_env_steps as chunk

    return chunk(algorithm, hyperparameters)
