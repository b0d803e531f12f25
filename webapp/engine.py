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

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# also the names the rest of webapp catches them by (Diverged is a TrainerError: catch it first)
from trainer.errors import Diverged as Diverged  # re-exported
from trainer.errors import TrainerError
from webapp.core.errors import AppError


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
        "rows": int}``, notes being the loader's report (adjustments, merged duplicates) and
        every ticker that starts late, ends early or misses days (named with the dates).

    Raises:
        AppError: the files cannot be used (missing, bad rows, unknown tickers), naming the
            file, row or ticker in ``fields``.
    """
    from trainer.data.loading import load_panel
    from trainer.data.pipeline import coverage_notes

    try:
        panel = load_panel([str(p) for p in paths], tickers=tickers)
    except TrainerError as exc:
        raise AppError.from_trainer(exc, prefix="") from exc
    if panel.empty:
        raise AppError("the files hold no rows", fields={"paths": "the files hold no rows"})
    dates = panel["date"]
    notes = [str(n) for n in panel.attrs.get("notes", [])] + coverage_notes(panel[["date", "tic"]])
    return {
        "tickers": sorted(str(t) for t in panel["tic"].unique()),
        "start": dates.min().strftime("%Y-%m-%d"),
        "end": dates.max().strftime("%Y-%m-%d"),
        "notes": notes,
        "rows": int(len(panel)),
    }


def clean_tickers(values: Sequence[Any], *, field: str = "tickers") -> list[str]:
    """Ticker symbols a user typed, stripped and upper-cased (``trainer.data.loading.check_ticker``:
    1 to 20 letters, digits, ``.``, ``-``, ``^``, ``=``).

    Raises:
        AppError: 400 naming ``<field>.<i>``; control characters in the value are escaped.
    """
    from trainer.data.loading import check_ticker

    out = []
    for i, value in enumerate(values):
        try:
            out.append(check_ticker(value, field=f"{field}.{i}"))
        except TrainerError as exc:
            raise AppError.from_trainer(exc) from exc
    return out


# --- tasks ---------------------------------------------------------------------------------


def algorithms() -> tuple[str, ...]:
    """Names of the trainer's algorithms, in the order forms list them (``trainer.agents.ALGORITHMS``)."""
    from trainer.agents import ALGORITHMS

    return tuple(ALGORITHMS)


def validate_task(spec: dict[str, Any]) -> dict[str, Any]:
    """Validate a task spec with the trainer's own config classes and normalize it.

    Args:
        spec: ``trainer.pod.TaskSpec`` dict: ``data`` (DataSpec dict), ``train``,
            ``validation``, ``test`` (``[start, end]``), ``env`` (EnvConfig dict),
            ``algorithm``, ``hyperparameters``.

    Returns:
        ``TaskSpec.from_dict(spec).to_dict()``: defaults filled in, JSON-able.

    Raises:
        AppError: a bad value; ``fields`` names it with a dotted path (``env.hmax``,
            ``hyperparameters.learning_rate``).
    """
    from trainer.pod import TaskSpec

    try:
        return TaskSpec.from_dict(spec).to_dict()
    except TrainerError as exc:
        raise AppError.from_trainer(exc) from exc


def validate_hyperparameters(algorithm: str, hyperparameters: dict[str, Any]) -> dict[str, Any]:
    """The algorithm's full hyperparameters with ``hyperparameters`` applied and validated.

    Raises:
        AppError: unknown key or bad value (field ``hyperparameters.<key>``), unknown algorithm.
    """
    from trainer.pod import validate_hyperparameters as validate

    try:
        return validate(algorithm, hyperparameters)
    except TrainerError as exc:
        raise AppError.from_trainer(exc) from exc


_days_cache: OrderedDict[tuple, Any] = OrderedDict()
_DAYS_CACHE_SIZE = 16


