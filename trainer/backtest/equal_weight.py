"""The two 1/N benchmarks every score is compared with, and the ``vs_equal_weight`` objects.

* **Headline: 1/N rebalanced daily, cost-free** (:func:`trainer.selection.equal_weight_returns`):
  ``mean_i(close[t+1, i] / close[t, i]) - 1``, what "just hold everything equally" earns before
  any friction.
* **Fair: 1/N traded with the task's own costs and no-trade band** (:func:`traded_equal_weight_returns`):
  the zero action of a portfolio env with the task's ``PortfolioConfig`` (a zero action targets
  1/N; :mod:`trainer.envs.portfolio`; its band mode, trade rate and execution lag included), run through the one policy loop
  (:func:`trainer.backtest.policy_run.run_policy`) on the same days, so it pays exactly what an
  agent of the task pays. For a ``stock_trading`` task (whose zero action holds cash) the same
  portfolio env is built with ``cost_pct`` = the mean of its buy and sell costs, its initial
  cash and observation layout, and no band.

:func:`equal_weight_comparison` returns both comparisons for an agent's per-period returns as
JSON-able dicts, each the :func:`trainer.selection.baseline_relative` keys (``excess_return``,
``baseline_total_return``, ``baseline_sharpe``) merged with
:func:`trainer.backtest.relative.vs_equal_weight` and a ``benchmark`` line naming which 1/N it
is. With fewer than :data:`~trainer.backtest.relative.MIN_PERIODS` returns the statistics are
left out and ``verdict`` is ``None`` with a ``note`` saying why.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from trainer.backtest.policy_run import run_policy
from trainer.backtest.relative import MIN_PERIODS, vs_equal_weight
from trainer.data.market import MarketData
from trainer.envs.kinds import make_env
from trainer.envs.observations import FeatureStats
from trainer.envs.portfolio_config import PortfolioConfig
from trainer.selection import baseline_relative, equal_weight_returns

__all__ = [
    "COST_FREE",
    "WITH_COSTS",
    "equal_weight_comparison",
    "fair_config",
    "traded_equal_weight_returns",
]

#: Metric keys of the two comparisons.
COST_FREE = "vs_equal_weight"
WITH_COSTS = "vs_equal_weight_with_costs"


def fair_config(env_config: Any) -> PortfolioConfig:
    """The portfolio config whose zero action is the task's fair 1/N (module docstring)."""
    if isinstance(env_config, PortfolioConfig):
        return dataclasses.replace(env_config, random_start=False, episode_length=None, turnover_penalty=0.0)
    cost = (float(env_config.buy_cost_pct) + float(env_config.sell_cost_pct)) / 2.0
    return PortfolioConfig(
        initial_cash=float(env_config.initial_cash),
        cost_pct=cost,
        observation=getattr(env_config, "observation", "scale_free"),
        random_start=False,
        flatten_at_close=bool(getattr(env_config, "flatten_at_close", False)),
    )


def _describe(config: PortfolioConfig) -> str:
    band = f", no-trade band {100 * config.rebalance_band:.2f} %" if config.rebalance_band else ""
    if band and config.band_mode == "edge":
        band += " traded to its edge"
    rate = f", trade rate {config.trade_rate:g}" if config.trade_rate < 1 else ""
    lag = ", one-day execution lag" if config.execution_lag else ""
    return f"1/N traded with the task's costs ({100 * config.cost_pct:.2f} % of traded value{band}{rate}{lag})"


def traded_equal_weight_returns(
    data: MarketData,
    env_config: Any,
    *,
    device: str | torch.device = "cpu",
    feature_stats: FeatureStats | None = None,
) -> np.ndarray:
    """Per-period net returns of 1/N traded with the task's costs and band over ``data``.

    Args:
        data: the evaluation range as the agent's env reads it (already ``prepare_market``-ed).
        env_config: the task's env config (``PortfolioConfig`` or the stock-trading ``EnvConfig``).
        device: torch device of the env.
        feature_stats: the agent's scale-free statistics (the zero action ignores them, but the
            env needs them to build observations).

    Returns:
        (T - 1,) float64 simple returns, one per period of ``data`` after the first.
    """
    config = fair_config(env_config)
    env = make_env(data, config, num_envs=1, device=device, seed=0, feature_stats=feature_stats)

    def zero(obs: torch.Tensor) -> torch.Tensor:
        return torch.zeros((obs.shape[0], env.action_dim), dtype=torch.float32, device=obs.device)

    trace = run_policy(zero, env, start_day=0, seed=0, policy_name="1/N with costs")
    values = trace.values[0]
    return values[1:] / values[:-1] - 1.0


def _comparison(returns: np.ndarray, bench: np.ndarray, label: str, *, periods_per_year: float, reps: int, seed: int):
    out: dict[str, Any] = {"benchmark": label, **baseline_relative(returns, bench, periods_per_year=periods_per_year)}
    if returns.size < MIN_PERIODS:
        out.update(verdict=None, note=f"n/a (the interval needs at least {MIN_PERIODS} returns, got {returns.size})")
        return out
    out.update(vs_equal_weight(returns, bench, periods_per_year=periods_per_year, seed=seed, reps=reps))
    return out


def equal_weight_comparison(
    returns: np.ndarray,
    data: MarketData,
    env_config: Any,
    *,
    periods_per_year: float,
    reps: int,
    seed: int = 0,
    device: str | torch.device = "cpu",
    feature_stats: FeatureStats | None = None,
) -> dict[str, dict[str, Any]]:
    """Both comparisons of an agent with 1/N on the days of ``data``.

    Args:
        returns: (T - 1,) float64 simple per-period net returns of the agent on ``data``.
        data: the range the agent traded (as its env read it).
        env_config: the task's env config (costs and band of the fair 1/N).
        periods_per_year: annualisation of every figure.
        reps, seed: the bootstrap's replications and seed.
        device, feature_stats: as :func:`traded_equal_weight_returns`.

    Returns:
        ``{COST_FREE: {...}, WITH_COSTS: {...}}`` (module docstring).
    """
    r = np.asarray(returns, dtype=np.float64)
    headline = equal_weight_returns(data.close, data.members)
    fair = traded_equal_weight_returns(data, env_config, device=device, feature_stats=feature_stats)
    kwargs = {"periods_per_year": periods_per_year, "reps": reps, "seed": seed}
    return {
        COST_FREE: _comparison(r, headline, "1/N rebalanced daily, cost-free", **kwargs),
        WITH_COSTS: _comparison(r, fair, _describe(fair_config(env_config)), **kwargs),
    }
