"""PortfolioVecEnv on real Dow-30 prices: weights, costs, drift, rewards, episodes, Gymnasium."""

from __future__ import annotations

import math
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env

from trainer.envs import PORTFOLIO_ENV_ID
from trainer.envs.gym_adapter import PortfolioEnv
from trainer.envs.observations import fit_feature_stats, scale_free_market
from trainer.envs.portfolio import PortfolioVecEnv
from trainer.envs.portfolio_config import PortfolioConfig
from trainer.envs.portfolio_dynamics import DSR_PRIOR_VARIANCE, target_weights
from trainer.errors import ConfigError


def fixed(data, num_envs=1, **config):
    env = PortfolioVecEnv(data, PortfolioConfig(random_start=False, **config), num_envs=num_envs)
    env.reset(options={"start_day": 0})
    return env


def test_zero_action_without_costs_reproduces_daily_rebalanced_equal_weight_returns(dow30_market):
    env = fixed(dow30_market, cost_pct=0.0)
    close = dow30_market.close
    expected = (close[1:] / close[:-1]).mean(axis=1) - 1.0  # 1/N of every stock, rebalanced daily
    values = [env.reset(options={"start_day": 0})[1]["portfolio_value"][0].item()]
    zero = torch.zeros(1, env.action_dim)
    for _ in range(dow30_market.num_days - 1):
        _, _, _, truncated, info = env.step(zero)
        values.append(info["portfolio_value"][0].item())
    assert truncated[0].item()
    got = np.diff(values) / np.array(values[:-1])
    assert len(got) == dow30_market.num_days - 1
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-9)


def test_zero_action_is_equal_weight_with_almost_no_cash_and_cash_stays_reachable():
    w = target_weights(torch.zeros(1, 30), logit_scale=4.0, cash_bias=20.0)[0]
    assert w.sum().item() == pytest.approx(1.0, abs=1e-15)
    assert w[-1].item() == pytest.approx(math.exp(-20) / (29 + math.exp(-20)), rel=1e-9)
    np.testing.assert_allclose(w[:-1].numpy(), 1 / 29, rtol=1e-8)
    all_cash = torch.full((1, 30), -1.0)
    all_cash[0, -1] = 1.0
    w = target_weights(all_cash, logit_scale=4.0, cash_bias=20.0)[0]
    assert w[-1].item() == pytest.approx(math.exp(4) / (math.exp(4) + 29 * math.exp(-4)), rel=1e-12)


def test_rebalance_cost_and_drift_match_hand_computed_values(two_stocks):
    p = two_stocks.close
    env = fixed(two_stocks, cost_pct=0.01, logit_scale=1.0, cash_bias=0.0)
    # a = (1, 0, 0) -> logits (1, 0, 0): weights e/(e+2), 1/(e+2), 1/(e+2) (cash logit 0 with no bias)
    e = math.e
    w_star = np.array([e, 1.0, 1.0]) / (e + 2)
    _, reward, _, _, info = env.step(torch.tensor([[1.0, 0.0, 0.0]]))
    turnover = w_star[0] + w_star[1]  # from all cash: every stock weight is bought
    r = p[1] / p[0]
    growth = w_star[2] + w_star[0] * r[0] + w_star[1] * r[1]
    value = 1e6 * (1 - 0.01 * turnover) * growth
    assert info["turnover"][0].item() == pytest.approx(turnover, rel=1e-12)
    assert info["costs"][0].item() == pytest.approx(1e6 * 0.01 * turnover, rel=1e-12)
    assert info["portfolio_value"][0].item() == pytest.approx(value, rel=1e-12)
    drifted = np.array([w_star[0] * r[0], w_star[1] * r[1], w_star[2]]) / growth
    np.testing.assert_allclose(info["weights"][0].numpy(), drifted, rtol=1e-12)
    np.testing.assert_allclose(info["holdings"][0].numpy(), drifted[:2] * value / p[1], rtol=1e-12)
    assert reward[0].item() == pytest.approx(math.log(value / 1e6), rel=1e-6)
    # Day 1: the same target again; turnover is the drift back, cost on |w* - drifted| of stocks.
    _, _, _, _, info = env.step(torch.tensor([[1.0, 0.0, 0.0]]))
    turnover2 = abs(w_star[0] - drifted[0]) + abs(w_star[1] - drifted[1])
    r2 = p[2] / p[1]
    value2 = value * (1 - 0.01 * turnover2) * (w_star[2] + w_star[0] * r2[0] + w_star[1] * r2[1])
    assert info["turnover"][0].item() == pytest.approx(turnover2, rel=1e-12)
    assert info["portfolio_value"][0].item() == pytest.approx(value2, rel=1e-12)


