"""PortfolioVecEnv's cost-aware options on real prices: the no-trade band and the turnover penalty."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tests.intraday import intraday_panel
from trainer.data.pipeline import build_market_data
from trainer.data.sessions import session_close_mask
from trainer.envs.portfolio import PortfolioVecEnv
from trainer.envs.portfolio_config import PortfolioConfig
from trainer.envs.portfolio_dynamics import target_weights
from trainer.errors import ConfigError


def fixed(data, **config):
    env = PortfolioVecEnv(data, PortfolioConfig(random_start=False, **config), num_envs=1)
    env.reset(options={"start_day": 0})
    return env


def test_defaults_trade_every_difference_and_add_no_penalty(dow30_market):
    cfg = PortfolioConfig()
    assert cfg.rebalance_band == 0.0 and cfg.turnover_penalty == 0.0
    env = fixed(dow30_market)
    rng = np.random.default_rng(0)
    for _ in range(20):
        action = torch.as_tensor(rng.uniform(-0.3, 0.3, size=(1, env.action_dim)), dtype=torch.float32)
        before = env._value[0].item()
        _, reward, _, _, info = env.step(action)
        # the traded weights are the action's softmax, however small the move from the drifted weights
        mapped = target_weights(action, logit_scale=cfg.logit_scale, cash_bias=cfg.cash_bias)
        assert torch.equal(info["target_weights"], mapped)
        assert reward[0].item() == pytest.approx(math.log(info["portfolio_value"][0].item() / before), rel=1e-6)


def test_band_keeps_small_moves_and_scales_buys_to_the_cash_at_hand_by_hand(two_stocks):
    p = two_stocks.close  # AAPL, MSFT, first quarter of 2019
    c, band = 0.01, 0.15
    env = fixed(two_stocks, cost_pct=c, logit_scale=1.0, cash_bias=0.0, rebalance_band=band)
    e = math.e
    # Day 0 from all cash: targets e/(e+2) and 1/(e+2) are both more than the band away -> bought.
    w_star = np.array([e, 1.0, 1.0]) / (e + 2)
    _, _, _, _, info = env.step(torch.tensor([[1.0, 0.0, 0.0]]))
    r = p[1] / p[0]
    growth = w_star[2] + w_star[0] * r[0] + w_star[1] * r[1]
    value = 1e6 * (1 - c * (w_star[0] + w_star[1])) * growth
    drifted = np.array([w_star[0] * r[0], w_star[1] * r[1], w_star[2]]) / growth
    assert info["portfolio_value"][0].item() == pytest.approx(value, rel=1e-12)
    # Day 1, same target: the drift is a few tenths of a percent, inside the band -> no trade, no cost.
    assert np.abs(w_star[:2] - drifted[:2]).max() < band
    _, _, _, _, info = env.step(torch.tensor([[1.0, 0.0, 0.0]]))
    assert info["turnover"][0].item() == 0.0 and info["costs"][0].item() == 0.0
    np.testing.assert_allclose(info["target_weights"][0].numpy(), drifted, rtol=1e-12)
    r2 = p[2] / p[1]
    growth2 = drifted[2] + drifted[0] * r2[0] + drifted[1] * r2[1]
    value *= growth2
    current = np.array([drifted[0] * r2[0], drifted[1] * r2[1], drifted[2]]) / growth2
    assert info["portfolio_value"][0].item() == pytest.approx(value, rel=1e-12)
    # Day 2: logits (1, 1, -1): AAPL's move (about -0.11) is inside the band and kept; MSFT's buy
    # (about +0.26) is outside it but only the cash (about 0.21) funds it -> scaled to the cash.
    target = np.array([e, e, 1 / e]) / (2 * e + 1 / e)
    assert abs(target[0] - current[0]) <= band < target[1] - current[1]
    assert target[1] - current[1] > current[2]  # the premise of the scaling
    traded = np.array([current[0], current[1] + current[2], 0.0])
    _, _, _, _, info = env.step(torch.tensor([[1.0, 1.0, -1.0]]))
    np.testing.assert_allclose(info["target_weights"][0].numpy(), traded, rtol=1e-12, atol=1e-15)
    turnover = current[2]  # only MSFT was bought, with all the cash
    r3 = p[3] / p[2]
    value = value * (1 - c * turnover) * (traded[0] * r3[0] + traded[1] * r3[1])
    assert info["turnover"][0].item() == pytest.approx(turnover, rel=1e-12)
    assert info["portfolio_value"][0].item() == pytest.approx(value, rel=1e-12)
    assert info["weights"][0, 2].item() == pytest.approx(0.0, abs=1e-15)  # never borrows


def test_turnover_penalty_lowers_the_reward_but_not_the_value(two_stocks):
    lam, scale = 0.002, 1.0  # the largest reward scale the env allows
    plain = fixed(two_stocks, cost_pct=0.001, reward_scaling=scale)
    penalised = fixed(two_stocks, cost_pct=0.001, reward_scaling=scale, turnover_penalty=lam)
    actions = np.random.default_rng(1).uniform(-1, 1, size=(5, 3))
    for t, a in enumerate(actions):
        before = penalised._value[0].item()
        _, r0, _, _, i0 = plain.step(torch.as_tensor(a[None]))
        _, r1, _, _, i1 = penalised.step(torch.as_tensor(a[None]))
        assert i1["portfolio_value"][0].item() == i0["portfolio_value"][0].item()  # costs as before
        tau = i1["turnover"][0].item()
        if t == 0:  # from all cash: every stock weight is bought
            w = target_weights(torch.as_tensor(a[None]), logit_scale=4.0, cash_bias=20.0)[0].numpy()
            assert tau == pytest.approx(w[0] + w[1], rel=1e-12)
        log_r = math.log(i1["portfolio_value"][0].item() / before)
        assert r1[0].item() == pytest.approx(scale * (log_r - lam * tau), rel=1e-5)
        assert r0[0].item() - r1[0].item() == pytest.approx(scale * lam * tau, rel=1e-4)


def test_band_does_not_hold_a_position_over_the_night(data_dir):
    bars = build_market_data(intraday_panel(data_dir, ["AAPL", "MSFT", "NVDA"], "2024-03-11", "2024-03-12"))
    close_bar = int(np.flatnonzero(session_close_mask(bars.dates))[0])
    env = fixed(bars, rebalance_band=0.05, flatten_at_close=True)
    zero = torch.zeros(1, env.action_dim)
    for step in range(close_bar + 2):
        _, _, _, _, info = env.step(zero)
        if 0 < step < close_bar:  # bar-to-bar drifts are inside the band: held, no trade
            assert info["turnover"][0].item() == 0.0
    # after the close bar: all cash; the next session's first bar buys 1/3 each again
    np.testing.assert_allclose(info["target_weights"][0, :3].numpy(), 1 / 3, rtol=1e-8)


def test_bad_band_and_penalty_name_their_field(two_stocks):
    for changes, field in (
        ({"rebalance_band": -0.01}, "env.rebalance_band"),
        ({"rebalance_band": 1.0}, "env.rebalance_band"),
        ({"rebalance_band": "0.01"}, "env.rebalance_band"),
        ({"turnover_penalty": -1e-3}, "env.turnover_penalty"),
        ({"turnover_penalty": float("nan")}, "env.turnover_penalty"),
    ):
        with pytest.raises(ConfigError) as err:
            PortfolioConfig.from_dict(changes)
        assert err.value.details["field"] == field
    # two tickers: 1/N = 0.5, so a band of 0.5 would never leave the initial cash
    with pytest.raises(ConfigError, match="1/N") as err:
        fixed(two_stocks, rebalance_band=0.5)
    assert err.value.details["field"] == "env.rebalance_band"
