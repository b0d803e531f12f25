"""The one place where the web side calls ``trainer`` and converts types.

Everything under ``webapp/`` imports this module, never ``trainer`` directly
(``tests/webapp/test_architecture.py`` enforces it). Trainer errors are turned into
:class:`~webapp.core.errors.AppError` (HTTP 400 naming the dotted field) where a user's input
caused them; functions documented as raising :class:`TrainerError` let it through, and callers
catch it under that name from here. Heavy trainer modules (torch) are imported inside the
functions that need them, so web processes that only validate input do not pay for them at
start-up.
"""

from __future__ import annotations

import copy
import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from trainer.errors import TrainerError  # also the name the rest of webapp catches it by
from webapp.core.errors import AppError, register_trainer_error

register_trainer_error(TrainerError)


def configure_process(*, threads: int) -> None:
    """Per-worker-process setup: torch thread count (1 per process on a 2-core machine)."""
    from trainer.device import set_cpu_threads

    set_cpu_threads(threads)


# --- market data ---------------------------------------------------------------------------


def inspect_market_files(paths: Sequence[str | Path], *, tickers: Sequence[str] | None = None) -> dict[str, Any]:
    """Load and validate daily OHLCV files; report what they hold.

    Args:
        paths: absolute file (or folder) paths.
        tickers: keep only these tickers (``None`` = all in the files).

    Returns:
        ``{"tickers": [...], "start": "YYYY-MM-DD", "end": "YYYY-MM-DD", "notes": [...],
        "rows": int}``, notes being the loader's report (adjustments, merged duplicates).

    Raises:
        AppError: the files cannot be used (missing, bad rows, unknown tickers), naming the
            file, row or ticker in ``fields``.
    """
    from trainer.data.loading import load_panel

    try:
        panel = load_panel([str(p) for p in paths], tickers=tickers)
    except TrainerError as exc:
        raise AppError.from_trainer(exc, prefix="") from exc
    if panel.empty:
        raise AppError("the files hold no rows", fields={"paths": "the files hold no rows"})
    dates = panel["date"]
    return {
        "tickers": sorted(str(t) for t in panel["tic"].unique()),
        "start": dates.min().strftime("%Y-%m-%d"),
        "end": dates.max().strftime("%Y-%m-%d"),
        "notes": [str(n) for n in panel.attrs.get("notes", [])],
        "rows": int(len(panel)),
    }


# --- tasks ---------------------------------------------------------------------------------


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
        with _market_lock:
            days = _calendar_cache.get(key)
        if days is None:
            days = trading_dates([str(p) for p in paths], tickers=tickers)
            with _market_lock:
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


# --- tournament ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ParentDecision:
    """What a generation starts from: ``action`` is ``fresh``, ``keep_current`` or ``parent``;
    ``agent_id`` the agent to load (``None`` when fresh)."""

    action: str
    agent_id: int | None


def choose_parent(
    leaderboard: Sequence[tuple[int, float | None, int]],
    *,
    current: tuple[int, float | None] | None,
    fresh_probability: float,
    rng: np.random.Generator,
) -> ParentDecision:
    """Pick the agent a pod's next generation starts from (``trainer.tournament.select_parent``).

    Args:
        leaderboard: ``(agent_id, score, created_seq)`` of the agents on the leaderboard.
        current: ``(agent_id, score)`` of the pod's own last agent, ``None`` if it has none.
        fresh_probability: chance in [0, 1] of starting from a new random agent.
        rng: NumPy generator (seeded per run, pod and generation for reproducibility).
    """
    from trainer import tournament

    entries = [tournament.Entry(agent_id=a, score=s, created_seq=q) for a, s, q in leaderboard]
    choice = tournament.select_parent(
        entries,
        current_score=None if current is None else current[1],
        fresh_probability=fresh_probability,
        rng=rng,
    )
    if choice.action == tournament.PARENT:
        return ParentDecision(tournament.PARENT, int(choice.parent.agent_id))
    if choice.action == tournament.KEEP_CURRENT and current is not None:
        return ParentDecision(tournament.KEEP_CURRENT, current[0])
    return ParentDecision(tournament.FRESH, None)