def test_excess_log_return_is_log_return_over_cost_free_equal_weight(two_stocks):
    p = two_stocks.close
    env = fixed(two_stocks, reward="excess_log_return", cost_pct=0.002, reward_scaling=0.5)
    action = torch.tensor([[0.5, -0.5, 0.0]])
    for t in range(3):
        before = env._value[0].item()
        _, reward, _, _, info = env.step(action)
        log_r = math.log(info["portfolio_value"][0].item() / before)
        ew = math.log((p[t + 1] / p[t]).mean())
        assert reward[0].item() == pytest.approx(0.5 * (log_r - ew), rel=1e-5, abs=1e-7)


def test_differential_sharpe_reward_follows_moody_saffell_recursion_by_hand(two_stocks):
    eta = 0.1
    env = fixed(two_stocks, reward="differential_sharpe", dsr_eta=eta, cost_pct=0.0)
    a, b = 0.0, DSR_PRIOR_VARIANCE
    action = torch.tensor([[1.0, -1.0, -1.0]])
    value = 1e6
    for _ in range(4):
        _, reward, _, _, info = env.step(action)
        new_value = info["portfolio_value"][0].item()
        r = new_value / value - 1.0
        d = (b * (r - a) - 0.5 * a * (r * r - b)) / (b - a * a) ** 1.5
        assert reward[0].item() == pytest.approx(d, rel=1e-5)
        a, b = a + eta * (r - a), b + eta * (r * r - b)
        value = new_value
    # First step by hand: A_0 = 0, so D_1 = B_0 R_1 / B_0^1.5 = R_1 / 0.01.


def test_episodes_truncate_auto_reset_to_cash_and_report_final_observation(dow30_market):
    env = PortfolioVecEnv(dow30_market, PortfolioConfig(episode_length=5), num_envs=3, seed=1)
    obs, info = env.reset(seed=1)
    n = env.num_stocks
    np.testing.assert_array_equal(obs[:, -(n + 1) :].numpy()[:, -1], 1.0)  # all cash at the start
    action = torch.zeros(3, n + 1)
    total = torch.zeros(3)
    for _ in range(5):
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        assert not terminated.any()
    assert truncated.all()
    np.testing.assert_allclose(info["episode_return"].numpy(), total.numpy(), rtol=1e-6)
    assert (obs[:, -1] == 1.0).all()  # next episode starts in cash
    assert (info["final_observation"][:, -1] < 1e-6).all()  # the last day was invested
    assert (info["day"] - 5 >= 0).all()


def test_default_observation_is_scale_free_and_uses_given_train_statistics(dow30_market):
    market = scale_free_market(dow30_market)
    train = market.slice("2010-01-01", "2015-12-31")
    later = market.slice("2016-01-01", "2019-12-31")
    stats = fit_feature_stats(train)
    env = PortfolioVecEnv(later, PortfolioConfig(random_start=False), feature_stats=stats)
    assert env.feature_stats is stats
    layout = env.observation_layout()
    assert layout["observation"] == "scale_free"
    assert layout["blocks"][0]["feature_stats"]["fitted_on"] == ["2010-01-04", "2015-12-31"]
    obs, _ = env.reset(options={"start_day": 0})
    k = env.num_features
    logret_1 = obs[0, : env.num_stocks].numpy()  # first feature of every ticker
    raw = np.log(later.close[0] / dow30_market.close[dow30_market.dates < later.dates[0]][-1])
    np.testing.assert_allclose(logret_1, (raw - stats.mean[0]) / stats.std[0], rtol=1e-4, atol=1e-5)
    assert env.obs_dim == env.num_stocks * k + env.num_stocks + 1


def test_finrl_layout_is_available_as_an_option(dow30_market):
    env = PortfolioVecEnv(dow30_market, PortfolioConfig(observation="finrl"))
    assert env.observation_layout()["blocks"][0]["feature_names"][0] == "close"
    assert env.obs_dim == dow30_market.num_stocks * (1 + len(dow30_market.feature_names)) + dow30_market.num_stocks + 1


def test_bad_settings_name_their_field(two_stocks):
    for changes, field in (
        ({"reward": "sharpe"}, "env.reward"),
        ({"cost_pct": 1.5}, "env.cost_pct"),
        ({"observation": "raw"}, "env.observation"),
        ({"dsr_eta": 0}, "env.dsr_eta"),
    ):
        with pytest.raises(ConfigError) as err:
            PortfolioConfig.from_dict(changes)
        assert err.value.details["field"] == field
    env = fixed(two_stocks)
    with pytest.raises(ValueError, match="shape"):
        env.step(torch.zeros(1, 2))


