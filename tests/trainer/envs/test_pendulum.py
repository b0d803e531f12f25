"""PendulumVecEnv against Gymnasium's reference Pendulum-v1."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from trainer.envs.pendulum import PendulumVecEnv
from trainer.errors import ConfigError


@pytest.fixture(autouse=True)
def _one_thread():
    torch.set_num_threads(1)


def _reference_envs(n: int):
    envs = []
    for _ in range(n):
        env = gym.make("Pendulum-v1").unwrapped
        env.reset(seed=0)
        envs.append(env)
    return envs


def test_whole_episode_matches_gymnasium_step_by_step():
    env = PendulumVecEnv(4, seed=3)
    obs, _ = env.reset(seed=3)
    refs = _reference_envs(4)
    for i, ref in enumerate(refs):
        ref.state = env.state[i].numpy().copy()
    rng = np.random.default_rng(0)
    for _ in range(199):
        action = rng.uniform(-1.3, 1.3, size=(4, 1)).astype(np.float32)  # also exercises clipping
        obs, reward, terminated, truncated, info = env.step(torch.from_numpy(action))
        for i, ref in enumerate(refs):
            ref_obs, ref_reward, _, _, _ = ref.step(action[i] * 2.0)
            np.testing.assert_allclose(obs[i].numpy(), ref_obs, atol=1e-5)
            assert reward[i].item() == pytest.approx(float(ref_reward), abs=1e-5)
        assert not terminated.any() and not truncated.any()


def test_episode_is_truncated_after_200_steps_with_final_observation_and_return():
    env = PendulumVecEnv(3, seed=1)
    env.reset(seed=1)
    total = torch.zeros(3)
    action = torch.full((3, 1), 0.5)
    for _ in range(199):
        _, reward, _, truncated, _ = env.step(action)
        total += reward
    th, thdot = env.state[:, 0], env.state[:, 1]
    # 3 g / (2 l) = 15, 3 / (m l^2) = 3, torque = 2 * 0.5 = 1 N m
    new_thdot = (thdot + (15.0 * torch.sin(th) + 3.0 * 1.0) * 0.05).clamp(-8, 8)
    new_th = th + new_thdot * 0.05
    expected_final = torch.stack([torch.cos(new_th), torch.sin(new_th), new_thdot], 1).float()
    obs, reward, terminated, truncated, info = env.step(action)
    total += reward
    assert truncated.all() and not terminated.any()
    torch.testing.assert_close(info["final_observation"], expected_final)
    torch.testing.assert_close(info["episode_return"], total)
    # the returned obs is the reset obs: a fresh state with |theta_dot| <= 1
    assert (obs[:, 2].abs() <= 1.0).all()
    assert (env.elapsed_steps == 0).all()


def test_reward_is_minus_cost_at_known_states():
    env = PendulumVecEnv(2)
    env.state = torch.tensor([[0.0, 0.0], [np.pi, 2.0]], dtype=torch.float64)
    _, reward, _, _, _ = env.step(torch.tensor([[0.0], [1.0]]))
    # row 0: upright, still, no torque -> cost 0
    # row 1: theta = pi wraps to -pi: pi^2 + 0.1 * 2^2 + 0.001 * 2^2 = 9.8696 + 0.4 + 0.004
    torch.testing.assert_close(reward, torch.tensor([0.0, -(np.pi**2 + 0.4 + 0.004)], dtype=torch.float32))


def test_same_seed_gives_same_initial_states_and_different_seed_does_not():
    a, _ = PendulumVecEnv(5, seed=7).reset(seed=11)
    b, _ = PendulumVecEnv(5, seed=0).reset(seed=11)
    c, _ = PendulumVecEnv(5, seed=0).reset(seed=12)
    torch.testing.assert_close(a, b)
    assert not torch.allclose(a, c)


def test_zero_envs_is_a_config_error_naming_the_field():
    with pytest.raises(ConfigError) as err:
        PendulumVecEnv(0)
    assert err.value.details["field"] == "num_envs"