def mutate_hyperparameters(
    hyperparameters: dict[str, Any], *, mutation: dict[str, Any], rng: np.random.Generator
) -> tuple[dict[str, Any], dict[str, list[Any]]]:
    """PBT perturbation of a copied agent's hyperparameters (``trainer.tournament.mutate``).

    Args:
        hyperparameters: the parent's values.
        mutation: the run's settings ``{"bounds": {name: [low, high]}, "factors": [...],
            "probability": p}``; no bounds means no mutation.

    Returns:
        ``(new_hyperparameters, {name: [old, new]})``.
    """
    from trainer import tournament

    bounds = mutation.get("bounds") or {}
    if not bounds:
        return dict(hyperparameters), {}
    return tournament.mutate(
        hyperparameters,
        {k: tuple(v) for k, v in bounds.items()},
        factors=tuple(mutation.get("factors") or (0.8, 1.25)),
        rng=rng,
        probability=float(mutation.get("probability", 1.0)),
    )


def check_mutation(mutation: dict[str, Any], hyperparameters: dict[str, Any]) -> None:
    """Raise :class:`AppError` (fields ``mutation.*``) if a run's mutation settings are unusable."""
    try:
        mutate_hyperparameters(hyperparameters, mutation=mutation, rng=np.random.default_rng(0))
    except TrainerError as exc:
        raise AppError.from_trainer(exc, prefix="mutation.") from exc
    except (TypeError, ValueError) as exc:
        raise AppError(f"mutation: {exc}", fields={"mutation": str(exc)}) from exc


def prune_leaderboard(entries: Sequence[tuple[int, float | None, int]], k: int) -> tuple[list[int], list[int]]:
    """Split ``(agent_id, score, created_seq)`` entries into the ``k`` best ids (best first)
    and the ids to drop (``trainer.tournament.prune``)."""
    from trainer import tournament

    keep, drop = tournament.prune([tournament.Entry(a, s, q) for a, s, q in entries], k)
    return [int(e.agent_id) for e in keep], [int(e.agent_id) for e in drop]


# --- generations ---------------------------------------------------------------------------


def resolve_device(requested: str) -> str:
    """The device a generation will use in this process, e.g. ``"cuda:0"`` or ``"cpu"``."""
    from trainer.device import pick_device

    return str(pick_device(requested))


_market_cache: OrderedDict[str, Any] = OrderedDict()
_market_lock = threading.Lock()
_MARKET_CACHE_SIZE = 4


def _market_data(task_spec: Any, *, data_dir: str | None, cache_dir: str | None) -> Any:
    """The task's processed market data, kept in memory between generations of one worker
    process (a generation then starts without re-reading the files)."""
    from trainer.data import load_market_data

    key = repr(task_spec.data.to_dict())
    with _market_lock:
        if key in _market_cache:
            _market_cache.move_to_end(key)
            return _market_cache[key]
    data = load_market_data(task_spec.data, data_dir=data_dir, cache_dir=cache_dir)
    with _market_lock:
        _market_cache[key] = data
        while len(_market_cache) > _MARKET_CACHE_SIZE:
            _market_cache.popitem(last=False)
    return data


def train_generation(
    task: dict[str, Any],
    *,
    env_steps: int,
    out_path: str,
    parent_path: str | None,
    hyperparameters: dict[str, Any] | None,
    seed: int,
    device: str,
    progress: Callable[[dict[str, Any]], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    data_dir: str | None = None,
    cache_dir: str | None = None,
) -> dict[str, Any]:
    """Train one generation with ``trainer.pod.run_generation``.

    Args:
        task: a normalized task spec (``validate_task``'s output).
        env_steps: env steps to train (summed over the vectorized envs).
        out_path: local file the checkpoint is written to (atomically).
        parent_path: local checkpoint to start from, ``None`` for a fresh agent.
        hyperparameters: values to train with (``None`` = the task's).
        seed: RNG seed of this generation.
        device: ``"auto"``, ``"cpu"``, ``"cuda"``...
        progress: called with ``{"env_steps", "steps_per_s", ...}`` a few times a second.
        should_stop: polled between updates; ``True`` cancels (result ``cancelled=True``).

    Returns:
        JSON-able ``{"sha256", "score", "metrics", "env_steps", "hyperparameters",
        "cancelled", "duration_s"}``; ``score`` is ``None`` when the agent has none (NaN).

    Raises:
        trainer.errors.TrainerError: bad data or config (a permanent failure).
    """
    from trainer.pod import TaskSpec, run_generation

    spec = TaskSpec.from_dict(task)
    market = _market_data(spec, data_dir=data_dir, cache_dir=cache_dir)
    result = run_generation(
        spec,
        env_steps=int(env_steps),
        out_path=out_path,
        parent=parent_path,
        hyperparameters=hyperparameters,
        seed=int(seed),
        device=device,
        progress=progress,
        should_stop=should_stop,
        data_dir=data_dir,
        cache_dir=cache_dir,
        market_data=market,
    )
    score = None if result.score is None or not np.isfinite(result.score) else float(result.score)
    return {
        "sha256": result.sha256,
        "score": score,
        "metrics": _jsonable(result.metrics),
        "env_steps": int(result.env_steps),
        "hyperparameters": _jsonable(result.hyperparameters),
        "cancelled": bool(result.cancelled),
        "duration_s": float(result.duration_s),
    }


def _jsonable(value: Any) -> Any:
    """Plain JSON types (NumPy scalars to Python numbers, NaN/inf to ``None``)."""
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, float) and not np.isfinite(value):
        return None
    return value


