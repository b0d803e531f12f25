"""The two 1/N benchmarks of ``vs_equal_weight`` on real Dow data: the cost-free headline and the
fair one traded with the task's costs and band, and the objects evaluate_policy stores."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trainer.backtest.equal_weight import traded_equal_weight_returns
from trainer.envs.portfolio_config import PortfolioConfig
from trainer.envs.stock_config import EnvConfig
from trainer.evaluation import evaluate_policy
from trainer.selection import annual_sharpe, equal_weight_returns

KEYS = {"sharpe_difference", "ci95", "p_value", "active_return_annual", "tracking_error", "information_ratio"}


def zero_action(obs: torch.Tensor) -> torch.Tensor:
    return torch.zeros((obs.shape[0], 6), dtype=torch.float32)


def test_the_fair_one_over_n_pays_the_task_costs_and_free_one_does_not(dow_market):
    free = equal_weight_returns(dow_market.close)
    cheap = traded_equal_weight_returns(dow_market, PortfolioConfig(cost_pct=0.0, observation="finrl"))
    costly = traded_equal_weight_returns(dow_market, PortfolioConfig(cost_pct=0.01, observation="finrl"))
    # with no costs and no band the env's zero action is the daily-rebalanced 1/N (cash ~ e^-20)
    np.testing.assert_allclose(cheap, free, atol=1e-7)
    assert np.prod(1 + costly) < np.prod(1 + cheap)
    banded = traded_equal_weight_returns(
        dow_market, PortfolioConfig(cost_pct=0.01, rebalance_band=0.02, observation="finrl")
    )
    assert np.prod(1 + banded) > np.prod(1 + costly)  # the band saves the daily rebalancing costs


def test_evaluate_policy_stores_both_comparisons_and_the_zero_action_ties_the_fair_one(dow_market):
    config = PortfolioConfig(cost_pct=0.002, rebalance_band=0.01, observation="finrl")
    metrics = evaluate_policy(zero_action, dow_market, config, random_windows=0)
    headline, fair = metrics["vs_equal_weight"], metrics["vs_equal_weight_with_costs"]
    assert KEYS <= set(headline) and KEYS <= set(fair)
    assert headline["benchmark"] == "1/N rebalanced daily, cost-free"
    assert "0.20 %" in fair["benchmark"] and "band 1.00 %" in fair["benchmark"]
    # the agent IS the fair 1/N: nothing between them, so no verdict either way
    assert fair["sharpe_difference"] == pytest.approx(0.0, abs=1e-12)
    assert fair["verdict"] == "indistinguishable"
    assert headline["sharpe_difference"] < 0  # it pays costs the headline 1/N does not
    assert headline["sharpe_ratio"] == pytest.approx(metrics["sharpe_ratio"], rel=1e-9)
    free = equal_weight_returns(dow_market.close)
    assert headline["benchmark_sharpe_ratio"] == pytest.approx(annual_sharpe(free), rel=1e-12)


def test_a_stock_trading_task_compares_with_a_fair_one_over_n_at_its_mean_cost(dow_market):
    config = EnvConfig(buy_cost_pct=0.001, sell_cost_pct=0.003, observation="finrl")

    def hold(obs: torch.Tensor) -> torch.Tensor:
        return torch.zeros((obs.shape[0], 5), dtype=torch.float32)

    metrics = evaluate_policy(hold, dow_market, config, random_windows=0)
    fair = metrics["vs_equal_weight_with_costs"]
    assert "0.20 % of traded value" in fair["benchmark"]
    # holding cash has no spread: its Sharpe ratio counts as 0, the difference is -Sharpe(1/N)
    assert fair["sharpe_ratio"] == 0.0
    assert fair["sharpe_difference"] == pytest.approx(-fair["benchmark_sharpe_ratio"])


def test_a_short_range_has_no_interval_and_says_why(dow_market):
    short = dow_market.slice(dow_market.dates[0], dow_market.dates[10], name="short")
    config = PortfolioConfig(observation="finrl")
    metrics = evaluate_policy(zero_action, short, config, random_windows=0)
    assert metrics["vs_equal_weight"]["verdict"] is None
    assert "at least 20 returns, got 10" in metrics["vs_equal_weight"]["note"]
