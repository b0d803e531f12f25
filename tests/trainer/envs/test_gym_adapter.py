"""The Gymnasium adapter StockTradingEnv: API compliance and identical dynamics to the vector env."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import torch
from gymnasium.utils.env_checker import check_env

from trainer.envs import STOCK_TRADING_ENV_ID
from trainer.envs.gym_adapter import StockTradingEnv
from trainer.envs.stock_config import EnvConfig
from trainer.envs.stock_trading import StockTradingVecEnv


def test_adapter_passes_gymnasium_env_checker_without_warnings(two_stocks):
    env = gym.make(STOCK_TRADING_ENV_ID, data=two_stocks, config=EnvConfig(episode_length=10)).unwrapped
    assert isinstance(env, StockTradingEnv)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env)


def test_registered_id_makes_the_env_from_market_data_and_a_config_dict(two_stocks):
    env = gym.make(STOCK_TRADING_ENV_ID, data=two_stocks, config={"hmax": 10})
    obs, info = env.reset(seed=0, options={"start_day": 0})
    assert obs.dtype == np.float32 and obs.shape == env.observation_space.shape
    _, _, _, _, info = env.step(np.array([1.0, 0.5], dtype=np.float32))
    np.testing.assert_array_equal(info["holdings"], [10.0, 5.0])


def test_adapter_and_vector_env_give_identical_portfolio_values_for_the_same_actions(dow30_market):
    cfg = EnvConfig(episode_length=40, turbulence_threshold=float(np.quantile(dow30_market.turbulence, 0.95)))
    vec = StockTradingVecEnv(dow30_market, cfg, num_envs=1, seed=11)
    single = StockTradingEnv(dow30_market, cfg, seed=11)
    vec_obs, _ = vec.reset(seed=11)
    obs, _ = single.reset(seed=11)
    np.testing.assert_array_equal(obs, vec_obs[0].numpy())
    actions = np.random.default_rng(0).uniform(-1, 1, size=(40, dow30_market.num_stocks)).astype(np.float32)
    values = []
    for step, action in enumerate(actions):
        vec_obs, vec_reward, _, vec_truncated, vec_info = vec.step(torch.from_numpy(action[None]))
        obs, reward, terminated, truncated, info = single.step(action)
        assert info["portfolio_value"] == vec_info["portfolio_value"][0].item()
        assert reward == vec_reward[0].item()
        assert truncated == bool(vec_truncated[0]) == (step == 39)
        assert not terminated
        np.testing.assert_array_equal(obs, vec_info["final_observation"][0].numpy())
        values.append(info["portfolio_value"])
    assert len(set(values)) > 30  # the actions really traded
    assert info["episode_return"] == np.float32(vec_info["episode_return"][0].item())
