"""PPO, A2C, SAC, TD3 and DDPG learn to swing up the vectorized pendulum (slow: about a minute each on one thread).

Pendulum-v1 returns range from about -1500 (random) to about -150 (swung up and balanced);
better than -300 needs the pendulum held upright for most of the episode.
"""

from __future__ import annotations

import pytest
import torch

from trainer.agents import make_agent
from trainer.agents.a2c import PENDULUM_A2C
from trainer.agents.sac import PENDULUM_SAC
from trainer.agents.td3 import PENDULUM_TD3
from trainer.envs.pendulum import PendulumVecEnv

PPO_PENDULUM = {
    "num_envs": 16,
    "rollout_steps": 200,
    "hidden_sizes": [64, 64],
    "num_minibatches": 8,
    "update_epochs": 10,
    "gamma": 0.95,
    "learning_rate": 1e-3,
    "ent_coef": 0.0,
    "reward_scale": 0.1,
}
SAC_PENDULUM = PENDULUM_SAC


def evaluate(agent, episodes: int = 32, seed: int = 1234) -> float:
    """Mean undiscounted return of the deterministic policy over one episode in each of ``episodes`` envs."""
    env = PendulumVecEnv(episodes, seed=seed)
    obs, _ = env.reset(seed=seed)
    total = torch.zeros(episodes)
    for _ in range(env.max_episode_steps):
        obs, reward, _, _, _ = env.step(agent.act(obs))
        total += reward
    return total.mean().item()


@pytest.mark.slow
def test_ppo_swings_up_the_pendulum():
    agent = make_agent("ppo", 3, 1, PPO_PENDULUM, device="cpu", seed=0)
    before = evaluate(agent)
    stats = agent.learn(PendulumVecEnv(16, seed=0), 120_000)
    after = evaluate(agent)
    print(f"PPO pendulum: before {before:.0f}, training mean {stats['episode_return_mean']:.0f}, after {after:.0f}")
    assert stats["episode_return_mean"] > -300
    assert after > -300


@pytest.mark.slow
def test_sac_swings_up_the_pendulum():
    agent = make_agent("sac", 3, 1, SAC_PENDULUM, device="cpu", seed=0)
    before = evaluate(agent)
    stats = agent.learn(PendulumVecEnv(4, seed=0), 20_000)
    after = evaluate(agent)
    last = list(agent.recent_returns)[-20:]
    print(f"SAC pendulum: before {before:.0f}, last 20 training episodes {sum(last) / 20:.0f}, after {after:.0f}")
    assert stats["episodes"] >= 20
    assert sum(last) / len(last) > -300
    assert after > -300


@pytest.mark.slow
@pytest.mark.parametrize("algo", ["td3", "ddpg"])
def test_td3_and_ddpg_swing_up_the_pendulum(algo):
    """Threshold -300 (as SAC's) on the last 20 training episodes and on 32 deterministic episodes
    after 24k transitions; TD3 crossed -250 after 14-17k transitions (seed 0)."""
    agent = make_agent(algo, 3, 1, PENDULUM_TD3, device="cpu", seed=0)
    before = evaluate(agent)
    stats = agent.learn(PendulumVecEnv(4, seed=0), 24_000)
    after = evaluate(agent)
    last = list(agent.recent_returns)[-20:]
    print(f"{algo} pendulum: before {before:.0f}, last 20 training episodes {sum(last) / 20:.0f}, after {after:.0f}")
    assert stats["episodes"] >= 20
    assert sum(last) / len(last) > -300
    assert after > -300


@pytest.mark.slow
def test_a2c_learns_to_swing_up_the_pendulum():
    """A2C learns Pendulum slowly and noisily (one gradient step per 256-transition rollout), so
    its threshold is improvement, not a swing-up: after 1.2M transitions the deterministic policy
    must beat the untrained one by 300 and score above -1000. Seed 0 measured -1221 -> -857 (a
    chunked run of the same preset reached -157 after 1.02M, see ``PENDULUM_A2C``)."""
    agent = make_agent("a2c", 3, 1, PENDULUM_A2C, device="cpu", seed=0)
    before = evaluate(agent)
    stats = agent.learn(PendulumVecEnv(PENDULUM_A2C["num_envs"], seed=0), 1_200_000)
    after = evaluate(agent)
    print(f"A2C pendulum: before {before:.0f}, training mean {stats['episode_return_mean']:.0f}, after {after:.0f}")
    assert after > before + 300
    assert after > -1000
