"""The portfolio dynamics as a pure transition: the env's numbers, gradients, and the trade rate,
band edge and execution lag settings on hand examples (AAPL and MSFT, early 2019)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from trainer.envs.portfolio import PortfolioVecEnv
from trainer.envs.portfolio_config import PortfolioConfig
from trainer.envs.portfolio_dynamics import (
    DSR_PRIOR_VARIANCE,
    Dynamics,
    PortfolioState,
    initial_state,
    target_weights,
    transition,
)
from trainer.errors import ConfigError

E = math.e


def fixed(data, num_envs=1, sync_free=False, **config):
    cfg = PortfolioConfig(random_start=False, **config)
    env = PortfolioVecEnv(data, cfg, num_envs=num_envs, sync_free=sync_free)
    env.reset(options={"start_day": 0})
    return env


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize(
    "settings",
    [
        {},
        {"reward": "differential_sharpe", "rebalance_band": 0.02, "turnover_penalty": 0.003},
        {"reward": "excess_log_return", "rebalance_band": 0.02, "band_mode": "edge", "trade_rate": 0.4},
    ],
)
def test_env_and_transition_give_identical_numbers(two_stocks, dtype, settings):
    data = two_stocks
    cfg = PortfolioConfig(random_start=False, cost_pct=0.002, **settings)
    env = PortfolioVecEnv(data, cfg, num_envs=3, dtype=dtype)
    env.reset(options={"start_day": 5})
    n, dyn = env.num_stocks, Dynamics.from_config(cfg)
    close = torch.tensor(data.close, dtype=torch.float64)
    state = initial_state(3, n, initial_cash=cfg.initial_cash, dtype=dtype)
    assert torch.equal(state.weights, env._weights) and torch.equal(state.value, env._value)
    assert torch.equal(state.dsr_b, env._dsr_b) and state.dsr_b[0].item() == pytest.approx(DSR_PRIOR_VARIANCE)
    actions = torch.as_tensor(np.random.default_rng(3).uniform(-1, 1, size=(8, 3, n + 1)), dtype=torch.float32)
    for k, action in enumerate(actions):
        day = 5 + k
        gross = (close[day + 1] / close[day]).to(dtype).expand(3, -1)
        log_ew = torch.log((close[day + 1] / close[day]).mean()).to(dtype).expand(3)
        target = target_weights(action, logit_scale=cfg.logit_scale, cash_bias=cfg.cash_bias, dtype=dtype)
        step = transition(state, target, gross, log_ew, dyn)
        _, reward, _, _, info = env.step(action)
        assert torch.equal(reward, step.reward.to(torch.float32))
        assert torch.equal(info["weights"], step.state.weights)
        assert torch.equal(info["portfolio_value"], step.state.value)
        assert torch.equal(info["target_weights"], step.traded)
        assert torch.equal(info["turnover"], step.turnover) and torch.equal(info["log_return"], step.log_return)
        state = step.state


@pytest.mark.parametrize(
    "dynamics",
    [
        Dynamics(cost_pct=0.01, trade_rate=0.7, reward="differential_sharpe", turnover_penalty=0.02),
        Dynamics(cost_pct=0.005, reward="excess_log_return", reward_scaling=10.0),
        Dynamics(cost_pct=0.01, rebalance_band=0.01, band_mode="edge", trade_rate=0.5),
    ],
)
def test_transition_gradients_match_finite_differences(dynamics):
    gen = torch.Generator().manual_seed(0)
    b, n = 2, 3
    target = torch.tensor([[0.5, 0.2, 0.1, 0.2], [0.1, 0.3, 0.4, 0.2]], dtype=torch.float64)
    weights = torch.tensor([[0.2, 0.4, 0.3, 0.1], [0.35, 0.1, 0.15, 0.4]], dtype=torch.float64)
    gross = 1.0 + 0.02 * torch.randn(b, n, generator=gen, dtype=torch.float64)
    dsr = torch.tensor([0.001, -0.002], dtype=torch.float64), torch.tensor([2e-4, 1e-4], dtype=torch.float64)
    value = torch.tensor([1e6, 2e6], dtype=torch.float64)
    log_ew = torch.log(gross.mean(1))
    # away from the kinks: every stock outside its band, the buys funded
    assert ((target - weights)[:, :n].abs() > dynamics.rebalance_band + 0.1).all()
    inputs = [x.clone().requires_grad_() for x in (target, weights, gross, value, *dsr)]
    before = [x.detach().clone() for x in inputs]

    def outputs(t, w, g, v, a, bb):
        step = transition(PortfolioState(w, v, a, bb), t, g, log_ew, dynamics)
        return step.reward, step.state.weights, step.state.value, step.state.dsr_a, step.turnover

    assert torch.autograd.gradcheck(outputs, inputs)
    outputs(*inputs)[0].sum().backward()
    assert inputs[0].grad.abs().sum() > 0  # the target moves the reward
    for x, old in zip(inputs, before):  # no input was written
        assert torch.equal(x.detach(), old)


def test_trade_rate_half_moves_half_the_way_by_hand(two_stocks):
    p, c = two_stocks.close, 0.01
    env = fixed(two_stocks, cost_pct=c, logit_scale=1.0, cash_bias=0.0, trade_rate=0.5)
    w_star = np.array([E, 1.0, 1.0]) / (E + 2)
    _, _, _, _, info = env.step(torch.tensor([[1.0, 0.0, 0.0]]))
    traded = np.array([0.0, 0.0, 1.0]) + 0.5 * (w_star - np.array([0.0, 0.0, 1.0]))
    np.testing.assert_allclose(info["target_weights"][0].numpy(), traded, rtol=1e-12)
    assert info["turnover"][0].item() == pytest.approx((w_star[0] + w_star[1]) / 2, rel=1e-12)
    r = p[1] / p[0]
    growth = traded[2] + traded[0] * r[0] + traded[1] * r[1]
    value = 1e6 * (1 - c * (w_star[0] + w_star[1]) / 2) * growth
    assert info["portfolio_value"][0].item() == pytest.approx(value, rel=1e-12)
    drifted = np.array([traded[0] * r[0], traded[1] * r[1], traded[2]]) / growth
    # the next step again covers half of the remaining distance to the same target
    _, _, _, _, info = env.step(torch.tensor([[1.0, 0.0, 0.0]]))
    np.testing.assert_allclose(info["target_weights"][0].numpy(), (drifted + w_star) / 2, rtol=1e-12)
    assert info["turnover"][0].item() == pytest.approx(np.abs(w_star - drifted)[:2].sum() / 2, rel=1e-9)


def test_edge_band_trades_to_the_target_plus_or_minus_the_band_by_hand(two_stocks):
    band = 0.15
    env = fixed(two_stocks, cost_pct=0.0, logit_scale=1.0, cash_bias=0.0, rebalance_band=band, band_mode="edge")
    w_star = np.array([E, 1.0, 1.0]) / (E + 2)  # about 0.58, 0.21, 0.21
    _, _, _, _, info = env.step(torch.tensor([[1.0, 0.0, 0.0]]))
    # from all cash each stock is bought only up to the band's lower edge
    edge = np.array([w_star[0] - band, w_star[1] - band, 1 - (w_star[0] + w_star[1] - 2 * band)])
    np.testing.assert_allclose(info["target_weights"][0].numpy(), edge, rtol=1e-12)
    current = info["weights"][0].numpy()
    w_star = np.array([1 / E, E, 1.0]) / (1 / E + E + 1)  # logits (-1, 1, 0): about 0.09, 0.67, 0.24
    assert current[0] - w_star[0] > band and w_star[1] - current[1] > band
    _, _, _, _, info = env.step(torch.tensor([[-1.0, 1.0, 0.0]]))
    got = info["target_weights"][0].numpy()
    assert got[0] == pytest.approx(w_star[0] + band, rel=1e-12)  # sold down to the upper edge
    assert got[1] == pytest.approx(w_star[1] - band, rel=1e-12)  # bought up to the lower edge
    assert got.sum() == pytest.approx(1.0, rel=1e-12)
    # the same step in "target" mode trades all the way
    plain = fixed(two_stocks, cost_pct=0.0, logit_scale=1.0, cash_bias=0.0, rebalance_band=band)
    plain._weights = info["weights"].new_tensor(current[None])
    _, _, _, _, info = plain.step(torch.tensor([[-1.0, 1.0, 0.0]]))
    np.testing.assert_allclose(info["target_weights"][0, :2].numpy(), w_star[:2], rtol=1e-12)


@pytest.mark.parametrize("sync_free", [False, True])
def test_execution_lag_trades_each_target_one_day_later(two_stocks, sync_free):
    actions = torch.as_tensor(np.random.default_rng(2).uniform(-1, 1, size=(5, 1, 3)), dtype=torch.float32)
    now = fixed(two_stocks, sync_free=sync_free, episode_length=3)
    lagged = fixed(two_stocks, sync_free=sync_free, episode_length=3, execution_lag=1)
    ran_now = [now.step(a)[4] for a in actions]
    ran_lagged = [lagged.step(a)[4] for a in actions]
    # first step of each episode (steps 0 and 3): nothing due, all cash held, value unchanged
    for k in (0, 3):
        assert ran_lagged[k]["turnover"][0].item() == 0.0
        assert ran_lagged[k]["portfolio_value"][0].item() == 1e6
    # later steps trade the target chosen one step before, at this step's close
    for k in (1, 2, 4):
        assert torch.equal(ran_lagged[k]["target_weights"], ran_now[k - 1]["target_weights"])
    assert not torch.equal(ran_lagged[1]["target_weights"], ran_now[1]["target_weights"])


def test_execution_lag_sync_free_holds_a_non_finite_order(two_stocks):
    env = fixed(two_stocks, sync_free=True, execution_lag=1)
    env.step(torch.zeros(1, 3))
    _, _, _, _, info = env.step(torch.tensor([[float("nan"), 0.0, 0.0]]))
    assert info["turnover"][0].item() > 0  # the zero action's 1/N order came due
    held = info["weights"].clone()
    _, _, _, _, info = env.step(torch.zeros(1, 3))  # the NaN order came due: holds
    assert info["turnover"][0].item() == 0.0 and torch.equal(info["target_weights"], held)
    assert env.nonfinite_steps.item() == 1


@pytest.mark.parametrize(
    ("settings", "field"),
    [
        ({"trade_rate": 0.0}, "env.trade_rate"),
        ({"trade_rate": 1.5}, "env.trade_rate"),
        ({"trade_rate": -0.2}, "env.trade_rate"),
        ({"trade_rate": "0.5"}, "env.trade_rate"),
        ({"trade_rate": float("nan")}, "env.trade_rate"),
        ({"band_mode": "middle"}, "env.band_mode"),
        ({"band_mode": None}, "env.band_mode"),
        ({"execution_lag": 2}, "env.execution_lag"),
        ({"execution_lag": True}, "env.execution_lag"),
        ({"execution_lag": 0.5}, "env.execution_lag"),
    ],
)
def test_bad_dynamics_settings_are_refused_by_name(settings, field):
    with pytest.raises(ConfigError) as err:
        PortfolioConfig.from_dict(settings)
    assert err.value.details["field"] == field and field in str(err.value)


def test_defaults_are_today_and_round_trip():
    cfg = PortfolioConfig()
    assert (cfg.trade_rate, cfg.band_mode, cfg.execution_lag) == (1.0, "target", 0)
    again = PortfolioConfig.from_dict({"trade_rate": 0.25, "band_mode": "edge", "execution_lag": 1})
    assert PortfolioConfig.from_dict(again.to_dict()) == again
    assert Dynamics.from_config(again) == Dynamics(trade_rate=0.25, band_mode="edge")


@pytest.mark.slow  # about 20 s on a shared core: dynamo's first trace
def test_the_sync_free_step_with_every_setting_traces_as_one_graph(two_stocks):
    settings = {"rebalance_band": 0.01, "band_mode": "edge", "trade_rate": 0.5, "execution_lag": 1}
    config = PortfolioConfig(episode_length=3, reward="differential_sharpe", **settings)
    env = PortfolioVecEnv(two_stocks, config, num_envs=4, seed=4, sync_free=True, dtype=torch.float32)
    actions = torch.rand((4, 4, 3), generator=torch.Generator().manual_seed(7)) * 2.2 - 1.1
    for a in actions[:3]:  # the third step ends every episode
        env.step(a)
    torch._dynamo.reset()
    explained = torch._dynamo.explain(env.step)(actions[3])
    assert explained.graph_break_count == 0, [str(b.reason) for b in explained.break_reasons]
    assert explained.graph_count == 1