def _ticker_days(paths: Sequence[str | Path], tickers: Sequence[str] | None = None) -> Any:
    """``trainer.data.loading.ticker_days`` of the files, kept per process and file version."""
    from trainer.data.loading import ticker_days

    key = (
        tuple((str(p), Path(p).stat().st_mtime_ns if Path(p).exists() else 0) for p in paths),
        None if tickers is None else tuple(sorted(tickers)),
    )
    with _market_lock:
        pairs = _days_cache.get(key)
    if pairs is None:
        pairs = ticker_days([str(p) for p in paths], tickers=tickers)
        with _market_lock:
            _days_cache[key] = pairs
            while len(_days_cache) > _DAYS_CACHE_SIZE:
                _days_cache.popitem(last=False)
    return pairs


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
) -> dict[str, Any]:
    """Decide a task's tickers over its range and check its splits, when the task is created.

    The same rules training applies (``trainer.data.pipeline.plan_tickers``: late listings,
    early ends and gaps judged against train.start to test.end), then the splits against the
    trading days of the kept tickers (``check_split_days``: train 126, validation 20, test 20
    days at least) and against the benchmark file (QQQ must cover every split, so that the
    validation score and the backtests have their baseline). Only the date and ticker columns
    are read, once per process and file version: no prices, indicators or torch.

    Args:
        splits: ``{"train": {"start", "end"}, ...}`` as ``validate_task`` returns them.
        paths: absolute data file paths of the dataset.
        tickers: the dataset's tickers (``named=False``) or the ones the user named.
        named: the user named ``tickers``: one that cannot cover the range is a 400 naming it,
            its first and last day and the range; otherwise it is dropped with a note.
        file_names: server path -> the name the user knows the file by.
        benchmark_path: ``PADDOCK_BENCHMARK_FILE``.

    Returns:
        ``{"tickers": [...] traded, "notes": [...]}``: every decision (dropped tickers,
        forward-filled days, warm-up days, a split starting after the data's first day).

    Raises:
        AppError: naming ``tickers``, ``<split>.start`` or ``<split>.end``; or an unreadable file.
    """
    from trainer.data.pipeline import plan_tickers
    from trainer.data.splits import check_coverage, check_split_days

    ranges = _as_pairs(splits)
    shown = ", ".join(sorted(set(file_names.values()))) or "the data"
    try:
        pairs = _ticker_days(paths, tickers)
        plan = plan_tickers(
            pairs, tickers=list(tickers) if named else None, start=ranges["train"][0], end=ranges["test"][1]
        )
        kept = list(plan.tickers)
        days = np.unique(pairs.loc[pairs["tic"].isin(kept), "date"].to_numpy().astype("datetime64[D]"))
        check_split_days(ranges, days)
        notes = check_coverage(ranges, days, what="data", file=shown, strict_start=False)
    except TrainerError as exc:
        raise AppError.from_trainer(exc).with_names(file_names) from exc
    check_benchmark_coverage(splits, benchmark_path=benchmark_path)
    return {"tickers": kept, "notes": plan.all_notes() + notes}


def min_env_steps(algorithm: str, hyperparameters: dict[str, Any]) -> int:
    """Env steps of one learning chunk (``trainer.pod.min_env_steps``): one rollout
    (``num_envs x rollout_steps``) for PPO and A2C, one vector step (``num_envs``) off-policy."""
    from trainer.pod import min_env_steps as chunk

    return chunk(algorithm, hyperparameters)


def check_generation_steps(algorithm: str, hyperparameters: dict[str, Any], generation_steps: int) -> None:
    """Refuse generations shorter than one PPO rollout or one SAC vector step
    (``trainer.pod.check_env_steps``).

    Raises:
        AppError: naming ``generation_steps``.
    """
    from trainer.pod import check_env_steps

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


_market_cache: OrderedDict[str, Any] = OrderedDict()
_market_lock = threading.Lock()
_MARKET_CACHE_SIZE = 4


def _market_data(task_spec: Any, *, data_dir: str | None, cache_dir: str | None) -> Any:
    """The task's processed market data, kept in memory between generations of one worker
    process (a generation then starts without re-reading the files)."""
    return _market_data_of(task_spec.data, data_dir=data_dir, cache_dir=cache_dir)


def _market_data_of(data_spec: Any, *, data_dir: str | None, cache_dir: str | None) -> Any:
    """:func:`_market_data` for a ``trainer.data.DataSpec`` (the LRU of this process)."""
    from trainer.data import load_market_data

    key = repr(data_spec.to_dict())
    with _market_lock:
        if key in _market_cache:
            _market_cache.move_to_end(key)
            return _market_cache[key]
    data = load_market_data(data_spec, data_dir=data_dir, cache_dir=cache_dir)
    with _market_lock:
        _market_cache[key] = data
        while len(_market_cache) > _MARKET_CACHE_SIZE:
            _market_cache.popitem(last=False)
    return data


_serving_cache: Any = None
_serving_lock = threading.Lock()