def test_gymnasium_id_passes_the_env_checker_and_matches_the_vector_env(two_stocks):
    env = gym.make(PORTFOLIO_ENV_ID, data=two_stocks, config={"episode_length": 10}).unwrapped
    assert isinstance(env, PortfolioEnv)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env)
    vec = PortfolioVecEnv(two_stocks, PortfolioConfig(episode_length=10), seed=3)
    single = PortfolioEnv(two_stocks, PortfolioConfig(episode_length=10), seed=3)
    vec_obs, _ = vec.reset(seed=3)
    obs, _ = single.reset(seed=3)
    np.testing.assert_array_equal(obs, vec_obs[0].numpy())
    actions = np.random.default_rng(0).uniform(-1, 1, size=(10, 3)).astype(np.float32)
    for a in actions:
        _, r_vec, _, _, info_vec = vec.step(torch.as_tensor(a[None]))
        _, r, _, _, info = single.step(a)
        assert r == r_vec[0].item()
        assert info["portfolio_value"] == info_vec["portfolio_value"][0].item()


@pytest.mark.parametrize("reward", ["log_return", "differential_sharpe"])
def test_non_finite_actions_are_refused_and_leave_the_env_as_it_was(two_stocks, reward):
    # as StockTradingVecEnv: a diverged policy's NaN must not pass for a zero action (issue 20)
    env = fixed(two_stocks, reward=reward)
    _, _, _, _, before = env.step(torch.tensor([[0.5, 0.0, -1.0]]))
    state = (env._weights.clone(), env._value.clone(), env._dsr_a.clone() if reward != "log_return" else None)
    with pytest.raises(ValueError, match=r"NaN or infinite values in env row\(s\) 0"):
        env.step(torch.tensor([[float("nan"), 0.0, 0.0]]))
    assert torch.equal(env._weights, state[0]) and torch.equal(env._value, state[1])
    if state[2] is not None:
        assert torch.equal(env._dsr_a, state[2])
    assert env.day[0].item() == before["day"][0].item()


def test_the_sync_free_step_gives_the_cpu_paths_results_bit_for_bit(two_stocks):
    # Fixed start days (no random draws), short episodes: resets happen on both paths.
    for reward in ("log_return", "differential_sharpe"):
        config = PortfolioConfig(episode_length=4, random_start=False, reward=reward, rebalance_band=0.01)
        cpu = PortfolioVecEnv(two_stocks, config, num_envs=6, sync_free=False)
        free = PortfolioVecEnv(two_stocks, config, num_envs=6, sync_free=True)
        assert cpu.dtype == free.dtype == torch.float64
        g = torch.Generator().manual_seed(3)
        for _ in range(11):
            a = torch.rand((6, 3), generator=g) * 2 - 1
            out_a, out_b = cpu.step(a), free.step(a)
            for x, y in zip(out_a[:4], out_b[:4], strict=True):
                assert x.dtype == y.dtype and torch.equal(x, y)
            assert out_a[4].keys() == out_b[4].keys()
            for k in out_a[4]:
                assert torch.equal(out_a[4][k], out_b[4][k]), k


def test_the_sync_free_step_holds_a_nan_row_and_counts_the_step(two_stocks):
    env = PortfolioVecEnv(two_stocks, PortfolioConfig(random_start=False), num_envs=2, sync_free=True)
    env.step(torch.zeros((2, 3)))
    before = env._weights.clone()
    *_, info = env.step(torch.tensor([[float("nan"), 0.0, 0.0], [0.0, 0.0, 0.0]]))
    assert torch.equal(info["target_weights"][0], before[0]) and float(info["turnover"][0]) == 0.0
    assert int(env.nonfinite_steps) == 1


def test_sync_free_random_starts_follow_the_seed_and_spread_over_the_days(two_stocks):
    config = PortfolioConfig(episode_length=2)
    days = []
    for _ in range(2):
        env = PortfolioVecEnv(two_stocks, config, num_envs=64, seed=9, sync_free=True)
        for _ in range(6):
            env.step(torch.zeros((64, 3)))
        days.append(env.day)
    assert torch.equal(days[0], days[1])
    assert days[0].unique().numel() > 20


def test_training_info_leaves_the_state_out(two_stocks):
    env = PortfolioVecEnv(two_stocks, num_envs=2, state_info=False)
    *_, info = env.step(torch.zeros((2, 3)))
    assert set(info) == {"final_observation", "episode_return"}
