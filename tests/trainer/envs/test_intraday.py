"""Both market envs on real 5-minute bars: one step is one bar; flattening at the session close."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.intraday import intraday_panel
from trainer.data.pipeline import build_market_data
from trainer.data.sessions import session_close_mask
from trainer.envs.portfolio import PortfolioVecEnv
from trainer.envs.portfolio_config import PortfolioConfig
from trainer.envs.stock_config import EnvConfig
from trainer.envs.stock_trading import StockTradingVecEnv
from trainer.errors import ConfigError


@pytest.fixture(scope="module")
def bars(data_dir):
    """AAPL, MSFT, NVDA, 2024-03-11 to 2024-03-15: five sessions of 78 five-minute bars."""
    return build_market_data(intraday_panel(data_dir, ["AAPL", "MSFT", "NVDA"], "2024-03-11", "2024-03-15"))


def _portfolio(data, **config):
    env = PortfolioVecEnv(data, PortfolioConfig(random_start=False, **config), num_envs=1)
    env.reset(options={"start_day": 0})
    return env


def _run_portfolio(env, steps):
    values, weights = [env.reset(options={"start_day": 0})[1]["portfolio_value"][0].item()], []
    zero = torch.zeros(1, env.action_dim)
    for _ in range(steps):
        _, _, _, _, info = env.step(zero)
        values.append(info["portfolio_value"][0].item())
        weights.append(info["target_weights"][0].numpy().copy())
    return np.array(values), np.array(weights)


def test_portfolio_env_steps_one_bar_at_a_time(bars):
    env = _portfolio(bars, cost_pct=0.0)
    values, _ = _run_portfolio(env, bars.num_days - 1)
    assert env.day[0].item() == 0  # truncated on the last bar and reset to the fixed start
    expected = (bars.close[1:] / bars.close[:-1]).mean(axis=1) - 1.0  # 1/N rebalanced every bar
    np.testing.assert_allclose(np.diff(values) / values[:-1], expected, rtol=0, atol=1e-9)
    assert len(values) == 5 * 78


def test_flatten_at_close_holds_cash_overnight_and_reinvests_next_session(bars):
    closes = np.flatnonzero(session_close_mask(bars.dates))[:-1]  # 16:00 bars with a next session
    assert [str(bars.dates[i])[11:16] for i in closes] == ["16:00"] * 4
    cost = 1e-3
    flat_values, flat_weights = _run_portfolio(_portfolio(bars, cost_pct=cost, flatten_at_close=True), 2 * 78)
    held_values, held_weights = _run_portfolio(_portfolio(bars, cost_pct=cost), 2 * 78)
    close_bar = int(closes[0])  # bar 77, the first session's close
    # the step from the close: target all cash, the overnight move is not earned, costs are paid
    np.testing.assert_allclose(flat_weights[close_bar], [0, 0, 0, 1], atol=0)
    assert held_weights[close_bar][-1] < 1e-6
    pre = flat_values[close_bar]
    # pre-trade weights are the drift of 1/N over the last bar
    drift = bars.close[close_bar] / bars.close[close_bar - 1] * (1 / 3)
    drift_w = drift / (drift.sum() + flat_weights[close_bar - 1][-1])
    assert flat_values[close_bar + 1] == pytest.approx(pre * (1 - cost * drift_w.sum()), rel=1e-9)
    assert held_values[close_bar + 1] / held_values[close_bar] != pytest.approx(1 - cost * drift_w.sum(), rel=1e-6)
    # the next session's first bar invests again at equal weights
    np.testing.assert_allclose(flat_weights[close_bar + 1][:3], 1 / 3, rtol=1e-8)
    # every other bar is the same as without flattening
    others = [i for i in range(close_bar)]
    np.testing.assert_allclose(flat_weights[others], held_weights[others], atol=0)


def test_flatten_at_close_is_validated_and_refused_on_daily_data(two_stocks):
    with pytest.raises(ConfigError) as err:
        PortfolioConfig.from_dict({"flatten_at_close": "yes"})
    assert err.value.details["field"] == "env.flatten_at_close"
    with pytest.raises(ConfigError) as err:
        PortfolioVecEnv(two_stocks, PortfolioConfig(flatten_at_close=True))
    assert err.value.details["field"] == "env.flatten_at_close"
    assert "intraday" in err.value.message


def _stock(data, **config):
    env = StockTradingVecEnv(data, EnvConfig(random_start=False, hmax=10, **config), num_envs=2)
    env.reset(options={"start_day": 0})
    return env


def test_stock_trading_env_steps_one_bar_at_a_time(bars):
    env = _stock(bars, buy_cost_pct=0.0, sell_cost_pct=0.0)
    _, _, _, _, info = env.step(torch.ones(2, 3))  # buy 10 shares of each at bar 0's close
    np.testing.assert_array_equal(info["holdings"][0].numpy(), [10, 10, 10])
    for t in range(1, 100):
        before = info["portfolio_value"][0].item()
        _, _, _, _, info = env.step(torch.zeros(2, 3))
        assert info["day"][0].item() == t + 1
        moved = float(np.dot([10, 10, 10], bars.close[t + 1] - bars.close[t]))
        assert info["portfolio_value"][0].item() - before == pytest.approx(moved, abs=1e-6)


def test_stock_trading_flatten_at_close_sells_everything_on_the_session_s_last_bar(bars):
    flat = _stock(bars, flatten_at_close=True)
    held = _stock(bars)
    buy = torch.ones(2, 3)
    for t in range(78):
        _, _, _, _, info = flat.step(buy)
        _, _, _, _, held_info = held.step(buy)
        if t < 77:
            np.testing.assert_array_equal(info["holdings"].numpy(), held_info["holdings"].numpy())
    # bar 77 is 16:00: the step from it sold everything at its close instead of buying more
    assert str(bars.dates[77])[11:16] == "16:00"
    np.testing.assert_array_equal(info["holdings"].numpy(), np.zeros((2, 3)))
    np.testing.assert_array_equal(held_info["holdings"][0].numpy(), [780, 780, 780])  # 78 buys of 10
    # overnight the flat env holds only cash: its value does not move with the gap
    assert info["portfolio_value"][0].item() == pytest.approx(info["cash"][0].item(), rel=1e-12)
    _, _, _, _, info = flat.step(buy)  # the next session's first bar buys again
    np.testing.assert_array_equal(info["holdings"][0].numpy(), [10, 10, 10])


def test_stock_trading_flatten_at_close_is_validated_and_refused_on_daily_data(two_stocks):
    with pytest.raises(ConfigError) as err:
        EnvConfig.from_dict({"flatten_at_close": 1})
    assert err.value.details["field"] == "env.flatten_at_close"
    with pytest.raises(ConfigError) as err:
        StockTradingVecEnv(two_stocks, EnvConfig(flatten_at_close=True))
    assert err.value.details["field"] == "env.flatten_at_close"


def test_random_validation_windows_count_sessions_of_bars(bars):
    from trainer.evaluation import evaluate_policy

    metrics = evaluate_policy(
        lambda obs: torch.zeros(obs.shape[0], 4), bars, PortfolioConfig(), random_windows=3, window_days=2
    )
    windows = metrics["random_windows"]
    assert windows["count"] == 3 and windows["days"] == 2 and windows["rows"] == 2 * 78