def serve_act(
    key: Any,
    bundle_path: str | Path,
    body: Any,
    *,
    cache_size: int,
    data_dir: str | None = None,
    cache_dir: str | None = None,
) -> dict[str, Any]:
    """Answer one act request with the agent's ONNX policy (``trainer.serving.answer``).

    One onnxruntime session per agent is kept in a process-wide LRU of ``cache_size``
    (``trainer.serving.PolicyCache``), reloaded when the bundle file changes; no torch code
    runs. ``{"date": ...}`` requests read the task's data files through the same in-memory
    cache as training.

    Args:
        key: the agent's id (cache key).
        bundle_path: local path of the agent's bundle zip.
        body: the decoded JSON body.
        cache_size: sessions kept (the first call's value sizes the cache).

    Returns:
        The JSON answer (see ``trainer/serving.py``).

    Raises:
        TrainerError: bad body (``DataError`` naming the field) or an unreadable bundle.
    """
    global _serving_cache
    from trainer.data import DataSpec
    from trainer.serving import PolicyCache, answer

    with _serving_lock:
        if _serving_cache is None:
            _serving_cache = PolicyCache(cache_size)
    policy = _serving_cache.get(key, bundle_path)

    def load_market() -> Any:
        spec = DataSpec.from_dict(policy.config["task"]["data"], prefix="data.")
        return _market_data_of(spec, data_dir=data_dir, cache_dir=cache_dir)

    return answer(policy, body, load_market=load_market)


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
    telemetry: Callable[[dict[str, Any]], None] | None = None,
    benchmark_path: str | Path | None = None,
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
        telemetry: called with each training-curve point (JSON-able) as the trainer records it.
        benchmark_path: the QQQ price file (``PADDOCK_BENCHMARK_FILE``); when readable, the
            validation metrics also hold the agent's excess return and Sharpe difference over
            QQQ on the same days (``metrics["vs_QQQ"]``).

    Returns:
        JSON-able ``{"sha256", "score", "metrics", "env_steps", "hyperparameters",
        "cancelled", "duration_s", "generation", "total_env_steps", "telemetry", "tickers"}``;
        ``score`` is ``None`` when the agent has none (NaN); ``generation`` is the depth in the
        lineage (1 = fresh), ``total_env_steps`` the line's env steps including this
        generation's, ``telemetry`` the training curve (``GenerationResult.telemetry``, at most
        50 points), ``tickers`` the ones the agent trades.

    Raises:
        trainer.errors.Diverged: training produced NaN or infinite numbers (no checkpoint is
            written); ``message`` is the one line for users, ``details["stats"]["env_steps"]``
            the env steps trained. A permanent failure of this generation, not of the task.
        trainer.errors.TrainerError: bad data or config (a permanent failure).
    """
    from trainer.pod import TaskSpec, run_generation

    spec = TaskSpec.from_dict(task)
    market = _market_data(spec, data_dir=data_dir, cache_dir=cache_dir)
    benchmark_returns = None
    if benchmark_path is not None and Path(benchmark_path).exists():
        try:
            benchmark_returns = _benchmark_close(benchmark_path, BENCHMARK_TICKER).pct_change().dropna()
        except TrainerError:
            benchmark_returns = None  # the baseline is optional here; backtests report the file's problem
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
        telemetry=None if telemetry is None else (lambda point: telemetry(_jsonable(point))),
        benchmark_returns=benchmark_returns,
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
        "generation": int(result.generation),
        "total_env_steps": int(result.total_env_steps),
        "telemetry": _jsonable(result.telemetry),
        "tickers": [str(t) for t in market.tickers],
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


def benchmark_values(path: str | Path, tickers: Sequence[str], dates: Any, initial_value: float) -> dict[str, Any]:
    """Buy-and-hold account values of extra benchmarks (SPY, DIA...) on a backtest's dates.

    Args:
        path: the benchmark price file (``PADDOCK_BENCHMARK_FILE``).
        tickers: benchmarks to value; one the file lacks, or that misses a date, is left out.
        dates: the backtest's ``DatetimeIndex``.
        initial_value: USD invested on the first date (the agent's initial capital).

    Returns:
        ``{ticker: pandas.Series}`` of USD values indexed by ``dates``.
    """
    import pandas as pd

    from trainer.backtest.engine import load_benchmark_close

    out = {}
    for ticker in tickers:
        try:
            close = load_benchmark_close(Path(path), ticker=ticker)
        except TrainerError:
            continue
        aligned = close.reindex(pd.DatetimeIndex(dates).normalize())
        if aligned.isna().any() or float(aligned.iloc[0]) <= 0:
            continue
        out[ticker] = pd.Series(aligned.to_numpy() / float(aligned.iloc[0]) * initial_value, index=dates, name=ticker)
    return out


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
            "feature_stats": loaded.config.get("feature_stats"),
        }
        return loaded.policy_fn("cpu"), info

    from trainer.bundle import build_agent, load_checkpoint

    state = load_checkpoint(path, expected_sha256=expected_sha256)
    agent = build_agent(state)  # refuses NaN or infinite parameters (a diverged agent)
    layout = state.get("observation_layout") or {}
    info = {
        "kind": "checkpoint",
        "algorithm": state["algorithm"],
        "tickers": list(layout.get("tickers") or []),
        "feature_names": list(layout.get("feature_names") or []),
        "feature_stats": state.get("feature_stats"),
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
    agent_name: str = "the agent",
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
        agent_name: who the agent is in errors, e.g. ``"agent 12"``.

    Returns:
        ``{"daily": DataFrame, "metrics": {"agent", "equal_weight", "QQQ"}, "tickers",
        "env_config", "start", "end", "num_days", "metric_contract", "notes", "policy",
        "price_basis"}`` (``price_basis``: ``{"agent", "benchmark"}``, the close each side used,
        read from the files: ``"adjusted close"`` or ``"raw close"``).
        ``daily`` is indexed by date (``DatetimeIndex``) with the engine's columns
        (``account_value``, ``cash``, ``holdings_<T>``, ``trades_<T>``, ``traded_value``,
        ``costs``, ``turnover``; USD, shares, fractions) plus ``benchmark_equal_weight`` and
        ``benchmark_QQQ`` (USD value from the same initial capital). Everything else is JSON-able.

    Raises:
        trainer.errors.TrainerError: the agent file is unreadable or does not fit the data
            (``BundleError``/``DataError`` naming the field), or the range is outside the data;
            the agent diverged: its parameters hold NaN or inf (``BundleError``) or its policy
            emits such actions (``PolicyError``), each message naming ``agent_name``.
    """
    from trainer.backtest.engine import run_backtest
    from trainer.backtest.metrics import METRIC_CONTRACT
    from trainer.envs.kinds import prepare_market
    from trainer.envs.observations import FeatureStats
    from trainer.errors import BundleError, DataError
    from trainer.pod import TaskSpec

    spec = TaskSpec.from_dict(task)
    try:
        policy, info = _policy_from_file(agent_path, expected_sha256=expected_sha256)
    except BundleError as exc:
        raise BundleError(f"{agent_name}: {exc.message}", **exc.details) from None
    # The agent's own universe over the backtest's own window: a ticker it trades that the
    # window lacks is an error naming it, never a silent change of universe.
    if info["tickers"]:
        spec.data.tickers = list(info["tickers"])
    # From the task's first day (or the backtest's, if earlier) to the backtest's last: the
    # indicators and the scale-free lookbacks (up to 63 days) of the first backtest day need the
    # days before it, exactly as in training and validation.
    first = str(start)[:10]
    spec.data.start = min(first, spec.data.start) if spec.data.start else first
    spec.data.end = str(end)[:10]
    market = _market_data(spec, data_dir=data_dir, cache_dir=cache_dir)
    read = prepare_market(market, spec.env).feature_names  # what the agent's observation holds
    if info["feature_names"] and list(read) != info["feature_names"]:
        raise DataError(
            f"the agent reads indicators {info['feature_names']}, the data has {list(read)}",
            field="indicators",
        )
    stats = FeatureStats.from_dict(info["feature_stats"]) if info.get("feature_stats") else None
    result = run_backtest(
        policy,
        market,
        spec.env,
        benchmark_close=_benchmark_close(benchmark_path, BENCHMARK_TICKER),
        start=start,
        end=end,
        tickers=info["tickers"] or None,
        device="cpu",
        policy_name=agent_name,
        feature_stats=stats,
    )
    from trainer.data.loading import price_basis

    basis = {"agent": price_basis(list(spec.data.paths)), "benchmark": price_basis(benchmark_path)}
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
        "price_basis": basis,
    }


