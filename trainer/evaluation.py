"""Scoring a deterministic policy on a date range (the validation score of a generation, the
CLI's ``evaluate``, a bundle's ``evaluate``)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pandas as pd
import torch

from trainer.backtest.engine import AGENT, agent_metrics, run_backtest
from trainer.backtest.metrics import sharpe_ratio
from trainer.backtest.policy_run import Policy, run_policy
from trainer.data.market import MarketData
from trainer.envs.stock_trading import EnvConfig, StockTradingVecEnv

__all__ = ["EVAL_RANDOM_WINDOWS", "EVAL_WINDOW_DAYS", "Policy", "evaluate_policy"]

#: Random-start validation windows evaluated besides the full window, and their length in
#: trading days (one quarter). They show whether the score depends on the start day.
EVAL_RANDOM_WINDOWS = 4
EVAL_WINDOW_DAYS = 63


def evaluate_policy(
    policy: Policy,
    data: MarketData,
    env_config: EnvConfig,
    *,
    device: str | torch.device = "cpu",
    random_windows: int = EVAL_RANDOM_WINDOWS,
    window_days: int = EVAL_WINDOW_DAYS,
    seed: int = 0,
    benchmark_returns: pd.Series | None = None,
) -> dict[str, Any]:
    """Score a deterministic policy on a date range, as the pods and the CLI do.

    The main episode trades the whole range from its first day with ``initial_cash`` and no
    holdings (no random start, no random wealth). ``random_windows`` more episodes of
    ``window_days`` steps start on random days (seeded), showing how much the result depends
    on the start day.

    Args:
        policy: obs (B, obs_dim) float32 on ``device`` -> action (B, action_dim) in [-1, 1].
        data: the evaluation range (e.g. the validation split), at least 2 days.
        env_config: trading rules (costs, hmax...); its episode settings are overridden.
        device: where the evaluation env lives.
        random_windows: number of random-start windows (0 to skip them).
        window_days: steps of each window; shortened to fit the data.
        seed: seed of the window start days.
        benchmark_returns: optional daily benchmark returns (e.g. QQQ) covering the range.

    Returns:
        JSON-able dict: every key of :func:`trainer.backtest.metrics.compute_metrics` for the
        full-range episode (``sharpe_ratio``, ``cumulative_return``, ``max_drawdown``...),
        plus ``total_return`` (= ``cumulative_return``, a fraction), ``final_value`` (USD),
        ``initial_value`` (USD), ``score`` (the Sharpe ratio; 0.0 when it is undefined, e.g. a
        policy that never trades has zero volatility), ``score_defined`` (bool), and
        ``random_windows`` (``count``, ``days``, ``total_return_mean``, ``total_return_min``,
        ``total_return_max``, ``sharpe_mean``, ``start_dates``).

    Raises:
        DataError: ``data`` has fewer than 2 days or unusable prices.
    """
    device = torch.device(device)
    # The full window is a backtest without benchmarks: the same loop and the same metrics.
    full = run_backtest(policy, data, env_config, device=str(device))
    metrics = dict(full.metrics[AGENT]) if benchmark_returns is None else agent_metrics(full.daily, benchmark_returns)
    v = full.daily["account_value"].to_numpy()
    sharpe = metrics.get("sharpe_ratio")
    metrics["total_return"] = metrics["cumulative_return"]
    metrics["initial_value"] = float(v[0])
    metrics["final_value"] = float(v[-1])
    metrics["score_defined"] = sharpe is not None
    metrics["score"] = float(sharpe) if sharpe is not None else 0.0

    windows: dict[str, Any] = {"count": 0}
    length = min(window_days, data.num_days - 1)
    if random_windows > 0 and length >= 2 and data.num_days - 1 > length:
        cfg = dataclasses.replace(env_config, random_start=True, randomize_initial=False, episode_length=length)
        win_env = StockTradingVecEnv(data, cfg, num_envs=random_windows, device=device, seed=seed + 1)
        trace = run_policy(policy, win_env, start_day=None, seed=seed + 1)
        totals, sharpes = [], []
        for i in range(random_windows):
            row = trace.values[i][~np.isnan(trace.values[i])]
            totals.append(float(row[-1] / row[0] - 1.0))
            sharpe = sharpe_ratio(pd.Series(row[1:] / row[:-1] - 1.0))
            if math.isfinite(sharpe):
                sharpes.append(sharpe)
        windows = {
            "count": random_windows,
            "days": length,
            "start_dates": [str(data.dates[int(trace.days[i][0])]) for i in range(random_windows)],
            "total_return_mean": float(np.mean(totals)),
            "total_return_min": float(np.min(totals)),
            "total_return_max": float(np.max(totals)),
            "sharpe_mean": float(np.mean(sharpes)) if sharpes else None,
        }
    metrics["random_windows"] = windows
    return metrics
