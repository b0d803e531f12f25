"""Scoring a deterministic policy on a date range: the validation score of a generation, the
CLI's ``evaluate``, a bundle's ``evaluate``, an ensemble's score. The policy runs through
:func:`trainer.backtest.policy_run.run_policy`, the loop the backtest uses too."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

from trainer.backtest.engine import agent_metrics, daily_frame
from trainer.backtest.equal_weight import equal_weight_comparison
from trainer.backtest.metrics import sharpe_ratio
from trainer.backtest.policy_run import Policy, run_policy
from trainer.data.market import MarketData
from trainer.data.pipeline import load_market_data
from trainer.data.timestamps import infer_periods_per_year
from trainer.envs.kinds import make_env, prepare_market
from trainer.envs.observations import FeatureStats
from trainer.envs.portfolio import PortfolioVecEnv
from trainer.selection import SelectionRule, baseline_relative, robust_score, score_standard_error, window_bounds
from trainer.task import TaskSpec

__all__ = [
    "EVAL_RANDOM_WINDOWS",
    "EVAL_WINDOW_DAYS",
    "FAST_BOOTSTRAP_REPS",
    "eval_config",
    "evaluate_checkpoint_state",
    "evaluate_policy",
]

#: Random-start validation windows evaluated besides the full window, and their length in
#: trading days (one quarter). They show whether the score depends on the start day.
EVAL_RANDOM_WINDOWS = 4
EVAL_WINDOW_DAYS = 63
#: Bootstrap replications of ``vs_equal_weight`` when a pod scores its agents (about 0.06 s an
#: agent on a year of days); the CLI's ``evaluate`` and backtests use
#: :data:`trainer.backtest.relative.DEFAULT_REPS`.
FAST_BOOTSTRAP_REPS = 500


def eval_config(config: Any, **changes: Any) -> Any:
    """``config`` for evaluation: no random start, no random wealth, no episode length (each
    where the config has it), then ``changes``."""
    names = {f.name for f in dataclasses.fields(config)}
    base = {"random_start": False, "randomize_initial": False, "episode_length": None}
    return dataclasses.replace(config, **{k: v for k, v in {**base, **changes}.items() if k in names})


def evaluate_policy(
    policy: Policy,
    data: MarketData,
    env_config: Any,
    *,
    device: str | torch.device = "cpu",
    random_windows: int = EVAL_RANDOM_WINDOWS,
    window_days: int = EVAL_WINDOW_DAYS,
    seed: int = 0,
    benchmark_returns: pd.Series | None = None,
    feature_stats: FeatureStats | None = None,
    selection: SelectionRule | None = None,
    policy_name: str = "the policy",
    split: str | None = "validation",
    bootstrap_reps: int = FAST_BOOTSTRAP_REPS,
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
        window_days: trading days of each window (on intraday data, that many sessions of bars:
            ``window_days`` x the data's bars per day); shortened to fit the data.
        seed: seed of the window start days.
        benchmark_returns: optional daily benchmark returns (e.g. QQQ) covering the range.
        feature_stats: the train split's z-score statistics for scale-free observations
            (``data`` must then come from :func:`trainer.envs.kinds.prepare_market`).
        selection: the scoring rule; default :class:`SelectionRule` (mean - 1 x std of the
            Sharpe ratios of 4 sub-windows).
        policy_name: who the policy is, for errors (e.g. ``"agent 12"``, a file name).
        split: the split ``data`` is (``"validation"``, ``"test"``...; ``None`` for a date
            range), named in the selection rule's description.
        bootstrap_reps: replications of the block bootstrap behind ``vs_equal_weight``'s
            interval (:data:`FAST_BOOTSTRAP_REPS` for a pod's many agents; the CLI uses more).

    Returns:
        JSON-able dict: every key of :func:`trainer.backtest.metrics.compute_metrics` for the
        full-range episode (``sharpe_ratio``, ``cumulative_return``, ``max_drawdown``...),
        plus ``total_return`` (= ``cumulative_return``, a fraction), ``final_value`` (USD),
        ``initial_value`` (USD), ``score`` (the robust score of ``selection``; undefined Sharpe
        ratios, e.g. of a policy that never trades, count as 0; ``None`` when the range has
        fewer than 2 returns per sub-window, with ``score_note`` saying so), ``score_se`` (its
        standard error, annualised Sharpe units, :func:`trainer.selection.score_standard_error`; ``None`` without
        a score) and ``score_se_source`` (``"sub_windows"`` or ``"lo_2002"``), ``score_defined``
        (bool: the full-window Sharpe ratio exists), ``selection`` (the rule, with
        ``description``), ``sub_windows`` (list of ``{start, end, sharpe}``; empty without a
        score), ``vs_equal_weight`` (against the cost-free daily-rebalanced 1/N portfolio) and
        ``vs_equal_weight_with_costs`` (against 1/N traded with the task's costs and band), both
        from :func:`trainer.backtest.equal_weight.equal_weight_comparison` (interval, p-value,
        verdict), with ``benchmark_returns``, ``vs_QQQ``
        (:func:`trainer.selection.baseline_relative` on the same days), and
        ``random_windows`` (``count``, ``days``, ``total_return_mean``, ``total_return_min``,
        ``total_return_max``, ``sharpe_mean``, ``start_dates``).

    Raises:
        DataError: ``data`` has fewer than 2 days or unusable prices.
        PolicyError: the policy emits a NaN or infinite action; it is never scored (a NaN
            action used to mean "hold", which gave a diverged policy a quiet score of 0).
    """
    device = torch.device(device)
    selection = selection or SelectionRule()
    full_env = make_env(
        data, eval_config(env_config), num_envs=1, device=device, seed=seed, feature_stats=feature_stats
    )
    # The full window runs through the backtest's loop and is scored by its metrics function.
    trace = run_policy(policy, full_env, start_day=0, seed=seed, policy_name=policy_name)
    full = daily_frame(trace, data, costs_from_positions=isinstance(full_env, PortfolioVecEnv))
    metrics = agent_metrics(full, benchmark_returns)
    v = full["account_value"].to_numpy()
    returns = pd.Series(v[1:] / v[:-1] - 1.0, index=full.index[1:], name="returns")
    dates = full.index
    sharpe = metrics.get("sharpe_ratio")
    metrics["total_return"] = metrics["cumulative_return"]
    metrics["initial_value"] = float(v[0])
    metrics["final_value"] = float(v[-1])
    metrics["score_defined"] = sharpe is not None
    daily = returns.to_numpy()
    periods_per_year = infer_periods_per_year(data.dates)  # 252 for days, bars per session x 252 for bars
    metrics["selection"] = {**selection.to_dict(), "description": selection.describe(split)}
    metrics.update(_score_fields(daily, dates, sharpe, selection, periods_per_year))
    metrics.update(
        equal_weight_comparison(
            daily,
            data,
            env_config,
            periods_per_year=periods_per_year,
            reps=bootstrap_reps,
            seed=seed,
            device=device,
            feature_stats=feature_stats,
        )
    )
    if benchmark_returns is not None:
        bench = benchmark_returns.reindex(returns.index)
        if bench.notna().all():
            metrics["vs_QQQ"] = baseline_relative(daily, bench.to_numpy(), periods_per_year=periods_per_year)

    metrics["random_windows"] = _random_windows(
        policy, data, env_config, random_windows, window_days, seed, device, feature_stats, policy_name
    )
    return metrics