def withheld_metrics(metrics: dict[str, Any]) -> dict[str, str]:
    """The annualised figures a page or export must not show for a short window, and the text
    it shows instead (``trainer.backtest.metrics``: fewer than 63 trading days).

    Returns:
        ``{key: "n/a (window shorter than 63 days)"}``; empty for a long enough window.
    """
    from trainer.backtest.metrics import ANNUALISED_KEYS, short_window_text

    if not (metrics or {}).get("short_window"):
        return {}
    text = short_window_text(int(metrics.get("min_annualised_days") or 63))
    return {key: text for key in ANNUALISED_KEYS}


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
        task: a normalized task spec (``validate_task``'s output) of any algorithm; its
            hyperparameters set the env count and network sizes. A chunk is one rollout
            (``num_envs x rollout_steps``) on-policy, one vector step (``num_envs``) off-policy.
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
    from trainer.envs.kinds import make_env, prepare_market
    from trainer.pod import TaskSpec

    spec = TaskSpec.from_dict(task)
    torch_device = pick_device(device)
    market = _market_data(spec, data_dir=data_dir, cache_dir=cache_dir)
    train = prepare_market(market, spec.env).slice(*spec.train, name="train")
    hp = dict(spec.hyperparameters)
    env = make_env(train, spec.env, num_envs=int(hp["num_envs"]), device=torch_device, seed=0)
    agent = make_agent(spec.algorithm, env.obs_dim, env.action_dim, hp, device=torch_device, seed=0)
    chunk = int(hp["num_envs"]) * int(hp.get("rollout_steps", 1))
    # Off-policy agents act at random without updates for their first ``learning_starts``
    # steps: the warm-up runs past them, so that the timed steps include the updates.
    warmup = max(chunk, -(-int(hp.get("learning_starts", 0)) // chunk) * chunk + chunk)
    agent.learn(env, warmup)

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


def deflated_sharpe_ratio(
    annual_sharpe: float, *, num_trials: int, annual_sharpe_variance: float, num_observations: int
) -> float | None:
    """Deflated Sharpe Ratio of an agent (``trainer.selection.deflated_sharpe_ratio``, Bailey &
    López de Prado 2014) from annualised figures: its validation Sharpe ratio, the number of
    agents the run evaluated and the variance of their Sharpe ratios, converted to daily ones
    (divided by sqrt(252) and 252); returns are taken as normal (skewness 0, kurtosis 3).

    Returns:
        The probability in [0, 1] that the agent's true Sharpe ratio is above the best one
        expected from ``num_trials`` agents of no skill; ``None`` when undefined.
    """
    import math

    from trainer.selection import TRADING_DAYS
    from trainer.selection import deflated_sharpe_ratio as dsr

    return dsr(
        annual_sharpe / math.sqrt(TRADING_DAYS),
        num_trials=int(num_trials),
        sharpe_variance=float(annual_sharpe_variance) / TRADING_DAYS,
        num_observations=int(num_observations),
    )


def build_ensemble(
    checkpoint_paths: Sequence[str | Path],
    out_path: str | Path,
    *,
    data_dir: str | None = None,
    cache_dir: str | None = None,
    benchmark_path: str | Path | None = None,
) -> dict[str, Any]:
    """Write the ensemble checkpoint of a run's agents (``trainer.ensemble.build_ensemble``),
    scored on the task's validation split by the task's rule like any generation.

    Returns:
        JSON-able ``{"sha256", "score", "metrics"}``.

    Raises:
        trainer.errors.TrainerError: fewer than 2 agents, agents of different observations, or
            an unreadable checkpoint (naming the field ``agents``).
    """
    from trainer.ensemble import build_ensemble as build
    from trainer.pod import TaskSpec, evaluate_checkpoint_state

    def evaluate(agent: Any, state: dict[str, Any]) -> dict[str, Any]:
        spec = TaskSpec.from_dict(state["task"])
        market = _market_data(spec, data_dir=data_dir, cache_dir=cache_dir)
        bench = None
        if benchmark_path is not None and Path(benchmark_path).exists():
            bench = _benchmark_close(benchmark_path, BENCHMARK_TICKER).pct_change().dropna()
        return evaluate_checkpoint_state(agent, state, market_data=market, benchmark_returns=bench)

    digest, state = build([str(p) for p in checkpoint_paths], out_path, evaluate=evaluate)
    score = state.get("score")
    return {
        "sha256": digest,
        "score": None if score is None or not np.isfinite(score) else float(score),
        "metrics": _jsonable(state.get("metrics") or {}),
    }
