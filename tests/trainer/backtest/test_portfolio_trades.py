"""A portfolio backtest's trades are the weight changes the env made: none where its no-trade
band held a weight, none for the costs it takes from every position pro rata."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from trainer.backtest.engine import executed_trades, run_backtest
from trainer.envs.kinds import make_env
from trainer.envs.portfolio_config import PortfolioConfig

BAND = 0.01
CONFIG = PortfolioConfig(rebalance_band=BAND, observation="finrl", random_start=False)


def tilting_policy(obs_dim: int, action_dim: int):
    """A fixed random linear policy: its target weights move with the prices every day."""
    weights = torch.as_tensor(np.random.default_rng(7).normal(size=(obs_dim, action_dim)) * 0.5, dtype=torch.float32)

    def policy(obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(obs.float() @ weights)

    return policy


@pytest.fixture(scope="module")
def backtest(dow_market):
    env = make_env(dow_market, CONFIG, num_envs=1)
    policy = tilting_policy(env.obs_dim, env.action_dim)
    return policy, run_backtest(policy, dow_market, CONFIG)


def test_a_trade_is_exactly_a_day_and_ticker_whose_weight_the_env_moved(backtest, dow_market):
    policy, result = backtest
    env = make_env(dow_market, CONFIG, num_envs=1)
    obs, info = env.reset(options={"start_day": 0})
    n, moved = dow_market.num_stocks, []
    for _ in range(dow_market.num_days - 1):
        before = info["weights"][0, :n].clone()
        obs, _, _, _, info = env.step(policy(obs))
        moved.append((info["target_weights"][0, :n] != before).numpy())
    traded = result.trades.to_numpy() != 0
    assert (traded[:-1] == np.array(moved)).all()
    assert not traded[-1].any()
    # the band holds most weights: far fewer trades than ticker-days, yet some on later days
    assert 0 < traded[1:].sum() < 0.5 * traded[1:].size


def test_costs_are_charged_on_the_traded_value_and_taken_from_every_position(backtest):
    _, result = backtest
    daily, held, trades = result.daily, result.holdings.to_numpy(), result.trades.to_numpy()
    assert daily["costs"].to_numpy() == pytest.approx(CONFIG.cost_pct * daily["traded_value"].to_numpy(), rel=1e-9)
    kept = 1.0 - daily["costs"].to_numpy() / daily["account_value"].to_numpy()
    assert held[1:] == pytest.approx((held[:-1] + trades[:-1]) * kept[:-1, None], rel=1e-9, abs=1e-9)
    # the held weights' cost share is a change of holdings, not a trade
    assert (np.diff(held, axis=0) != 0).sum() > (trades[:-1] != 0).sum()


def test_stock_trading_trades_are_the_change_of_holdings():
    holdings = np.array([[0.0, 0.0], [3.0, 1.0], [3.0, 0.0]])
    close, value, costs = np.full((3, 2), 10.0), np.full(3, 100.0), np.array([0.04, 0.01, 0.0])
    trades = executed_trades(holdings, close, value, costs, costs_from_positions=False)
    assert trades.tolist() == [[3.0, 1.0], [0.0, -1.0], [0.0, 0.0]]