def _score_fields(
    daily: np.ndarray, dates: pd.DatetimeIndex, sharpe: float | None, selection: SelectionRule, periods_per_year: int
) -> dict[str, Any]:
    """``score``, ``sub_windows``, ``score_se`` and ``score_se_source`` of the daily returns
    (see :func:`evaluate_policy`), or a ``score_note`` when the range is too short to cut."""
    if len(daily) < 2 * selection.windows:  # too short to cut into sub-windows: every other figure still stands
        note = f"n/a ({selection.windows} sub-windows need at least {2 * selection.windows} returns, got {len(daily)})"
        return {"score": None, "score_note": note, "sub_windows": [], "score_se": None, "score_se_source": "none"}
    score, subs = robust_score(daily, selection, periods_per_year=periods_per_year)
    se, source = score_standard_error(
        subs, full_sharpe=sharpe, num_returns=len(daily), periods_per_year=periods_per_year
    )
    return {
        "score": score,
        "sub_windows": [
            {"start": str(dates[lo].date()), "end": str(dates[hi].date()), "sharpe": sub}
            for (lo, hi), sub in zip(window_bounds(len(daily), selection.windows), subs)
        ],
        "score_se": se,
        "score_se_source": source,
    }


def _random_windows(
    policy, data, env_config, random_windows, window_days, seed, device, feature_stats, policy_name
) -> dict[str, Any]:
    """The ``random_windows`` figures of :func:`evaluate_policy`: ``random_windows`` episodes of
    ``window_days`` trading days from random (seeded) start days; ``{"count": 0}`` when none fit."""
    periods_per_year = infer_periods_per_year(data.dates)
    windows: dict[str, Any] = {"count": 0}
    # window_days are trading days: on intraday bars a window is that many sessions of bars
    rows_per_day = max(1, round(data.num_days / len(np.unique(data.dates.astype("datetime64[D]")))))
    length = min(window_days * rows_per_day, data.num_days - 1)
    if random_windows > 0 and length >= 2 and data.num_days - 1 > length:
        cfg = eval_config(env_config, random_start=True, episode_length=length)
        win_env = make_env(
            data, cfg, num_envs=random_windows, device=device, seed=seed + 1, feature_stats=feature_stats
        )
        trace = run_policy(policy, win_env, start_day=None, seed=seed + 1, policy_name=policy_name)
        totals, sharpes = [], []
        for i in range(random_windows):
            row = trace.values[i][~np.isnan(trace.values[i])]
            totals.append(float(row[-1] / row[0] - 1.0))
            sharpe = sharpe_ratio(pd.Series(row[1:] / row[:-1] - 1.0), periods_per_year=periods_per_year)
            if math.isfinite(sharpe):
                sharpes.append(sharpe)
        windows = {
            "count": random_windows,
            "days": length // rows_per_day,
            "rows": length,
            "start_dates": [str(data.dates[int(trace.days[i][0])]) for i in range(random_windows)],
            "total_return_mean": float(np.mean(totals)),
            "total_return_min": float(np.min(totals)),
            "total_return_max": float(np.max(totals)),
            "sharpe_mean": float(np.mean(sharpes)) if sharpes else None,
        }
    return windows