# --- backtests -----------------------------------------------------------------------------

#: The benchmark's ticker in the ``PADDOCK_BENCHMARK_FILE`` price file (adjusted close).
BENCHMARK_TICKER = "QQQ"

_benchmark_cache: dict[tuple[str, float, str], Any] = {}


def _benchmark_close(path: str | Path, ticker: str) -> Any:
    """QQQ's adjusted close (``trainer.backtest.engine.load_benchmark_close``), kept per worker
    process and reloaded when the file changes."""
    from trainer.backtest.engine import load_benchmark_close

    p = Path(path)
    key = (str(p), p.stat().st_mtime if p.exists() else 0.0, ticker)
    if key not in _benchmark_cache:
        _benchmark_cache.clear()
        _benchmark_cache[key] = load_benchmark_close(p, ticker=ticker)
    return _benchmark_cache[key]


def _policy_from_file(path: str | Path, *, expected_sha256: str | None) -> tuple[Any, dict[str, Any]]:
    """The deterministic policy of a checkpoint (``*.pt``) or bundle (``*.zip``) on the CPU.

    Returns:
        ``(policy, info)``: ``policy`` maps obs (1, obs_dim) float32 to action (1, N) in
        [-1, 1]; ``info`` is ``{"kind", "algorithm", "tickers", "feature_names"}``.
    """
    path = Path(path)
    if path.suffix == ".zip":
        from trainer.bundle import load_agent

        loaded = load_agent(path)
        info = {
            "kind": "bundle",
            "algorithm": loaded.algorithm,
            "tickers": list(loaded.tickers),
            "feature_names": list(loaded.feature_names),
        }
        return loaded.policy_fn("cpu"), info

    from trainer.agents import make_agent
    from trainer.checkpoints import load_checkpoint

    state = load_checkpoint(path, expected_sha256=expected_sha256)
    agent = make_agent(
        state["algorithm"],
        int(state["obs_dim"]),
        int(state["action_dim"]),
        dict(state["hyperparameters"]),
        device="cpu",
    )
    agent.load_state_dict(state["agent"])
    layout = state.get("observation_layout") or {}
    info = {
        "kind": "checkpoint",
        "algorithm": state["algorithm"],
        "tickers": list(layout.get("tickers") or []),
        "feature_names": list(layout.get("feature_names") or []),
    }
    return agent.policy_module(), info


