"""Wall time until Pendulum is solved: Paddock (vectorized torch env + PPO or SAC) vs SB3 PPO.

"Solved" means the mean undiscounted return of the last 10 finished training episodes is
better than -250 (random play scores about -1200, a good swing-up about -150). Both sides run
on the CPU with the same torch thread count, measured one after the other in the same process.

* Paddock: :class:`trainer.envs.pendulum.PendulumVecEnv` with
  :data:`trainer.agents.ppo.PENDULUM_PPO` (64 envs x 50 steps per rollout, 10 epochs of 4
  minibatches, lr 3e-3, gamma 0.95, rewards x 0.1, 16x16 tanh MLPs) or, for SAC, the
  hyperparameters of ``tests/trainer/agents/test_learning.py`` (4 envs).
* Stable-Baselines3: ``PPO("MlpPolicy")`` on Gymnasium's ``Pendulum-v1`` with the RL Zoo's
  tuned hyperparameters (``hyperparams/ppo.yml``: n_envs 4, n_steps 1024, gae_lambda 0.95,
  gamma 0.9, n_epochs 10, ent_coef 0.0, learning_rate 1e-3, clip_range 0.2, use_sde True,
  sde_sample_freq 4; batch_size left at SB3's default 64).

Each run is timed with the wall clock and with ``time.process_time`` (CPU seconds of this
process; less disturbed by other processes sharing the CPU); both ratios are printed per seed
and for the seeds' totals, ending with a markdown table.

Usage::

    .venv/bin/python benchmarks/pendulum_time_to_quality.py [--algo ppo|sac] [--seeds 0,1,2] [--threads 1]
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
from trainer.agents.ppo import PENDULUM_PPO  # noqa: E402
from trainer.envs.pendulum import PendulumVecEnv  # noqa: E402

THRESHOLD = -250.0
WINDOW = 10  # finished episodes averaged

OURS = {
    "ppo": PENDULUM_PPO,
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
    start, cpu_start = time.perf_counter(), time.process_time()
    solved = False
    while agent.env_steps < max_steps and not solved:
        agent.learn(env, chunk)
        recent = list(agent.recent_returns)[-WINDOW:]
        solved = len(recent) == WINDOW and sum(recent) / WINDOW > THRESHOLD
    return {
        "solved": solved,
        "seconds": time.perf_counter() - start,
        "cpu_seconds": time.process_time() - cpu_start,
        "env_steps": agent.env_steps,
    }


def time_sb3(seed: int, max_steps: int) -> dict:
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback
    from stable_baselines3.common.env_util import make_vec_env

    class StopWhenSolved(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.returns: deque[float] = deque(maxlen=WINDOW)
            self.solved_at: float | None = None
            self.solved_cpu: float | None = None

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:  # added by the Monitor wrapper of make_vec_env
                    self.returns.append(float(info["episode"]["r"]))
            if len(self.returns) == WINDOW and sum(self.returns) / WINDOW > THRESHOLD:
                self.solved_at, self.solved_cpu = time.perf_counter(), time.process_time()
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
    start, cpu_start = time.perf_counter(), time.process_time()
    model.learn(total_timesteps=max_steps, callback=callback)
    end = callback.solved_at or time.perf_counter()
    cpu_end = callback.solved_cpu or time.process_time()
    return {
        "solved": callback.solved_at is not None,
        "seconds": end - start,
        "cpu_seconds": cpu_end - cpu_start,
        "env_steps": model.num_timesteps,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--algo", choices=sorted(OURS), default="ppo")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds, each run on both sides")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-steps", type=int, default=300_000, help="give up after this many env steps")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    seeds = [int(s) for s in args.seeds.split(",")]

    rows = []
    for seed in seeds:
        ours = time_ours(args.algo, seed, args.max_steps)
        sb3 = time_sb3(seed, args.max_steps)
        rows.append((seed, ours, sb3))
        for name, r in ((f"paddock {args.algo}", ours), ("sb3 ppo (zoo)", sb3)):
            status = "solved" if r["solved"] else "NOT solved"
            print(
                f"seed {seed} {name:16s} {status:10s} in {r['seconds']:6.1f} s wall, "
                f"{r['cpu_seconds']:6.1f} s CPU, {r['env_steps']:>7d} env steps",
                flush=True,
            )

    def cell(r: dict) -> str:
        mark = "" if r["solved"] else " (NOT solved)"
        return f"{r['seconds']:.1f} / {r['cpu_seconds']:.1f}{mark}"

    print(
        f"\n| seed | Paddock {args.algo}: wall / CPU s | env steps | SB3 PPO (zoo): wall / CPU s | env steps "
        "| speed-up wall | speed-up CPU |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for seed, ours, sb3 in rows:
        print(
            f"| {seed} | {cell(ours)} | {ours['env_steps']:,} | {cell(sb3)} | {sb3['env_steps']:,} | "
            f"{sb3['seconds'] / ours['seconds']:.1f}x | {sb3['cpu_seconds'] / ours['cpu_seconds']:.1f}x |"
        )
    ours_wall = sum(r[1]["seconds"] for r in rows)
    ours_cpu = sum(r[1]["cpu_seconds"] for r in rows)
    sb3_wall = sum(r[2]["seconds"] for r in rows)
    sb3_cpu = sum(r[2]["cpu_seconds"] for r in rows)
    all_solved = all(r[1]["solved"] and r[2]["solved"] for r in rows)
    print(
        f"| **all** | {ours_wall:.1f} / {ours_cpu:.1f} | | {sb3_wall:.1f} / {sb3_cpu:.1f} | | "
        f"**{sb3_wall / ours_wall:.1f}x** | **{sb3_cpu / ours_cpu:.1f}x** |"
    )
    print(f"\ntarget: >= 10x; every run solved: {all_solved}")


if __name__ == "__main__":
    main()
