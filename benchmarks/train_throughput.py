"""PPO training throughput on the Dow-30 env: Paddock vs Stable-Baselines3, measured in one run.

Both sides learn (collect rollouts *and* update the networks) with PPO on the same market data
(the demo task's train split, 2010-2019, 29 tickers, FinRL's 8 indicators) and the same trading
rules; env-steps/s counts transitions per wall-clock second including the updates.

* Paddock: :class:`trainer.envs.StockTradingVecEnv` with ``num_envs`` 1024 and PPOConfig's
  defaults (rollout 16 x 1024, 8 epochs, 4 minibatches, 256x256 tanh MLPs).
* Stable-Baselines3: ``PPO("MlpPolicy")`` with its defaults (n_steps 2048, batch 64, 10
  epochs) on 8 copies of our Gymnasium adapter (``Paddock/StockTrading-v0``) in a
  ``DummyVecEnv``, with the same network sizes (256x256, tanh).

Usage::

    .venv/bin/python benchmarks/train_throughput.py --data-dir ../shared/data [--device cuda]

Numbers depend on other processes sharing the CPU; both sides use the same thread count.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from trainer.agents import make_agent  # noqa: E402
from trainer.data.pipeline import load_market_data  # noqa: E402
from trainer.device import pick_device  # noqa: E402
from trainer.envs.stock_trading import EnvConfig, StockTradingVecEnv  # noqa: E402
from trainer.pod import TaskSpec, demo_task_dict  # noqa: E402

DEFAULT_DATA_DIR = Path(__file__).resolve().parents[2] / "shared" / "data"


def measure_ours(train, *, device: torch.device, env_steps: int, num_envs: int) -> dict:
    env = StockTradingVecEnv(train, EnvConfig(), num_envs=num_envs, device=device, seed=0)
    agent = make_agent("ppo", env.obs_dim, env.action_dim, {"num_envs": num_envs}, device=device, seed=0)
    per_rollout = agent.hyperparameters()["rollout_steps"] * num_envs
    agent.learn(env, per_rollout)  # warm-up: allocations, first kernels
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    stats = agent.learn(env, env_steps)
    if device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    return {"steps": int(stats["env_steps"]), "seconds": seconds, "steps_per_s": stats["env_steps"] / seconds}


def measure_sb3(train, *, env_steps: int, num_envs: int = 8) -> dict:
    import gymnasium as gym
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    import trainer.envs  # noqa: F401  (registers Paddock/StockTrading-v0)

    def make(i: int):
        return lambda: gym.make("Paddock/StockTrading-v0", data=train, config=EnvConfig(), seed=i)

    vec = DummyVecEnv([make(i) for i in range(num_envs)])
    policy_kwargs = {"net_arch": {"pi": [256, 256], "vf": [256, 256]}, "activation_fn": torch.nn.Tanh}
    model = PPO("MlpPolicy", vec, policy_kwargs=policy_kwargs, device="cpu", seed=0, verbose=0)
    rollout = model.n_steps * num_envs
    steps = max(rollout, env_steps // rollout * rollout)
    start = time.perf_counter()
    model.learn(total_timesteps=steps)
    seconds = time.perf_counter() - start
    return {"steps": int(model.num_timesteps), "seconds": seconds, "steps_per_s": model.num_timesteps / seconds}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default=str(DEFAULT_DATA_DIR))
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--device", default="cpu", help="device of our agent/env (SB3 always runs on the CPU)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads for both sides")
    parser.add_argument("--ours-steps", type=int, default=4 * 16 * 1024, help="env steps timed for Paddock")
    parser.add_argument("--sb3-steps", type=int, default=2048 * 8, help="env steps timed for SB3 (whole rollouts)")
    parser.add_argument("--num-envs", type=int, default=1024)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    task = TaskSpec.from_dict(demo_task_dict())
    market = load_market_data(task.data, data_dir=args.data_dir, cache_dir=args.cache_dir)
    train = market.slice(*task.train, name="train")
    device = pick_device(args.device)
    print(f"data: {train.num_stocks} tickers, {train.num_days} days ({train.dates[0]} to {train.dates[-1]})")
    print(f"torch threads: {args.threads}; our device: {device}")

    ours = measure_ours(train, device=device, env_steps=args.ours_steps, num_envs=args.num_envs)
    sb3 = measure_sb3(train, env_steps=args.sb3_steps)
    ratio = ours["steps_per_s"] / sb3["steps_per_s"]

    rows = [
        (f"Paddock PPO ({args.num_envs} envs, {device})", ours),
        ("Stable-Baselines3 PPO (8 envs, DummyVecEnv, cpu)", sb3),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"\n{'run'.ljust(width)}  {'env steps':>10}  {'seconds':>8}  {'env-steps/s':>12}")
    for name, r in rows:
        print(f"{name.ljust(width)}  {r['steps']:>10,}  {r['seconds']:>8.1f}  {r['steps_per_s']:>12,.0f}")
    print(f"\nratio Paddock / SB3: {ratio:.1f}x (target >= 20x)")


if __name__ == "__main__":
    main()