def backtest_agent(
    *,
    agent_path: str | Path,
    task: dict[str, Any],
    start: str,
    end: str,
    benchmark_path: str | Path,
    expected_sha256: str | None = None,
    data_dir: str | None = None,
    cache_dir: str | None = None,
) -> dict[str, Any]:
    """Backtest a stored agent over ``[start, end]`` with ``trainer.backtest.run_backtest``.

    The market data is the task's (same files, tickers and indicators the agent trained on,
    indicators computed over the whole file so the first backtest day has its full history);
    the trading rules are the task's env (costs, hmax, initial cash). QQQ's adjusted close
    from ``benchmark_path`` and an equal-weight buy-and-hold of the tickers are the benchmarks.

    Args:
        agent_path: local checkpoint (``*.pt``) or bundle (``*.zip``).
        task: the run's ``TaskSpec`` dict (``webapp.runs.services.task_spec``).
        start, end: first and last day, ``YYYY-MM-DD``, inclusive.
        benchmark_path: daily price file holding QQQ (setting ``PADDOCK_BENCHMARK_FILE``).
        expected_sha256: checkpoint digest to verify (tampering/corruption).

    Returns:
        ``{"daily": DataFrame, "metrics": {"agent", "equal_weight", "QQQ"}, "tickers",
        "env_config", "start", "end", "num_days", "metric_contract", "notes", "policy"}``.
        ``daily`` is indexed by date (``DatetimeIndex``) with the engine's columns
        (``account_value``, ``cash``, ``holdings_<T>``, ``trades_<T>``, ``traded_value``,
        ``costs``, ``turnover``; USD, shares, fractions) plus ``benchmark_equal_weight`` and
        ``benchmark_QQQ`` (USD value from the same initial capital). Everything else is JSON-able.

    Raises:
        trainer.errors.TrainerError: the agent file is unreadable or does not fit the data
            (``BundleError``/``DataError`` naming the field), or the range is outside the data.
    """
    from trainer.backtest.engine import run_backtest
    from trainer.backtest.metrics import METRIC_CONTRACT
    from trainer.errors import DataError
    from trainer.task import TaskSpec

    spec = TaskSpec.from_dict(task)
    policy, info = _policy_from_file(agent_path, expected_sha256=expected_sha256)
    market = _market_data(spec, data_dir=data_dir, cache_dir=cache_dir)
    if info["feature_names"] and list(market.feature_names) != info["feature_names"]:
        raise DataError(
            f"the agent reads indicators {info['feature_names']}, the data has {list(market.feature_names)}",
            field="indicators",
        )
    result = run_backtest(
        policy,
        market,
        spec.env,
        benchmark_close=_benchmark_close(benchmark_path, BENCHMARK_TICKER),
        start=start,
        end=end,
        tickers=info["tickers"] or None,
        device="cpu",
    )
    daily = result.daily.copy()
    for column in result.benchmarks.columns:
        daily[f"benchmark_{column}"] = result.benchmarks[column].to_numpy()
    return {
        "daily": daily,
        "metrics": _jsonable(result.metrics),
        "tickers": list(result.tickers),
        "env_config": _jsonable(result.env_config.to_dict()),
        "start": str(daily.index[0].date()),
        "end": str(daily.index[-1].date()),
        "num_days": int(len(daily)),
        "metric_contract": METRIC_CONTRACT,
        "notes": [str(n) for n in result.notes],
        "policy": {"kind": info["kind"], "algorithm": info["algorithm"]},
    }


def series_metrics(values: Any, benchmark_values: Any = None, turnover: Any = None) -> dict[str, Any]:
    """``trainer.backtest.metrics.compute_metrics`` of an account-value series.

    Args:
        values: (T,) positive USD values indexed by increasing dates (pandas Series).
        benchmark_values: optional (T,) benchmark values on the same dates (QQQ).
        turnover: optional (T',) daily turnover fractions of the days traded.

    Returns:
        The metrics dict (JSON-able; undefined values are ``None``).

    Raises:
        AppError: the series cannot be scored (non-positive values, fewer than 2 days).
    """
    from trainer.backtest.metrics import compute_metrics, returns_from_values

    if len(values) < 2:
        raise AppError("at least 2 days are needed to compute metrics", fields={"dates": "fewer than 2 days"})
    try:
        bench = returns_from_values(benchmark_values) if benchmark_values is not None else None
        return _jsonable(
            compute_metrics(returns_from_values(values), bench, turnover=turnover, start_date=values.index[0])
        )
    except TrainerError as exc:
        raise AppError.from_trainer(exc) from exc


# --- agent bundles -------------------------------------------------------------------------


def export_bundle(checkpoint_path: str | Path, out_path: str | Path) -> str:
    """Write the downloadable bundle zip of a local checkpoint (``trainer.bundle.export_bundle``).

    Args:
        checkpoint_path: a local checkpoint file written by :func:`train_generation` (copy a
            stored one to a local file first; the storage may be remote).
        out_path: destination zip, written atomically.

    Returns:
        Hex SHA-256 of the zip (exporting the same checkpoint twice gives the same bytes).

    Raises:
        AppError: the checkpoint is missing, corrupt or does not rebuild into an agent (400).
    """
    from trainer.bundle import export_bundle as export

    try:
        return str(export(str(checkpoint_path), str(out_path)))
    except TrainerError as exc:
        raise AppError.from_trainer(exc) from exc


