"""Backtests of stored agents, metrics of account series, and agent bundle export."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from trainer.errors import TrainerError
from trainer.util.jsonable import to_jsonable
from webapp.core.errors import AppError
from webapp.engine.market import _market_data, _ticker_days, input_limits

#: The benchmark's ticker in the ``PADDOCK_BENCHMARK_FILE`` price file (adjusted close).
BENCHMARK_TICKER = "QQQ"

_benchmark_cache: dict[tuple[str, float, str], Any] = {}
_intraday_holders: dict[tuple[str, float], bool] = {}


def _benchmark_close(path: str | Path, ticker: str) -> Any:
    """QQQ's adjusted close (``trainer.backtest.engine.load_benchmark_close``), kept per worker
    process (the last 4 files) and reloaded when the file changes."""
    from trainer.backtest.benchmark import load_benchmark_close

    p = Path(path)
    key = (str(p), p.stat().st_mtime if p.exists() else 0.0, ticker)
    if key not in _benchmark_cache:
        while len(_benchmark_cache) >= 4:
            _benchmark_cache.pop(next(iter(_benchmark_cache)))
        _benchmark_cache[key] = load_benchmark_close(p, ticker=ticker)
    return _benchmark_cache[key]


def benchmark_path_for(paths: Sequence[str | Path], *, default: str | Path, data_dir: str | Path | None = None) -> Path:
    """The file QQQ is read from for a task on ``paths``.

    The first data file holding **intraday** QQQ bars (QQQ's bars from the same file as the
    agent's: backtests compare bar by bar), else ``default`` (``PADDOCK_BENCHMARK_FILE``, daily:
    an intraday backtest then compares at session closes, see
    ``trainer.backtest.benchmark``). Decided once per process and file version.

    Args:
        paths: the task's data files (relative ones resolve against ``data_dir``).
        default: ``PADDOCK_BENCHMARK_FILE``.

    Raises:
        AppError: a data file holding QQQ cannot be read.
    """
    from trainer.data.files import expand_paths, ticker_days
    from trainer.data.sessions import is_intraday

    resolved = [Path(data_dir) / p if data_dir is not None and not Path(p).is_absolute() else Path(p) for p in paths]
    try:
        for path in expand_paths(resolved):
            key = (str(path), path.stat().st_mtime)
            if key not in _intraday_holders:
                holds = bool(len(ticker_days([path], tickers=[BENCHMARK_TICKER])))
                _intraday_holders[key] = holds and is_intraday(_benchmark_close(path, BENCHMARK_TICKER).index)
            if _intraday_holders[key]:
                return path
    except TrainerError as exc:
        raise AppError.from_trainer(exc) from exc
    return Path(default)


def validation_benchmark_returns(
    paths: Sequence[str | Path], dates: Any, *, default: str | Path | None, data_dir: str | Path | None = None
) -> Any:
    """QQQ's returns for a generation's validation baseline, or None.

    None without a readable file, and when its bars do not match the data's (daily QQQ for an
    intraday task: the validation compares bar returns; the backtests then use session closes).
    """
    from trainer.data.sessions import is_intraday

    if default is None:
        return None
    try:
        path = benchmark_path_for(paths, default=default, data_dir=data_dir)
        if not path.exists():
            return None
        close = _benchmark_close(path, BENCHMARK_TICKER)
    except (TrainerError, AppError):
        return None  # the baseline is optional here; backtests report the file's problem
    if is_intraday(close.index) != is_intraday(dates):
        return None
    return close.pct_change().dropna()


def check_backtest_days(
    start: str, end: str, *, paths: Sequence[str | Path], tickers: Sequence[str], intraday: bool = False
) -> int:
    """Refuse a backtest range holding fewer than ``trainer.data.splits.MIN_RANGE_DAYS`` (20)
    trading days of ``tickers`` in the files, before the backtest is queued (the worker's
    ``run_backtest`` refuses it too, but only after the queue). Only the date and ticker columns
    are read, once per process and file version.

    Args:
        start, end: the range's bounds (days, or ``YYYY-MM-DD HH:MM`` moments when ``intraday``).
        paths: the dataset's data files; tickers: the ones the backtest trades.

    Returns:
        The trading days in the range.

    Raises:
        AppError: 400 naming ``end`` (``"the range 2021-01-04 to 2021-01-05 holds 2 trading
            day(s); it needs at least 20 (...)"``), or ``start``/``end`` outside the data.
    """
    from trainer.data.splits import check_range_days

    try:
        pairs = _ticker_days(paths, tickers)
        days = np.unique(pairs["date"].to_numpy().astype("datetime64[D]"))
        return check_range_days(start, end, days, intraday=intraday)
    except TrainerError as exc:
        raise AppError.from_trainer(exc) from exc


def _policy_from_file(path: str | Path, *, expected_sha256: str | None) -> tuple[Any, dict[str, Any]]:
    """The deterministic policy of a checkpoint (``*.pt``) or bundle (``*.zip``) on the CPU.

    Returns:
        ``(policy, info)``: ``policy`` maps obs (1, obs_dim) float32 to action (1, N) in
        [-1, 1]; ``info`` is ``{"kind", "algorithm", "tickers", "feature_names"}``.
    """
    path = Path(path)
    if path.suffix == ".zip":
        from trainer.artifacts.bundle_reader import load_agent

        loaded = load_agent(path, limits=input_limits())
        info = {
            "kind": "bundle",
            "algorithm": loaded.algorithm,
            "tickers": list(loaded.tickers),
            "feature_names": list(loaded.feature_names),
            "feature_stats": loaded.config.get("feature_stats"),
        }
        return loaded.policy_fn("cpu"), info

    from trainer.artifacts.checkpoints import load_checkpoint
    from trainer.artifacts.rebuild import build_agent

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


@dataclass(frozen=True)
class AgentBacktest:
    """What :func:`backtest_agent` returns.

    Attributes:
        daily: DataFrame indexed by date (``DatetimeIndex``) with the engine's columns
            (``account_value``, ``cash``, ``holdings_<T>``, ``trades_<T>``, ``traded_value``,
            ``costs``, ``turnover``; USD, shares, fractions) plus ``benchmark_equal_weight`` and
            ``benchmark_QQQ`` (USD value from the same initial capital).
        metrics: ``{"agent": {...}, "equal_weight": {...}, "QQQ": {...}}`` (JSON-able).
        tickers: the traded tickers, in the policy's action order.
        env_config: the trading rules used (JSON-able).
        start, end: first and last day, ``YYYY-MM-DD``.
        num_days: trading days (sessions) in the window.
        metric_contract: how the metrics are defined (``trainer.backtest.metrics``).
        notes: what the backtest engine noted.
        policy: ``{"kind": "checkpoint" | "bundle", "algorithm": ...}``.
        price_basis: ``{"agent", "benchmark"}``, the close each side used, read from the
            files: ``"adjusted close"`` or ``"raw close"``.
        benchmark: ``{"file", "basis", "note"}``: the file QQQ was read from (the data file
            itself when it holds intraday QQQ bars), the comparison basis (``"daily"``,
            ``"bars"``, ``"session_closes"``, see ``trainer.backtest.benchmark``) and the
            sentence saying so.
    """

    daily: Any
    metrics: dict[str, Any]
    tickers: list[str]
    env_config: dict[str, Any]
    start: str
    end: str
    num_days: int
    metric_contract: str
    notes: list[str]
    policy: dict[str, Any]
    price_basis: dict[str, str] = field(default_factory=dict)
    benchmark: dict[str, str] = field(default_factory=dict)


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
) -> AgentBacktest:
    """Backtest a stored agent over ``[start, end]`` with ``trainer.backtest.run_backtest``.

    The market data is the task's (same files, tickers and indicators the agent trained on,
    indicators computed over the whole file so the first backtest day has its full history);
    the trading rules are the task's env (costs, hmax, initial cash). QQQ's adjusted close
    from ``benchmark_path`` and an equal-weight buy-and-hold of the tickers are the benchmarks.

    Args:
        agent_path: local checkpoint (``*.pt``) or bundle (``*.zip``).
        task: the run's ``TaskSpec`` dict (``webapp.runs.selectors.runs.task_spec``).
        start, end: first and last day, ``YYYY-MM-DD``, inclusive.
        benchmark_path: daily price file holding QQQ (setting ``PADDOCK_BENCHMARK_FILE``).
        expected_sha256: checkpoint digest to verify (tampering/corruption).
        agent_name: who the agent is in errors, e.g. ``"agent 12"``.

    Returns:
        :class:`AgentBacktest`.

    Raises:
        trainer.errors.TrainerError: the agent file is unreadable or does not fit the data
            (``BundleError``/``DataError`` naming the field), or the range is outside the data;
            the agent diverged: its parameters hold NaN or inf (``BundleError``) or its policy
            emits such actions (``PolicyError``), each message naming ``agent_name``.
    """
    from trainer.backtest.contract import METRIC_CONTRACT
    from trainer.backtest.engine import run_backtest
    from trainer.envs.kinds import prepare_market
    from trainer.envs.observations import FeatureStats
    from trainer.errors import BundleError, DataError
    from trainer.task import TaskSpec

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
    benchmark_path = benchmark_path_for(spec.data.paths, default=benchmark_path, data_dir=data_dir)
    result = run_backtest(
        policy,
        market,
        spec.env,
        benchmark_close=_benchmark_close(benchmark_path, BENCHMARK_TICKER),
        start=start,
        end=end,
        tickers=info["tickers"] or None,
        device="cpu",
        feature_stats=stats,
        policy_name=agent_name,
    )
    from trainer.data.files import price_basis

    basis = {"agent": price_basis(list(spec.data.paths)), "benchmark": price_basis(benchmark_path)}
    daily = result.daily.copy()
    for column in result.benchmarks.columns:
        daily[f"benchmark_{column}"] = result.benchmarks[column].to_numpy()
    return AgentBacktest(
        daily=daily,
        metrics=to_jsonable(result.metrics),
        tickers=list(result.tickers),
        env_config=to_jsonable(result.env_config.to_dict()),
        start=str(daily.index[0].date()),
        end=str(daily.index[-1].date()),
        num_days=int(daily.index.normalize().nunique()),  # sessions: an intraday day has many rows
        metric_contract=METRIC_CONTRACT,
        notes=[str(n) for n in result.notes],
        policy={"kind": info["kind"], "algorithm": info["algorithm"]},
        price_basis=basis,
        benchmark={
            "file": Path(benchmark_path).name,
            "basis": result.benchmark_basis,
            "note": next((n for n in result.notes if n.startswith(f"{BENCHMARK_TICKER}:")), ""),
        },
    )


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
        return to_jsonable(
            compute_metrics(returns_from_values(values), bench, turnover=turnover, start_date=values.index[0])
        )
    except TrainerError as exc:
        raise AppError.from_trainer(exc) from exc


def export_bundle(
    checkpoint_path: str | Path,
    out_path: str | Path,
    *,
    ensemble_members: Sequence[dict[str, Any]] | None = None,
    total_env_steps: int | None = None,
    provenance: dict[str, Any] | None = None,
    test_metrics: dict[str, Any] | None = None,
) -> str:
    """Write the downloadable bundle zip of a local checkpoint (``trainer.artifacts.bundle.export_bundle``).

    Args:
        checkpoint_path: a local checkpoint file written by :func:`train_generation` (copy a
            stored one to a local file first; the storage may be remote).
        out_path: destination zip, written atomically.
        ensemble_members, total_env_steps: ensembles only: each member's ``{"id", "generation"}``
            (agent id and lineage depth, checkpoint order) and the env steps of their lines,
            each agent once (``Agent.total_env_steps``).
        provenance: ``Agent.provenance`` (code version, packages, data hash, seed).
        test_metrics: a backtest of the test split (``start``, ``end`` and the metrics of
            ``agent``, ``QQQ``, ``equal_weight``), shown on the model card.

    Returns:
        Hex SHA-256 of the zip (exporting the same checkpoint twice gives the same bytes).

    Raises:
        AppError: the checkpoint is missing, corrupt or does not rebuild into an agent (400).
    """
    from trainer.artifacts.bundle import export_bundle as export

    try:
        return str(
            export(
                str(checkpoint_path),
                str(out_path),
                ensemble_members=ensemble_members,
                total_env_steps=total_env_steps,
                provenance=provenance,
                test_metrics=test_metrics,
            )
        )
    except TrainerError as exc:
        raise AppError.from_trainer(exc) from exc


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

    from trainer.backtest.benchmark import load_benchmark_close

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


def deflated_sharpe_ratio(
    annual_sharpe: float,
    *,
    num_trials: int,
    annual_sharpe_variance: float,
    num_observations: int,
    periods_per_year: float | None = None,
) -> float | None:
    """Deflated Sharpe Ratio of an agent (``trainer.selection.deflated_sharpe_ratio``, Bailey &
    López de Prado 2014) from annualised figures: its validation Sharpe ratio, the number of
    agents the run evaluated and the variance of their Sharpe ratios, converted to per-period
    ones (divided by sqrt(P) and P, P the data's periods per year: 252 for daily data, bars per
    session x 252 for intraday bars); returns are taken as normal (skewness 0, kurtosis 3).

    Args:
        num_observations: the agent's number of validation returns, in the same periods (days
            or bars).
        periods_per_year: P; ``None`` means daily data (252).

    Returns:
        The probability in [0, 1] that the agent's true Sharpe ratio is above the best one
        expected from ``num_trials`` agents of no skill; ``None`` when undefined.
    """
    from trainer.selection import deflated_sharpe_ratio_annualised

    return deflated_sharpe_ratio_annualised(
        annual_sharpe,
        num_trials=num_trials,
        annual_sharpe_variance=annual_sharpe_variance,
        num_observations=num_observations,
        periods_per_year=periods_per_year,
    )


def deflated_information_ratio(
    information_ratio: float,
    *,
    num_observations: int,
    skewness: float,
    kurtosis: float,
    num_trials: int,
    trial_variance: float,
    periods_per_year: float | None = None,
) -> float | None:
    """Deflated Sharpe Ratio against 1/N: of an agent's annualised information ratio over the
    cost-free 1/N (``trainer.backtest.relative.deflated_information_ratio_annualised``, Bailey &
    López de Prado 2014 applied to the active returns), with ``num_trials`` from the trial ledger
    and ``trial_variance`` the variance of their annualised information ratios; ``periods_per_year``
    ``None`` means daily data (252)."""
    from trainer.backtest.relative import deflated_information_ratio_annualised

    return deflated_information_ratio_annualised(
        information_ratio,
        num_observations=num_observations,
        skewness=skewness,
        kurtosis=kurtosis,
        num_trials=num_trials,
        trial_variance=trial_variance,
        periods_per_year=float(periods_per_year or 252),
    )


def withheld_metrics(metrics: dict[str, Any]) -> dict[str, str]:
    """The annualised figures a page or export must not show for a short window, and the text
    it shows instead (``trainer.backtest.metrics``: fewer than 63 trading days).

    Returns:
        ``{key: "n/a (window shorter than 63 days)"}``; empty for a long enough window.
    """
    if not (metrics or {}).get("short_window"):
        return {}  # before the import: it loads torch, which pages of long windows never need
    from trainer.backtest.contract import ANNUALISED_KEYS, short_window_text

    text = short_window_text(int(metrics.get("min_annualised_days") or 63))
    return {key: text for key in ANNUALISED_KEYS}