def evaluate_checkpoint_state(
    agent: Any,
    state: Mapping[str, Any],
    *,
    split: str = "validation",
    market_data: MarketData | None = None,
    data_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    benchmark_returns: pd.Series | None = None,
    device: str | torch.device = "cpu",
    seed: int | None = None,
) -> dict[str, Any]:
    """Score an agent of a checkpoint (or an ensemble of them) on a split of its task, exactly as
    :func:`run_generation` scores a generation: same env kind and rules, same train-split
    feature statistics, same selection rule.

    Args:
        agent: anything with ``act(obs, deterministic=True)``.
        state: the checkpoint dict (``task``, ``feature_stats``).
        split: ``"validation"`` (default) or ``"test"``.
        market_data: the task's loaded panel (else loaded from ``data_dir``).
        seed: seed of the random windows; default the checkpoint's (as the pod used).

    Returns:
        The dict of :func:`evaluate_policy`.

    Raises:
        ConfigError, DataError: an invalid task, split or data.
    """
    task = TaskSpec.from_dict(state["task"])
    market = (
        market_data if market_data is not None else load_market_data(task.data, data_dir=data_dir, cache_dir=cache_dir)
    )
    data = prepare_market(market, task.env).slice(*task.split(split), name=split)
    stats = FeatureStats.from_dict(state["feature_stats"]) if state.get("feature_stats") else None

    def policy(obs: torch.Tensor) -> torch.Tensor:
        return agent.act(obs, deterministic=True)

    return evaluate_policy(
        policy,
        data,
        task.env,
        device=device,
        feature_stats=stats,
        selection=task.selection,
        benchmark_returns=benchmark_returns,
        seed=int(state.get("seed", 0) or 0) if seed is None else seed,
    )