# --- demo: data download and training-throughput calibration --------------------------------


def download_daily_bars(tickers: Sequence[str], *, start: str, end: str, out_path: str | Path) -> dict[str, Any]:
    """Download daily bars from Yahoo Finance (``trainer.data.download_yfinance``) into a file.

    The file is a gzipped long CSV ``date, tic, open, high, low, close, volume`` with prices
    already adjusted (the loader reads it back like any other file); it is written atomically
    (temporary file + rename), so an interrupted download leaves nothing behind.

    Args:
        tickers: Yahoo symbols.
        start, end: inclusive ``YYYY-MM-DD`` range.
        out_path: the ``.csv.gz`` file to write; its folder is created.

    Returns:
        ``{"tickers": [...], "start", "end", "rows", "notes": [...]}`` of what was written.

    Raises:
        AppError: the download failed (no network, unknown symbol, empty answer), naming why.
    """
    import os

    from trainer.data import download_yfinance

    try:
        panel = download_yfinance(list(tickers), str(start), str(end))
    except TrainerError as exc:
        raise AppError.from_trainer(exc, prefix="") from exc
    except Exception as exc:  # yfinance surfaces network failures as assorted exception types
        raise AppError(
            f"downloading {', '.join(tickers)} from Yahoo Finance failed: {type(exc).__name__}: {exc}",
            fields={"download": str(exc)[:300]},
        ) from exc
    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    frame = panel[["date", "tic", "open", "high", "low", "close", "volume"]].copy()
    frame["date"] = frame["date"].dt.strftime("%Y-%m-%d")
    frame.to_csv(tmp, index=False, compression="gzip")
    os.replace(tmp, out)
    return {
        "tickers": sorted(str(t) for t in panel["tic"].unique()),
        "start": str(frame["date"].min()),
        "end": str(frame["date"].max()),
        "rows": int(len(frame)),
        "notes": [str(n) for n in panel.attrs.get("notes", [])],
    }


def measure_training_throughput(
    task: dict[str, Any],
    *,
    device: str = "auto",
    seconds: float = 4.0,
    data_dir: str | None = None,
    cache_dir: str | None = None,
) -> dict[str, Any]:
    """Measure how many env steps per second the task's agent learns on this machine.

    One warm-up update (allocations, first kernels) is not timed; then the agent learns in
    whole rollouts until ``seconds`` have passed. The count includes the network updates, so
    it is the rate a generation trains at (evaluation and checkpointing come on top).

    Args:
        task: a normalized task spec (``validate_task``'s output); its hyperparameters set the
            env count and network sizes.
        device: ``"auto"``, ``"cpu"``, ``"cuda"``...
        seconds: measuring time after the warm-up (> 0).
        data_dir, cache_dir: as for :func:`train_generation` (the processed data is cached,
            so a worker training the same task afterwards starts at once).

    Returns:
        ``{"steps_per_s": float, "env_steps": int, "seconds": float, "device": str}``.

    Raises:
        trainer.errors.TrainerError: bad data or config.
    """
    import time

    import torch

    from trainer.agents import make_agent
    from trainer.device import pick_device
    from trainer.envs.stock_trading import StockTradingVecEnv
    from trainer.task import TaskSpec

    spec = TaskSpec.from_dict(task)
    torch_device = pick_device(device)
    market = _market_data(spec, data_dir=data_dir, cache_dir=cache_dir)
    train = market.slice(*spec.train, name="train")
    hp = dict(spec.hyperparameters)
    env = StockTradingVecEnv(train, spec.env, num_envs=int(hp["num_envs"]), device=torch_device, seed=0)
    agent = make_agent(spec.algorithm, env.obs_dim, env.action_dim, hp, device=torch_device, seed=0)
    chunk = int(hp["num_envs"]) * int(hp.get("rollout_steps", 1))
    agent.learn(env, chunk)

    def sync() -> None:
        if torch_device.type == "cuda":
            torch.cuda.synchronize(torch_device)

    sync()
    begun = time.perf_counter()
    done = 0
    while True:
        stats = agent.learn(env, chunk)
        done += int(stats.get("env_steps", chunk))
        sync()
        elapsed = time.perf_counter() - begun
        if elapsed >= seconds:
            break
    return {"steps_per_s": done / elapsed, "env_steps": done, "seconds": elapsed, "device": str(torch_device)}
