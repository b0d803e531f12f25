"""The checks a sceptical reader of a backtest asks for, beyond its headline metrics.

:func:`robustness_report` gathers, for one backtest:

* **cost sensitivity**: the same deterministic policy rerun over the same days with the task's
  trading costs multiplied by 1, 2 and 3 (portfolio ``cost_pct``; stock-trading
  ``buy_cost_pct`` and ``sell_cost_pct``), each with its total return, annualised return and
  Sharpe ratio. An edge that vanishes at 2x costs is an edge of the cost model.
* **one-bar execution lag**: the policy rerun with its action delayed by one period: the
  features of day ``t`` trade at the close of ``t + 1`` (the first period gets the zero
  action: no trade for stock trading, 1/N for a portfolio). The backtest itself trades at the
  close of the day whose features the policy read, which is optimistic.
* **top-5 drawdowns** (:func:`drawdown_table`): peak, trough and recovery dates, depth and
  length, as pyfolio's drawdown table lists them;
* **tail risk**: daily historical 95 % value at risk and conditional value at risk
  (expected shortfall) of the returns (``empyrical.value_at_risk`` /
  ``empyrical.conditional_value_at_risk``: the 5th percentile return and the mean of the returns
  at or below it; losses are negative fractions);
* **beta to 1/N** (``empyrical.beta`` against the cost-free daily-rebalanced equal weight) and
  turnover (mean daily and annualised, ``x 252``).

Every figure is JSON-able (``None`` where undefined).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import empyrical
import numpy as np
import pandas as pd
import torch

from trainer.backtest.policy_run import Policy, run_policy
from trainer.data.market import MarketData
from trainer.envs.kinds import make_env
from trainer.envs.observations import FeatureStats
from trainer.envs.portfolio_config import PortfolioConfig
from trainer.selection import annual_sharpe, equal_weight_returns
from trainer.util.jsonable import finite_or_none

__all__ = ["COST_MULTIPLES", "drawdown_table", "lagged_policy", "robustness_report", "scaled_costs", "tail_risk"]

COST_MULTIPLES = (1, 2, 3)
TOP_DRAWDOWNS = 5


def scaled_costs(config: Any, multiple: float) -> Any:
    """``config`` with its trading costs multiplied by ``multiple``, kept within the cost's
    declared bound (``BOUNDS[...].high``: 10 % of the value traded), so a stressed task is one
    the config accepts."""

    def scaled(name: str) -> float:
        return min(getattr(config, name) * multiple, type(config).BOUNDS[name].high)

    if isinstance(config, PortfolioConfig):
        return dataclasses.replace(config, cost_pct=scaled("cost_pct"))
    return dataclasses.replace(config, buy_cost_pct=scaled("buy_cost_pct"), sell_cost_pct=scaled("sell_cost_pct"))


def lagged_policy(policy: Policy) -> Policy:
    """``policy`` with its action delayed one period: the call on day ``t``'s observation returns
    the action computed on day ``t - 1`` (zeros on the first call). Stateful: one episode."""
    pending: list[torch.Tensor] = []

    def act(obs: torch.Tensor) -> torch.Tensor:
        current = torch.as_tensor(policy(obs), dtype=torch.float32, device=obs.device)
        out = pending.pop() if pending else torch.zeros_like(current)
        pending.append(current)
        return out

    return act


def _rerun(
    policy: Policy, data: MarketData, config: Any, *, device: Any, feature_stats: FeatureStats | None, name: str
):
    env = make_env(data, config, num_envs=1, device=device, seed=0, feature_stats=feature_stats)
    values = run_policy(policy, env, start_day=0, seed=0, policy_name=name).values[0]
    return values[1:] / values[:-1] - 1.0


def _summary(returns: np.ndarray, periods_per_year: float) -> dict[str, Any]:
    total = float(np.prod(1.0 + returns) - 1.0)
    years = returns.size / periods_per_year
    annual = (1.0 + total) ** (1.0 / years) - 1.0 if years > 0 and total > -1 else None
    return {
        "total_return": finite_or_none(total),
        "annual_return": finite_or_none(annual),
        "sharpe_ratio": annual_sharpe(returns, periods_per_year),
    }


def drawdown_table(values: pd.Series, top: int = TOP_DRAWDOWNS) -> list[dict[str, Any]]:
    """The ``top`` deepest drawdowns of an account-value series, deepest first.

    A drawdown runs from a peak (a new high) through its trough to the first period back at or
    above the peak (``recovery``; ``None`` while still under water). Periods do not overlap.

    Args:
        values: (T,) account values (USD) indexed by date, increasing.
        top: how many to list.

    Returns:
        ``[{"peak", "trough", "recovery" (dates as text or None), "depth" (fraction <= 0),
        "length" (periods from peak to recovery, or to the last period)}]``.
    """
    v = values.to_numpy(dtype=np.float64)
    labels = [str(d.date()) if hasattr(d, "date") and d == d.normalize() else str(d)[:16] for d in values.index]
    peak_value = np.maximum.accumulate(v)
    under = v < peak_value
    rows, t = [], 0
    while t < v.size:
        if not under[t]:
            t += 1
            continue
        start = t - 1  # the peak: the last period at the high
        end = t
        while end < v.size and under[end]:
            end += 1
        trough = start + int(np.argmin(v[start:end]))
        rows.append(
            {
                "peak": labels[start],
                "trough": labels[trough],
                "recovery": labels[end] if end < v.size else None,
                "depth": float(v[trough] / v[start] - 1.0),
                "length": int((end if end < v.size else v.size - 1) - start),
            }
        )
        t = end
    return sorted(rows, key=lambda r: r["depth"])[:top]


def tail_risk(returns: np.ndarray) -> dict[str, float | None]:
    """Daily historical 95 % VaR and CVaR (empyrical's cutoff 0.05): negative fractions."""
    r = pd.Series(np.asarray(returns, dtype=np.float64))
    if r.size < 2:
        return {"var_95": None, "cvar_95": None}
    return {
        "var_95": finite_or_none(float(empyrical.value_at_risk(r, cutoff=0.05))),
        "cvar_95": finite_or_none(float(empyrical.conditional_value_at_risk(r, cutoff=0.05))),
    }


def robustness_report(
    policy: Policy,
    data: MarketData,
    config: Any,
    daily: pd.DataFrame,
    *,
    periods_per_year: float,
    device: str | torch.device = "cpu",
    feature_stats: FeatureStats | None = None,
    policy_name: str = "the policy",
) -> dict[str, Any]:
    """The checks of the module docstring for a finished backtest.

    Args:
        policy: the backtested deterministic policy (rerun here).
        data: the backtest window as its env read it.
        config: the backtest's env config.
        daily: the backtest's daily frame (``account_value``, ``turnover``).
        periods_per_year: annualisation (252 for days).
        device, feature_stats, policy_name: as the backtest's.

    Returns:
        ``{"cost_sensitivity": [{"cost_multiple", "total_return", "annual_return",
        "sharpe_ratio"}] (1x is the backtest itself), "execution_lag": {"lag_periods": 1, ...the
        same keys, "sharpe_change"}, "drawdowns": drawdown_table, "var_95", "cvar_95",
        "beta_to_equal_weight", "turnover_daily_mean", "turnover_annual"}``.
    """
    values = daily["account_value"].to_numpy(dtype=np.float64)
    returns = values[1:] / values[:-1] - 1.0
    kwargs = {"device": device, "feature_stats": feature_stats}
    costs = [{"cost_multiple": 1, **_summary(returns, periods_per_year)}]
    for multiple in COST_MULTIPLES[1:]:
        again = _rerun(policy, data, scaled_costs(config, multiple), name=policy_name, **kwargs)
        costs.append({"cost_multiple": multiple, **_summary(again, periods_per_year)})
    lagged = _summary(_rerun(lagged_policy(policy), data, config, name=policy_name, **kwargs), periods_per_year)
    base = costs[0]["sharpe_ratio"]
    change = lagged["sharpe_ratio"] - base if lagged["sharpe_ratio"] is not None and base is not None else None
    one_over_n = equal_weight_returns(data.close, data.members)
    beta = float(empyrical.beta(pd.Series(returns), pd.Series(one_over_n))) if returns.size >= 2 else math.nan
    turnover = daily["turnover"].iloc[:-1].to_numpy(dtype=np.float64)
    mean_turnover = float(turnover.mean()) if turnover.size else None
    return {
        "cost_sensitivity": costs,
        "execution_lag": {"lag_periods": 1, **lagged, "sharpe_change": change},
        "drawdowns": drawdown_table(daily["account_value"]),
        **tail_risk(returns),
        "beta_to_equal_weight": finite_or_none(beta),
        "turnover_daily_mean": finite_or_none(mean_turnover),
        "turnover_annual": finite_or_none(mean_turnover * 252) if mean_turnover is not None else None,
    }
