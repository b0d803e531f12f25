"""Wall time until Pendulum is solved: each Paddock algorithm against SB3's same algorithm.

"Solved" means the mean undiscounted return of the last 10 finished training episodes is
better than -250 (random play scores about -1200, a good swing-up about -150). Both sides run
on the CPU with the same torch thread count, measured one after the other in the same process.

* Paddock: :class:`trainer.envs.pendulum.PendulumVecEnv` with the algorithm's Pendulum preset:
  :data:`trainer.agents.ppo.PENDULUM_PPO`, :data:`trainer.agents.a2c.PENDULUM_A2C`,
  :data:`trainer.agents.sac.PENDULUM_SAC`, :data:`trainer.agents.td3.PENDULUM_TD3` (TD3 and DDPG).
* Stable-Baselines3 on Gymnasium's ``Pendulum-v1`` with the RL Zoo's tuned hyperparameters
  (``hyperparams/<algo>.yml``, entry ``Pendulum-v1``):

  - PPO: n_envs 4, n_steps 1024, gae_lambda 0.95, gamma 0.9, n_epochs 10, ent_coef 0.0,
    learning_rate 1e-3, clip_range 0.2, use_sde True, sde_sample_freq 4;
  - A2C: n_envs 8, VecNormalize (observations and rewards), n_steps 8, gamma 0.9, gae_lambda 0.9,
    ent_coef 0.0, vf_coef 0.4, max_grad_norm 0.5, RMSprop, normalize_advantage False,
    learning_rate linear from 7e-4, use_sde True, log_std_init -2, ortho_init False;
  - SAC: learning_rate 1e-3 (other values SB3's defaults);
  - TD3 and DDPG: gamma 0.98, buffer_size 200 000, learning_starts 10 000, Gaussian action
    noise std 0.1, train_freq 1, gradient_steps 1, learning_rate 1e-3, net_arch [400, 300].

Each run is timed with the wall clock and with ``time.process_time`` (CPU seconds of this
process; less disturbed by other processes sharing the CPU); both ratios are printed per seed
and for the seeds' totals, ending with a markdown table.

Usage::

    .venv/bin/python benchmarks/pendulum_time_to_quality.py [--algo ppo|a2c|sac|td3|ddpg|all] [--seeds 0,1,2]
        [--threads 1] [--max-steps N]
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
from trainer.agents.a2c import PENDULUM_A2C  # noqa: E402
from trainer.agents.ppo import PENDULUM_PPO  # noqa: E402
from trainer.agents.sac import PENDULUM_SAC  # noqa: E402
from trainer.agents.td3 import PENDULUM_TD3  # noqa: E402
from trainer.envs.pendulum import PendulumVecEnv  # noqa: E402

THRESHOLD = -250.0
WINDOW = 10  # finished episodes averaged

OURS = {"ppo": PENDULUM_PPO, "a2c": PENDULUM_A2C, "sac": PENDULUM_SAC, "td3": PENDULUM_TD3, "ddpg": PENDULUM_TD3}
#: Default give-up budget (env steps) per algorithm; A2C needs about a million on both sides.
MAX_STEPS = {"ppo": 300_000, "a2c": 1_500_000, "sac": 60_000, "td3": 60_000, "ddpg": 60_000}


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


def sb3_model(algo: str, seed: int, max_steps: int):
    """SB3's ``algo`` on Pendulum-v1 with the RL Zoo's tuned hyperparameters (see the module doc)."""
    import numpy as np
    from stable_baselines3 import A2C, DDPG, PPO, SAC, TD3
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.noise import NormalActionNoise
    from stable_baselines3.common.vec_env import VecNormalize

    common = {"seed": seed, "device": "cpu"}
    if algo == "ppo":
        env = make_vec_env("Pendulum-v1", n_envs=4, seed=seed)
        return PPO(
            "MlpPolicy", env, n_steps=1024, gae_lambda=0.95, gamma=0.9, n_epochs=10, ent_coef=0.0,
            learning_rate=1e-3, clip_range=0.2, use_sde=True, sde_sample_freq=4, **common,
        )  # fmt: skip
    if algo == "a2c":
        env = VecNormalize(make_vec_env("Pendulum-v1", n_envs=8, seed=seed), gamma=0.9)
        return A2C(
            "MlpPolicy", env, n_steps=8, gamma=0.9, gae_lambda=0.9, ent_coef=0.0, vf_coef=0.4, max_grad_norm=0.5,
            use_rms_prop=True, normalize_advantage=False, learning_rate=lambda remaining: 7e-4 * remaining,
            use_sde=True, policy_kwargs={"log_std_init": -2, "ortho_init": False}, **common,
        )  # fmt: skip
    env = make_vec_env("Pendulum-v1", n_envs=1, seed=seed)
    if algo == "sac":
        return SAC("MlpPolicy", env, learning_rate=1e-3, **common)
    noise = NormalActionNoise(mean=np.zeros(1), sigma=0.1 * np.ones(1))
    cls = TD3 if algo == "td3" else DDPG
    return cls(
        "MlpPolicy", env, gamma=0.98, buffer_size=200_000, learning_starts=10_000, action_noise=noise,
        train_freq=1, gradient_steps=1, learning_rate=1e-3, policy_kwargs={"net_arch": [400, 300]}, **common,
    )  # fmt: skip


def time_sb3(algo: str, seed: int, max_steps: int) -> dict:
    from stable_baselines3.common.callbacks import BaseCallback

    class StopWhenSolved(BaseCallback):
        def __init__(self) -> None:
            super().__init__()
            self.returns: deque[float] = deque(maxlen=WINDOW)
            self.solved_at: float | None = None
            self.solved_cpu: float | None = None

        def _on_step(self) -> bool:
            for info in self.locals["infos"]:
                if "episode" in info:  # added by the Monitor wrapper of make_vec_env (unnormalised)
                    self.returns.append(float(info["episode"]["r"]))
            if len(self.returns) == WINDOW and sum(self.returns) / WINDOW > THRESHOLD:
                self.solved_at, self.solved_cpu = time.perf_counter(), time.process_time()
                return False
            return True

    model = sb3_model(algo, seed, max_steps)
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
    parser.add_argument("--algo", choices=[*OURS, "all"], default="ppo")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds, each run on both sides")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--max-steps", type=int, help="give up after this many env steps (default per algorithm)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    seeds = [int(s) for s in args.seeds.split(",")]
    algos = list(OURS) if args.algo == "all" else [args.algo]

    rows = []
    for algo in algos:
        budget = args.max_steps or MAX_STEPS[algo]
        for seed in seeds:
            ours = time_ours(algo, seed, budget)
            sb3 = time_sb3(algo, seed, budget)
            rows.append((algo, seed, ours, sb3))
            for name, r in ((f"paddock {algo}", ours), (f"sb3 {algo} (zoo)", sb3)):
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
        "\n| algorithm | seed | Paddock: wall / CPU s | env steps | SB3 (zoo): wall / CPU s | env steps "
        "| speed-up wall | speed-up CPU |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for algo, seed, ours, sb3 in rows:
        print(
            f"| {algo} | {seed} | {cell(ours)} | {ours['env_steps']:,} | {cell(sb3)} | {sb3['env_steps']:,} | "
            f"{sb3['seconds'] / ours['seconds']:.1f}x | {sb3['cpu_seconds'] / ours['cpu_seconds']:.1f}x |"
        )
    for algo in algos:
        mine = [r for r in rows if r[0] == algo]
        ours_wall, ours_cpu = sum(r[2]["seconds"] for r in mine), sum(r[2]["cpu_seconds"] for r in mine)
        sb3_wall, sb3_cpu = sum(r[3]["seconds"] for r in mine), sum(r[3]["cpu_seconds"] for r in mine)
        solved = all(r[2]["solved"] and r[3]["solved"] for r in mine)
        print(
            f"| **{algo} all** | | {ours_wall:.1f} / {ours_cpu:.1f} | | {sb3_wall:.1f} / {sb3_cpu:.1f} | | "
            f"**{sb3_wall / ours_wall:.1f}x** | **{sb3_cpu / ours_cpu:.1f}x** |"
            + ("" if solved else " (not all solved)")
        )


if __name__ == "__main__":
    main()
