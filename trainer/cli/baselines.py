"""The baselines ``python -m trainer`` prints next to every score: QQQ read from the benchmark
file, the untrained policy of the agent's algorithm and shape, and the Deflated Sharpe Ratio of
the best of a run's generations. Equal weight (1/N) comes with every evaluation
(:func:`trainer.evaluation.evaluate_policy`)."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from trainer.errors import TrainerError

__all__ = [
    "BENCHMARK_FILE_NAME",
    "BENCHMARK_TICKER",
    "Benchmark",
    "benchmark_file",
    "dsr_of_best",
    "load_benchmark",
    "untrained_metrics",
]

#: The benchmark's ticker, read from the benchmark file (adjusted close), as in the web app.
BENCHMARK_TICKER = "QQQ"
#: The benchmark file's name in the data folder when neither ``--benchmark`` nor
#: ``$PADDOCK_BENCHMARK_FILE`` names another (the web app's default too).
BENCHMARK_FILE_NAME = "benchmark_etfs_daily_eodhd.csv.gz"


def benchmark_file(args: argparse.Namespace) -> Path:
    """The file QQQ is read from: ``--benchmark FILE`` (a relative path from the current folder,
    else from ``--data-dir``), else ``$PADDOCK_BENCHMARK_FILE`` (a name or path; relative ones
    resolve against ``--data-dir``, as the web app's setting does), else
    :data:`BENCHMARK_FILE_NAME` in ``--data-dir``."""
    data_dir = Path(args.data_dir).expanduser() if getattr(args, "data_dir", None) else Path.cwd()
    typed = getattr(args, "benchmark", None)
    if typed:
        p = Path(typed).expanduser()
        if p.is_absolute() or p.exists() or not (data_dir / p).exists():
            return p.resolve()
        return (data_dir / p).resolve()
    name = os.environ.get("PADDOCK_BENCHMARK_FILE", "").strip() or BENCHMARK_FILE_NAME
    return (data_dir / Path(name).expanduser()).resolve()


class Benchmark:
    """QQQ's per-period returns for one window, or the one-line reason they are not shown.

    Attributes:
        returns: (T,) float64 simple returns indexed by the window's stamps (a
            ``DatetimeIndex``) covering every return of the window, or ``None``.
        file: the file read (or looked for).
        note: ``None`` when ``returns`` is set, else ``"QQQ not shown: <reason>"``.
    """

    def __init__(self, returns: pd.Series | None, file: Path, note: str | None) -> None:
        self.returns, self.file, self.note = returns, file, note

    def to_dict(self) -> dict[str, Any]:
        """JSON-able: ``ticker``, ``file``, ``shown`` (bool) and ``note``."""
        return {
            "ticker": BENCHMARK_TICKER,
            "file": str(self.file),
            "shown": self.returns is not None,
            "note": self.note,
        }


def _intraday_close(paths: Sequence[str], data_dir: str | None) -> tuple[pd.Series, Path] | None:
    """QQQ's intraday bars from the task's data files, as the web app prefers for intraday data."""
    from trainer.backtest.benchmark import intraday_benchmark_close

    resolved = [str(Path(data_dir) / p) if data_dir and not Path(p).is_absolute() else p for p in paths]
    try:
        return intraday_benchmark_close(resolved, ticker=BENCHMARK_TICKER)
    except TrainerError:
        return None


def load_benchmark(args: argparse.Namespace, dates: np.ndarray, *, data_paths: Sequence[str] = ()) -> Benchmark:
    """QQQ's returns over a window, for the ``vs QQQ`` comparison of :func:`evaluate_policy`.

    Args:
        args: the command's arguments (``benchmark``, ``data_dir``).
        dates: (T,) the window's ``MarketData.dates`` (days, or intraday bar-end stamps); the
            returns must cover ``dates[1:]``, the days the agent's returns fall on.
        data_paths: the task's data files; for intraday data without ``--benchmark`` the first
            of them holding intraday QQQ bars is used (QQQ compared bar by bar), as in the web app.

    Returns:
        :class:`Benchmark`; a missing or unreadable file, one without QQQ, or one that does not
        cover the window gives ``returns=None`` and a note saying why (never an error: the
        comparison is optional).
    """
    from trainer.backtest.benchmark import load_benchmark_close
    from trainer.data.sessions import is_intraday

    path = benchmark_file(args)
    wanted = pd.DatetimeIndex(np.asarray(dates).astype("datetime64[ns]"))
    intraday = is_intraday(wanted)
    close = None
    if intraday and not getattr(args, "benchmark", None):
        found = _intraday_close(data_paths, getattr(args, "data_dir", None))
        if found is not None:
            close, path = found
    if close is None:
        if not path.is_file():
            return Benchmark(None, path, f"QQQ not shown: no benchmark file {path} (--benchmark FILE names one)")
        try:
            close = load_benchmark_close(path, ticker=BENCHMARK_TICKER)
        except TrainerError as exc:
            return Benchmark(None, path, f"QQQ not shown: {path.name}: {exc.message}")
    if is_intraday(close.index) != intraday:
        kinds = ("intraday bars", "daily closes")
        held, data = kinds[0 if is_intraday(close.index) else 1], kinds[0 if intraday else 1]
        return Benchmark(None, path, f"QQQ not shown: {path.name} holds {held} of QQQ, the data {data}")
    returns = close.pct_change().dropna()
    if not intraday:
        returns.index = returns.index.normalize()
    needed = wanted[1:]
    missing = needed.difference(returns.index)
    if len(needed) and len(missing):
        first, last = close.index[0], close.index[-1]
        fmt = (lambda d: str(d)) if intraday else (lambda d: str(d.date()))
        return Benchmark(
            None,
            path,
            f"QQQ not shown: {path.name} covers {fmt(first)} to {fmt(last)} and lacks {len(missing)} of the "
            f"window's {len(needed)} return dates (first {fmt(missing[0])})",
        )
    return Benchmark(returns.reindex(needed).astype(np.float64), path, None)


def untrained_metrics(
    *,
    algorithm: str,
    obs_dim: int,
    action_dim: int,
    hyperparameters: Mapping[str, Any],
    seed: int,
    evaluate: Any,
) -> dict[str, Any]:
    """The untrained policy's figures on the window an agent was evaluated on: a fresh agent of
    the same algorithm, sizes and hyperparameters built with ``seed`` (what the agent's line
    started from), scored by ``evaluate`` (a policy -> :func:`evaluate_policy` dict).

    Returns:
        ``{"algorithm", "seed", "score", "score_note", "sharpe_ratio", "total_return",
        "short_window", "min_annualised_days"}``. Off-policy agents get a replay buffer of
        ``num_envs`` transitions (it holds no data before training and draws no random numbers,
        so the policy is the one a fresh agent of the task's buffer size starts with).
    """
    from trainer.agents import ALGORITHMS, make_agent

    hp = dict(hyperparameters)
    fields = getattr(ALGORITHMS[algorithm][1], "__dataclass_fields__", {})
    if "buffer_size" in fields:
        hp["buffer_size"] = int(hp.get("num_envs") or 1)
    agent = make_agent(algorithm, int(obs_dim), int(action_dim), hp, device="cpu", seed=int(seed))

    def policy(obs: Any) -> Any:
        return agent.act(obs, deterministic=True)

    metrics = evaluate(policy)
    keys = ("score", "score_note", "sharpe_ratio", "total_return", "short_window", "min_annualised_days")
    return {"algorithm": algorithm, "seed": int(seed), **{k: metrics.get(k) for k in keys}}


def dsr_of_best(best: Mapping[str, Any], evaluated: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Deflated Sharpe Ratio of the best agent of a ``train`` run (Bailey & López de Prado 2014,
    :func:`trainer.selection.deflated_sharpe_ratio`), as the web app computes it for its agents.

    ``N`` is the number of generations evaluated with a validation Sharpe ratio, the variance is
    the sample variance (ddof 1; 0 for one) of their annualised validation Sharpe ratios, ``T``
    the best agent's validation returns (days, or bars for intraday data); annualised figures are
    turned into per-period ones with the data's periods per year P (252 for days), returns taken
    as normal (skewness 0, kurtosis 3).

    Args:
        best: the best generation's validation metrics (:func:`evaluate_policy`).
        evaluated: the validation metrics of every generation evaluated (``best`` among them).

    Returns:
        ``{"value": probability in [0, 1] or None, "trials": N, "note": None or why it is
        n/a}``; n/a without a Sharpe ratio and on a validation window shorter than 63 days
        (the short-window rule of every Sharpe-based figure).
    """
    from trainer.backtest.contract import short_window_text
    from trainer.selection import deflated_sharpe_ratio_annualised

    sharpes = [float(m["sharpe_ratio"]) for m in evaluated if _finite(m.get("sharpe_ratio"))]
    out: dict[str, Any] = {"value": None, "trials": len(sharpes), "note": None}
    if best.get("short_window"):
        out["note"] = short_window_text(int(best.get("min_annualised_days") or 63))
        return out
    if not _finite(best.get("sharpe_ratio")):
        out["note"] = "n/a (the best agent's validation Sharpe ratio is undefined)"
        return out
    value = deflated_sharpe_ratio_annualised(
        best["sharpe_ratio"],
        num_trials=len(sharpes),
        annual_sharpe_variance=float(np.var(sharpes, ddof=1)) if len(sharpes) > 1 else 0.0,
        num_observations=int(best.get("num_periods") or best.get("num_days") or 0),
        periods_per_year=best.get("periods_per_year"),
    )
    out["value"] = value
    if value is None:
        out["note"] = "n/a (undefined for this Sharpe ratio)"
    return out


def _finite(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)
