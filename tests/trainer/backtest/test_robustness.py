"""A backtest's robustness checks: drawdown table and tail risk by hand, cost sensitivity, the
one-bar execution lag and beta to 1/N on real Dow data."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from trainer.backtest.engine import run_backtest
from trainer.backtest.robustness import drawdown_table, lagged_policy, tail_risk
from trainer.envs.portfolio_config import PortfolioConfig


def test_drawdown_table_matches_hand_values():
    dates = pd.date_range("2021-01-04", periods=8, freq="B")
    values = pd.Series([100.0, 110, 99, 105, 112, 100, 90, 95], index=dates)
    table = drawdown_table(values)
    # 112 -> 90 (not recovered) is deeper than 110 -> 99 (recovered at 112 on the 5th day)
    assert [row["depth"] for row in table] == pytest.approx([90 / 112 - 1, 99 / 110 - 1])
    assert table[0] == {**table[0], "peak": "2021-01-08", "trough": "2021-01-12", "recovery": None, "length": 3}
    assert table[1] == {**table[1], "peak": "2021-01-05", "trough": "2021-01-06", "recovery": "2021-01-08", "length": 3}
    assert drawdown_table(pd.Series([1.0, 2.0, 3.0], index=dates[:3])) == []


def test_tail_risk_matches_hand_values():
    returns = np.arange(-10, 10) / 100.0  # -0.10 ... +0.09
    out = tail_risk(returns)
    # 5th percentile, linear: position 0.05 x 19 = 0.95 -> -0.10 + 0.95 x 0.01 = -0.0905
    assert out["var_95"] == pytest.approx(-0.0905)
    assert out["cvar_95"] == pytest.approx(-0.10)  # the only return at or below it


def test_lagged_policy_returns_the_previous_action():
    calls = iter([torch.full((1, 2), 0.1), torch.full((1, 2), 0.2), torch.full((1, 2), 0.3)])
    lagged = lagged_policy(lambda obs: next(calls))
    obs = torch.zeros(1, 4)
    assert [float(lagged(obs)[0, 0]) for _ in range(3)] == pytest.approx([0.0, 0.1, 0.2])


def alternating(num_actions: int):
    """A portfolio policy that swings between two tilts every day: it trades daily."""
    state = {"n": 0}

    def policy(obs: torch.Tensor) -> torch.Tensor:
        state["n"] += 1
        action = torch.zeros(1, num_actions)
        action[0, state["n"] % (num_actions - 1)] = 1.0
        return action

    return policy


def test_backtest_reports_costs_lag_drawdowns_tail_risk_and_beta(dow_market):
    config = PortfolioConfig(cost_pct=0.002, observation="finrl")
    result = run_backtest(alternating(6), dow_market, config)
    report = result.metrics["robustness"]
    costs = report["cost_sensitivity"]
    assert [c["cost_multiple"] for c in costs] == [1, 2, 3]
    assert costs[0]["total_return"] == pytest.approx(result.metrics["agent"]["cumulative_return"], rel=1e-9)
    assert costs[0]["total_return"] > costs[1]["total_return"] > costs[2]["total_return"]
    lag = report["execution_lag"]
    assert lag["lag_periods"] == 1 and lag["total_return"] != costs[0]["total_return"]
    assert lag["sharpe_change"] == pytest.approx(lag["sharpe_ratio"] - costs[0]["sharpe_ratio"])
    assert 1 <= len(report["drawdowns"]) <= 5 and report["drawdowns"][0]["depth"] < 0
    assert report["drawdowns"][0]["depth"] == pytest.approx(result.metrics["agent"]["max_drawdown"], rel=1e-9)
    assert report["cvar_95"] <= report["var_95"] < 0
    assert 0.5 < report["beta_to_equal_weight"] < 1.5  # fully invested in the same five stocks
    assert report["turnover_daily_mean"] > 0.1


def test_one_over_n_itself_has_beta_one_to_one_over_n(dow_market):
    def zero(obs):
        return torch.zeros(1, 6)

    report = run_backtest(zero, dow_market, PortfolioConfig(cost_pct=0.0, observation="finrl")).metrics["robustness"]
    assert report["beta_to_equal_weight"] == pytest.approx(1.0, abs=1e-6)
