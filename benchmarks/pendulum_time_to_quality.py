"""Wall time until Pendulum is solved: Paddock (vectorized torch env + PPO or SAC) vs SB3 PPO.

"Solved" means the mean undiscounted return of the last 10 finished training episodes is
better than -250 (random play scores about -1200, a good swing-up about -150). Both sides run
on the CPU with the same torch thread count, measured one after the other in the same process.

* Paddock: :class:`trainer.envs.pendulum.PendulumVecEnv` with the hyperparameters of
  ``tests/trainer/agents/test_learning.py`` (PPO: 16 envs x 200 steps per rollout; SAC: 4 envs).
* Stable-Baselines3: ``PPO("MlpPolicy")`` on Gymnasium's ``Pendulum-v1`` with the RL Zoo's
  tuned hyperparameters (``hyperparams/ppo.yml``: n_envs 4, n_steps 1024, gae_lambda 0.95,
  gamma 0.9, n_epochs 10, ent_coef 0.0, learning_rate 1e-3, clip_range 0.2, use_sde True,
  sde_sample_freq 4; batch_size left at SB3's default 64).

Usage::

    .venv/bin/python benchmarks/pendulum_time_to_quality.py [--algo ppo|sac] [--seed 0] [--threads 1]
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import deque
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from trainer.agents import make_agent  # noqa: E402
from trainer.envs.pendulum import PendulumVecEnv  # noqa: E402

THRESHOLD = -250.0
WINDOW = 10  # finished episodes averaged

OURS = {
    "ppo": {
        "num_envs": 16,
        "rollout_steps": 200,
        "hidden_sizes": [64, 64],
        "num_minibatches": 8,
        "update_epochs": 10,
        "gamma": 0.95,
        "learning_rate": 1e-3,
        "ent_coef": 0.0,
        "reward_scale": 0.1,
    },
    "sac": {
        "num_envs": 4,
        "hidden_sizes": [64, 64],
        "batch_size": 256,
        "buffer_size": 100_000,
        "learning_starts": 1_000,
        "updates_per_step": 2,
        "actor_learning_rate": 1e-3,
        "critic_learning_rate": 1e-3,
        "alpha_learning_rate": 1e-3,
        "initial_alpha": 1.0,
    },
}


def time_ours(algo: str, seed: int, max_steps: int) -> dict:
    """Train in chunks, checking the last WINDOW episode returns after each chunk."""
    hp = OURS[algo]
    env = PendulumVecEnv(hp["num_envs"], seed=seed)
    agent = make_agent(algo, env.obs_dim, env.action_dim, hp, device="cpu", seed=seed)
    # PPO: one rollout (= one 200-step episode per env) per chunk; SAC: one episode's worth of steps
    chunk = hp["num_envs"] * 200
    start = time.perf_counter()
    while agent.env_steps < max_steps:
        agent.learn(env, chunk)
        recent = list(agent.recent_returns)[-WINDOW:]
        if len(recent) == WINDOW and sum(recent) / WINDOW > THRESHOLD:
            return {"solved": True, "seconds": time.perf_counter() - start, "env_steps": agent.env_steps}
    return {"solved": False, "seconds": time.perf_counter() - start, "env_steps": agent.env_steps}


def time_sb3(seed: int, max_steps: int) -> dict:
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    class StopWhenSolved(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.returns: deque[float] = deque(maxlen=WINDOW)
            self.solved_at: float | None = None

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:  # added by the Monitor wrapper of make_vec_env
                    self.returns.append(float(info["episode"]["r"]))
            if len(self.returns) == WINDOW and sum(self.returns) / WINDOW > THRESHOLD:
                self.solved_at = time.perf_counter()
                return False
            return True

    env = make_vec_env("Pendulum-v1", n_envs=4, seed=seed)
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=1024,
        gae_lambda=0.95,
        gamma=0.9,
        n_epochs=10,
        ent_coef=0.0,
        learning_rate=1e-3,
        clip_range=0.2,
        use_sde=True,
        sde_sample_freq=4,
        seed=seed,
        device="cpu",
    )
    callback = StopWhenSolved()
    start = time.perf_counter()
    model.learn(total_timesteps=max_steps, callback=callback)
    end = callback.solved_at or time.perf_counter()
    return {"solved": callback.solved_at is not None, "seconds": end - start, "env_steps": model.num_timesteps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", choices=sorted(OURS), default="ppo")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=300_000, help="give up after this many env steps")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)

    ours = time_ours(args.algo, args.seed, args.max_steps)
    sb3 = time_sb3(args.seed, args.max_steps)
    for name, r in ((f"paddock {args.algo}", ours), ("sb3 ppo (zoo)", sb3)):
        status = "solved" if r["solved"] else "NOT solved"
        print(f"{name:16s} {status:10s} in {r['seconds']:7.1f} s, {r['env_steps']:>7d} env steps")
    if ours["solved"] and sb3["solved"]:
        print(f"speed-up (sb3 time / paddock time): {sb3['seconds'] / ours['seconds']:.1f}x")


if __name__ == "__main__":
    main()
